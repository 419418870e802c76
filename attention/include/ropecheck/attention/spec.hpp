// The attention problem around a RoPE spec: softmax scale, logit soft-cap, grouped-query heads, masks
// and attention sinks. Parameters only; the mathematics is in exact.hpp (scalar-templated) and the
// correctly rounded values come from engine.hpp.
//
// For a head group (G query heads sharing one key / value head) and tokens i at positions P_i:
//   Q_i = R(P_i) q_i,  K_j = R(P_j) k_j        the spec's rotation, attention factor included (both
//                                              rotated channels carry att, pass-through ones do not)
//   s(i, j) = scale * <Q_i, K_j>               scale = 1 / sqrt(scale_dim) (exact real) or a given binary64
//   t(i, j) = cap * tanh(s(i, j) / cap)         with a soft-cap (Gemma 2), else t = s
//   p(i, j) = exp(t(i, j)) / (exp(z_h) + sum over visible j' of exp(t(i, j')))
//                                               z_h the head's sink logit (gpt-oss); no sink: no exp(z_h)
//   o_i    = sum over visible j of p(i, j) V_j
// Visibility is by token index within the block: causal (j <= i), a sliding window (i - j < W; without
// causal also j - i < W), both, or neither. Positions only drive the rotation.
//
// Sources: Gemma 2 soft-cap (transformers models/gemma2 eager_attention_forward: scores / softcap, tanh,
// * softcap, before the mask); gpt-oss sinks (transformers models/gpt_oss eager_attention_forward: one
// learned logit per query head concatenated to the row, softmax over keys and sink, the sink's column
// dropped, so it only enlarges the denominator); sliding window (transformers masking_utils
// sliding_window_overlay: kv_idx > q_idx - sliding_window, and-ed with causal); the attention factor
// (research/variants.md 1.4 / 1.5: it multiplies cos and sin, so the logits carry its square).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ropecheck/core/attention_params.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::attention {

// The attention problem's parameters: core's AttentionParams (core/attention_params.hpp), one definition
// shared with the fused kernels (kernels/, kut/, the ABI), which must not depend on this module.
using AttentionSpec = AttentionParams;

// Throws SpecError naming the field: group < 1, scale not finite and positive, scale_dim < 0,
// softcap not finite and positive, window < 0, sinks of the wrong count or not finite, value_dim < 0.
void validate(const AttentionSpec& a, const RopeSpec& rope);

int value_dim(const AttentionSpec& a, const RopeSpec& rope);
// 1 / sqrt(d) when the scale is not given: d (the head_dim when scale_dim is 0); 0 when it is given.
int scale_sqrt_dim(const AttentionSpec& a, const RopeSpec& rope);

// The keys query i sees in a block of n tokens: the contiguous range [first, last], never empty (a
// query always sees its own token). core's attention_keys.
using KeyRange = AttentionKeys;
KeyRange visible_keys(const AttentionSpec& a, std::int64_t i, std::int64_t n);

// Where the scores of a block sit: row i's visible keys at offset(i) .. offset(i) + keys(i).size() - 1
// of one head's score array; total() scores per head.
class BlockLayout {
 public:
  BlockLayout(const AttentionSpec& a, std::int64_t tokens);
  std::int64_t tokens() const { return static_cast<std::int64_t>(keys_.size()); }
  const KeyRange& keys(std::int64_t i) const { return keys_[static_cast<std::size_t>(i)]; }
  std::int64_t offset(std::int64_t i) const { return offset_[static_cast<std::size_t>(i)]; }
  std::int64_t total() const { return offset_.back(); }

 private:
  std::vector<KeyRange> keys_;
  std::vector<std::int64_t> offset_;  // tokens + 1 entries
};

}  // namespace ropecheck::attention
