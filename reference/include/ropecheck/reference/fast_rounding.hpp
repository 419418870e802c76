// Fast, proven correct rounding of RoPE / sinusoidal values (Ziv's strategy).
//
// Golden values must be the exact value rounded ONCE (round-to-nearest-even) to f64, f32, f16
// and bf16. Plain MPFR per value is correct but slow (about 3 us per sin/cos). This module
// evaluates every value in double-double (DD, about 106 bits) together with a rigorous bound
// on its absolute error, and rounds it only when the whole error interval lies strictly inside
// one rounding interval of the target format (round_dd). When it does not (the value is within
// the error bound of a midpoint, or outside the fast path's range), that one value is evaluated
// again with the raw MPFR C API at increasing precision, each time with a proven error bound,
// until its error interval rounds to a single value (Ziv's loop; research/precision.md 2.4).
// The result is then bit-identical to ropecheck::round_to_double of the exact value.
//
// Error bounds (details at each function in src/fast_rounding/):
//   - DD building blocks are the algorithms of Joldes, Muller and Popescu, "Tight and rigorous
//     error bounds for basic building blocks of double-word arithmetic" (ACM TOMS 44(2), 2017):
//     error-free 2Sum / Fast2Sum / 2Prod (FMA), DWPlusFP (relative error <= 2u^2),
//     AccurateDWPlusDW (<= 3u^2 / (1 - 4u)), DWTimesFP3 (<= 2u^2), DWTimesDW3 (<= 5u^2),
//     u = 2^-53. The code budgets 2^-104 for a sum and 2^-103 for a product, i.e. more than the
//     proven bounds. They assume round-to-nearest (the default FP environment) and no FMA
//     contraction of other expressions (the library is built with -ffp-contract=off).
//   - sin/cos of an angle p * inv: the angle is carried as p * (i0 + i1 + i2), a triple-double
//     inverse frequency (relative error <= 2^-155 from the stored MPFR value), reduced by pi/2
//     given as four doubles (error < 2^-210), then a 1024-step table of sin/cos (DD, from MPFR)
//     and Taylor polynomials in DD. Absolute error <= 2^-100 + 2^-101 |r| + (2^-146 + e) |theta|
//     where r is the reduced angle and e the inverse frequency's relative error.
//   - The MPFR fallback carries bounds as powers of two from the precision of each correctly
//     rounded operation (mpfr ternary values mark exact results, so exact values such as
//     cos 0 = 1, or a * 1 at position 0, are rounded directly instead of looping forever).
//
// Thread safety: the engines' constructors set Boost's process-wide default MPFR precision
// (ScopedPrecision) while they run; construct engines while no other thread computes with
// ropecheck::Real. evaluate() is const and thread-safe: it uses only doubles and mpfr_t
// variables with explicit precision (never Boost's default precision).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "ropecheck/reference/double_double.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck {

// ---------------------------------------------------------------------------------------------
// Engines: correctly rounded golden values for one token at a time.

// Per-evaluate counters: output values settled by the fast path (including exact values) and
// values that needed the MPFR fallback. Summing over threads is up to the caller.
struct RoundingStats {
  std::int64_t fast_values = 0;
  std::int64_t fallback_values = 0;
  RoundingStats& operator+=(const RoundingStats& o) {
    fast_values += o.fast_values;
    fallback_values += o.fallback_values;
    return *this;
  }
};

// Where the rounded values of one dtype go (as doubles holding values of that dtype, which the
// caller encodes). Null pointers skip that output. cos / sin: [pairs]; rot: [heads * head_dim].
struct RoundedOut {
  double* cos = nullptr;
  double* sin = nullptr;
  double* rot = nullptr;
};

struct EngineOptions {
  // Test hook: send every value that is not exact to the MPFR fallback.
  bool force_fallback = false;
};

