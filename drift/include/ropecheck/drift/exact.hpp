// The exact side of a drift sweep: cos / sin of every pair's angle and the rotated values, in
// double-double (about 106 bits) with a proven error far below anything a float recipe can show.
//
// Frequencies and the attention factor come from the reference (rope_frequencies<Real> with MPFR
// at 400 bits), held as triple-doubles (inverse frequency) and a double-double (attention
// factor). cos / sin come from the reference's fast engine (fast_rounding.hpp: sincos_scaled, an
// absolute error <= 2^-100 + 2^-101 |r| + 2^-146 |theta| for the angles of a sweep, i.e. below
// 1e-29 up to position 2^24), and from MPFR at 400 bits for the rare angle outside the engine's
// fast range. That is exact for every purpose of a drift measurement, whose smallest reported
// errors are about 1e-13 (an f32 angle error at small positions).
//
// Thread safety: the constructor sets Boost's process-wide MPFR precision while it runs (construct
// before starting threads); every other member is const and thread-safe (doubles only, and the raw
// MPFR API with explicit precisions in the fallback).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "ropecheck/reference/fast_rounding.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::drift {

class ExactRope {
 public:
  // seq_len as rope_frequencies takes it (dynamic NTK, LongRoPE's short / long switch).
  // Throws SpecError for an invalid or non-RoPE spec.
  ExactRope(const RopeSpec& rope, std::optional<std::int64_t> seq_len);

  const RopeSpec& spec() const { return spec_; }
  int pairs() const { return static_cast<int>(inv3_.size()); }
  // w_j rounded to binary64 (for the error model's |ln w| and |theta|).
  double inv_freq(int j) const { return inv3_[static_cast<std::size_t>(j)][0]; }
  DD attention_factor() const { return att_; }
  double attention_factor_f64() const { return att_.hi; }
  bool long_factors() const { return long_factors_; }

  // cos and sin of pair j's angle at position p (the stream mrope assigns to j), as DD.
  void cos_sin(const Position& p, int j, DD& cos_out, DD& sin_out) const;
  // Every pair: cos_out / sin_out hold pairs() values.
  void cos_sin_row(const Position& p, std::span<DD> cos_out, std::span<DD> sin_out) const;

 private:
  RopeSpec spec_;
  std::vector<std::array<double, 3>> inv3_;
  DD att_;
  bool long_factors_ = false;
};

// The wrapped difference kernel - exact of two angles, in [-pi, pi]: from the exact cos / sin
// of the true angle and the kernel angle (any finite double), as atan2 of the sine and cosine
// of the difference (absolute error about 1e-16; no reduction of the kernel needed).
// NaN when the kernel is not finite.
double wrapped_angle_error(double kernel, const DD& exact_cos, const DD& exact_sin);

// The exact rotated pair att * (a cos - b sin, b cos + a sin) as DD (a, b exact doubles).
struct RotatedPair {
  DD a, b;
};
RotatedPair exact_rotation(double a, double b, const DD& c, const DD& s, const DD& att);

// v - exact, as a double (the subtraction done in DD so it is accurate even when v is close).
inline double dd_error(double v, const DD& exact) {
  const DD d = dd::add(DD{v, 0.0}, dd::neg(exact));
  return d.hi + d.lo;
}

}  // namespace ropecheck::drift
