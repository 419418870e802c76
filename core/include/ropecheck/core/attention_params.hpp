// The parameters of an attention problem (attention::AttentionSpec is this struct: attention/spec.hpp
// has the formulas), also what a fused RoPE + attention kernel takes (kut::RopeAttentionCall,
// kernels/rope_attention.hpp, the kernel ABI's ropecheck_attention_params). In core so that kernels/ and
// kut/, which must not depend on attention/, share the one definition and its visibility rule.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace ropecheck {

struct AttentionParams {
  int group = 1;                  // query heads per key / value head (GQA)
  std::optional<double> scale;    // the softmax scale as a binary64 value, taken as exact
  int scale_dim = 0;              // without `scale`: 1 / sqrt(scale_dim), 0 = the head_dim
  std::optional<double> softcap;  // logit soft-cap: cap * tanh(s / cap)
  bool causal = true;             // key j visible to query i only when j <= i
  std::int64_t window = 0;        // sliding window in tokens (0: none)
  std::vector<double> sinks;      // one sink logit per query head of the group, or empty
  int value_dim = 0;              // channels of V (0 = the head_dim)
};

// The keys query i of a block of n tokens sees, by token index: [first, last], never empty.
struct AttentionKeys {
  std::int64_t first = 0, last = -1;
  std::int64_t size() const { return last >= first ? last - first + 1 : 0; }
};
inline AttentionKeys attention_keys(const AttentionParams& a, std::int64_t i, std::int64_t n) {
  AttentionKeys r{0, n - 1};
  if (a.causal) r.last = i;
  if (a.window > 0) {
    r.first = std::max<std::int64_t>(0, i - a.window + 1);
    if (!a.causal) r.last = std::min<std::int64_t>(n - 1, i + a.window - 1);
  }
  return r;
}

// Scores per query head of a block of n tokens: row i's visible keys, row after row (the layout of
// attention::BlockLayout and of the `scores` output of a fused call).
inline std::int64_t attention_score_count(const AttentionParams& a, std::int64_t n) {
  std::int64_t total = 0;
  for (std::int64_t i = 0; i < n; ++i) total += attention_keys(a, i, n).size();
  return total;
}

inline int attention_value_dim(const AttentionParams& a, int head_dim) { return a.value_dim > 0 ? a.value_dim : head_dim; }
// d of the scale 1 / sqrt(d) when the scale is not given; 0 when it is.
inline int attention_scale_dim(const AttentionParams& a, int head_dim) {
  return a.scale ? 0 : (a.scale_dim > 0 ? a.scale_dim : head_dim);
}

}  // namespace ropecheck