// RoPE: inverse frequencies and attention factor are computed once, with MPFR, in the
// constructor (rope_frequencies<Real> at kStoredBits bits); evaluate() then gives, per token,
// the correctly rounded cos / sin of each pair's angle (rope_cos_sin) and the rotated head
// vectors (rope_apply: att * (a cos - b sin), att * (b cos + a sin) on each pair's channels,
// pass-through channels copied), for every layout, partial, proportional and multimodal RoPE.
class RopeRoundingEngine {
 public:
  // Highest precision the fallback's Ziv loop may reach before it throws std::runtime_error
  // (never reached in practice: an exact midpoint is the only value that needs more, and exact
  // values are detected). Stored frequencies carry kZivMaxBits + 128 bits.
  static constexpr long kZivMaxBits = 4096;

  // max_abs_position: the largest |position| expected (at most kMaxPosition; positions beyond it
  // are still handled correctly). Throws SpecError for an invalid spec.
  RopeRoundingEngine(const RopeSpec& rope, std::optional<std::int64_t> seq_len, std::int64_t max_abs_position,
                     EngineOptions options = {});
  ~RopeRoundingEngine();
  RopeRoundingEngine(RopeRoundingEngine&&) noexcept;
  RopeRoundingEngine& operator=(RopeRoundingEngine&&) noexcept;
  RopeRoundingEngine(const RopeRoundingEngine&) = delete;
  RopeRoundingEngine& operator=(const RopeRoundingEngine&) = delete;

  int pairs() const;
  int head_dim() const;
  // The attention factor rounded to nearest binary64 (for reports).
  double attention_factor() const;

  // x: heads * head_dim doubles (ignored when no out[].rot is set). out[i] receives dtypes[i].
  // Positions need |p| <= kMaxPosition (std::invalid_argument otherwise); x must be finite.
  void evaluate(const Position& pos, std::span<const double> x, int heads, std::span<const DType> dtypes,
                std::span<const RoundedOut> out, RoundingStats& stats) const;

  // The same for heads normalized before the rotation (the Q/K RMSNorm stage, formulas/qk_norm.hpp):
  // head h is rotated as x_h * f / sqrt(mean(x_h^2) + eps), with norms[h] its stage (weights filled in;
  // nullptr: not normalized). x holds the stage's inputs (f32 values, so x * f is exact in binary64); the
  // scale is computed in MPFR and folded into the attention factor (relative error <= 2^-(guard bits)).
  void evaluate_normed(const Position& pos, std::span<const double> x, int heads,
                       std::span<const RmsNormStage* const> norms, std::span<const DType> dtypes,
                       std::span<const RoundedOut> out, RoundingStats& stats) const;

 private:
  struct Impl;
  struct HeadScale;
  void evaluate_heads(const Position& pos, std::span<const double> x, int heads, const HeadScale* scales,
                      std::span<const DType> dtypes, std::span<const RoundedOut> out, RoundingStats& stats) const;
  std::unique_ptr<Impl> impl_;
};

// Sinusoidal: rows PE(position) with the angle (position + position_offset) * w_i; zero columns
// (odd widths of tensor2tensor / fairseq) are exact zeros.
class SinusoidalRoundingEngine {
 public:
  SinusoidalRoundingEngine(const SinusoidalSpec& spec, std::int64_t max_abs_position, EngineOptions options = {});
  ~SinusoidalRoundingEngine();
  SinusoidalRoundingEngine(SinusoidalRoundingEngine&&) noexcept;
  SinusoidalRoundingEngine& operator=(SinusoidalRoundingEngine&&) noexcept;
  SinusoidalRoundingEngine(const SinusoidalRoundingEngine&) = delete;
  SinusoidalRoundingEngine& operator=(const SinusoidalRoundingEngine&) = delete;

  int d_model() const;

  // rows[i]: d_model values of dtypes[i] (null skips). |position + offset| <= kMaxPosition.
  void evaluate(std::int64_t position, std::span<const DType> dtypes, std::span<double* const> rows,
                RoundingStats& stats) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ropecheck
