// A golden set's attention block as the checker reads it (golden/GOLDEN_FORMAT.md, "Attention blocks"):
// the block's tokens, inputs and parameters, the truth (attention_out.f64), and what output_bound needs
// per softmax row (accuracy/ERROR_MODEL.md 16.4): the exact logits (correctly rounded to binary64 by the
// attention engine), the probabilities from them, the exact rotated vectors and each class's bounds on
// them (16.3's internal score bound per key).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ropecheck/accuracy/attention_bounds.hpp"
#include "ropecheck/core/attention_params.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/golden/golden_set.hpp"

namespace ropecheck::checker::check_detail {

class AttentionBlock {
 public:
  // InputError when the set has no attention block, or its file disagrees with its manifest. The
  // engine's work (every visible logit, the rotated vectors) runs on `threads` workers.
  AttentionBlock(const golden::GoldenSet& g, int threads);

  std::int64_t T = 0, G = 0, D = 0, Dv = 0;
  std::string argument;
  AttentionParams params;  // scale set only when the set's scale is not 1 / sqrt(head_dim)
  double scale = 1;        // nearest binary64 (score_bound's)
  std::vector<std::int64_t> pos;   // per token
  std::vector<double> q, k, v;     // [T][G][D], [T][D], [T][Dv]
  std::vector<double> truth;       // attention_out.f64 [T][G][Dv]
  std::vector<double> Q, K;        // exact rotated, nearest doubles: [T][G][D], [T][D]
  std::vector<double> logits;      // [G][score total] row by row (attention_score_count's layout)
  std::vector<std::int64_t> offset;  // per token: where its row starts in one head's logits
  std::optional<accuracy::RopeGeometry> geo;

  AttentionKeys keys(std::int64_t i) const { return attention_keys(params, i, T); }

  // One softmax row's facts under class c with the rotated vectors held in dt (what output_bound takes):
  // probabilities, the sink's, the keys' internal score bounds, the logits' spread.
  struct Row {
    std::vector<double> p, eps;
    double p_sink = 0, spread = 0;
    accuracy::SoftmaxRow view() const { return {p, p_sink, eps, spread}; }
  };
  // Rotated-element bounds of class c in dt, per token: Eq [T][G][D], Ek [T][D].
  struct ClassErrors {
    std::vector<double> Eq, Ek;
  };
  ClassErrors class_errors(accuracy::AccuracyClass c, DType dt) const;
  void row(const ClassErrors& e, accuracy::AccuracyClass c, DType dt, std::int64_t i, std::int64_t h, Row& out) const;
};

}  // namespace ropecheck::checker::check_detail
