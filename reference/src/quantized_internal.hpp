// Exact arithmetic shared by the quantized stores' golden values (quantized_rounding.cpp,
// quantized_affine.cpp): exact sums and products, quotients rounded to odd, one rounding to a binary
// grid or to an integer by a given tie rule, and distances to decision boundaries.
//
// Round to odd: a quotient truncated at P bits with its last bit set when inexact, then rounded once
// to a grid of at most P - 2 bits, gives the correct rounding of the exact quotient (Boldo and
// Melquiond, "When double rounding is odd", 2005), and a truncated value that lands on a tie of that
// grid is exact. Every quotient here is rounded to odd at 64 bits more than its operands.
#pragma once

#include <mpfr.h>

#include <cmath>
#include <limits>
#include <memory>

#include "ropecheck/core/dtype.hpp"
#include "ropecheck/reference/mpfr_value.hpp"

namespace ropecheck::quant::detail {

using Mp = std::unique_ptr<MpfrValue>;
inline constexpr double kInf = std::numeric_limits<double>::infinity();

inline Mp mp(mpfr_prec_t prec) { return std::make_unique<MpfrValue>(prec); }
// A double, exactly.
Mp mp_d(double v);
// a - b, a * k (k a double), exactly: the precision is chosen to hold the result.
Mp sub_exact(mpfr_srcptr a, mpfr_srcptr b);
Mp mul_exact(mpfr_srcptr a, double k);
// |a|, exactly.
Mp abs_exact(mpfr_srcptr a);
// a / b rounded to odd at max(prec(a), prec(b)) + 64 bits.
Mp div_odd(mpfr_srcptr a, mpfr_srcptr b);

// x rounded once, to nearest even, to `precision` bits with gradual underflow below
// 2^min_normal_exp and no exponent limit above (+-inf only for huge x); NaN, signed zero kept.
double round_binary(mpfr_srcptr x, int precision, int min_normal_exp);

// Rounding to an integer: rint (ties to even), roundf (ties away from zero), floor(t + 1/2) (ties up).
enum class IntRule { nearest_even, nearest_away, half_up };
// t rounded to odd (or exact); |t| < 2^62.
long round_int(mpfr_srcptr t, IntRule rule);

// Distance from t to the nearest point where an integer code clamped to [lo, hi] changes, given the
// code t rounds to: the half-integers code -+ 1/2 inside the clamp range (+inf when neither is).
double int_distance(double t, long code, long lo, long hi);
// Distance from |x| to the nearest boundary of its one rounding to dtype t (the midpoints with its
// neighbours; max_finite + ulp / 2 for an overflow).
double dtype_distance(mpfr_srcptr x, DType t);

// a - b for a distance measured in binary64 from a value known to within half an ulp: less the
// value's possible error (2^-52 |scale|), never below zero; exactly 0 on a tie.
inline double distance_down(double d, double scale) {
  const double r = d - std::ldexp(std::fabs(scale), -52);
  return r > 0 ? r : 0.0;
}
// A margin computed in binary64 made a lower bound: rounded down by 2^-40 relative, never negative.
inline double lower(double m) { return m > 0 ? m * (1 - std::ldexp(1.0, -40)) : 0.0; }

}  // namespace ropecheck::quant::detail
