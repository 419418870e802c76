// Correctly rounded attention scores and outputs: the exact values of spec.hpp's formulas rounded ONCE
// (round to nearest, ties to even) to f64, f32, f16 and bf16, as golden values must be.
//
// Fast path (double-double, with a rigorous error bound per value; attention/ATTENTION.md and the
// comments at each step in src/):
//   - each token's q heads and k head rotated in DD (reference/double_double.hpp's sin / cos of the
//     exact inverse frequencies, kept as triple-doubles from MPFR), with an absolute bound per channel;
//   - each score a blocked compensated dot product (Dot2 in blocks of 32 terms, blocks summed in DD),
//     times the scale (DD), soft-capped with a DD tanh; bound: the dot product's own error, the
//     vectors' errors through Cauchy-Schwarz, the scale's and tanh's;
//   - each output row: exp of every logit minus the row's largest (DD exp with a table of 2^(i/64)),
//     the weighted sums of V by the same compensated dot product, one DD division by the sum.
// A value is rounded when its whole error interval rounds to one value (reference's round_dd).
// Certified fallback: the values the fast path leaves (within their error of a rounding boundary,
// outside its range, or exact ties) are computed again in MPFR ball arithmetic (src/ball.hpp: a centre
// and a radius that bounds every error, exact when every operation was) at 160, 320, ... bits up to
// kZivMaxBits, until the ball rounds to one value (Ziv's loop), with the logits in their relative form
// s = scale (att^2 sum_j [(q_a k_a + q_b k_b) cos(d w_j) + (q_b k_a - q_a k_b) sin(d w_j)] + pass-through),
// d the distance of the pair's stream, so that a distance 0 (the diagonal) is exact.
//
// Exact zeros are +0. Thread-safe: evaluate from any number of threads (MPFR with explicit precisions;
// Boost's process-wide default precision is only set inside the constructor).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "ropecheck/attention/spec.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/reference/fast_rounding.hpp"

namespace ropecheck::attention {

// Where the rounded values of one dtype go (doubles holding values of that dtype). Null skips.
struct AttentionOut {
  double* scores = nullptr;   // block: [group][layout.total()] (BlockLayout); pairs: [group][pairs]
  double* outputs = nullptr;  // block only: [tokens][group][value_dim]
};

struct AttentionEngineOptions {
  bool force_fallback = false;  // test hook: every value that is not exact goes to the MPFR fallback
  int threads = 1;              // worker threads of block() and pairs() (0: the hardware's count)
};

class AttentionEngine {
 public:
  static constexpr long kZivMaxBits = 4096;

  // max_abs_position: the largest |position| expected (positions beyond are still exact). Throws
  // SpecError for an invalid RoPE or attention spec.
  AttentionEngine(const RopeSpec& rope, std::optional<std::int64_t> seq_len, const AttentionSpec& attention,
                  std::int64_t max_abs_position, AttentionEngineOptions options = {});
  ~AttentionEngine();
  AttentionEngine(AttentionEngine&&) noexcept;
  AttentionEngine& operator=(AttentionEngine&&) noexcept;
  AttentionEngine(const AttentionEngine&) = delete;
  AttentionEngine& operator=(const AttentionEngine&) = delete;

  int head_dim() const;
  int value_dim() const;
  int group() const;
  double scale() const;             // nearest binary64 (reports)
  double attention_factor() const;  // nearest binary64

  // A block of tokens at `positions` (visibility: the spec's mask over token indices, BlockLayout):
  // q [tokens][group][head_dim], k [tokens][head_dim], v [tokens][value_dim] (empty: no outputs, and
  // every out[d].outputs must be null). At most 4 dtypes, one AttentionOut each. Inputs must be finite.
  void block(std::span<const Position> positions, std::span<const double> q, std::span<const double> k,
             std::span<const double> v, std::span<const DType> dtypes, std::span<const AttentionOut> out,
             RoundingStats& stats) const;

  // Scores of single pairs: tokens at `positions` with q [tokens][group][head_dim] and
  // k [tokens][head_dim]; pair p scores query token query_token[p] against key token key_token[p]
  // (pairs.hpp's pair_tokens). out[d].scores: [group][pairs]; outputs must be null.
  void pairs(std::span<const Position> positions, std::span<const double> q, std::span<const double> k,
             std::span<const std::int64_t> query_token, std::span<const std::int64_t> key_token,
             std::span<const DType> dtypes, std::span<const AttentionOut> out, RoundingStats& stats) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ropecheck::attention
