// Double-double arithmetic, the proven rounding of a double-double enclosure (round_dd) and sin /
// cos in double-double with a rigorous error bound: the fast path of the correct-rounding engines
// (fast_rounding.hpp, which explains the error bounds), in a header without MPFR or Boost so that
// the units of that path which need no MPFR stay light to compile.
#pragma once

#include <array>
#include <cmath>
#include <optional>

#include "ropecheck/core/dtype.hpp"

namespace ropecheck {

// ---------------------------------------------------------------------------------------------
// Double-double arithmetic. A DD (hi, lo) stands for the exact sum hi + lo; "normalized" means
// |lo| <= ulp(hi) / 2 (what two_sum and every DD operation here return). These helpers contain
// no expression that FMA contraction could change (products feed only explicit std::fma calls
// or stand alone), so they are exact / within their bounds in any translation unit.
struct DD {
  double hi = 0.0;
  double lo = 0.0;
};

namespace dd {

// Always inlined, so that they take the instruction set of the caller (the library's kernels are
// compiled with and without FMA instructions and picked at load time).
#if defined(__GNUC__)
#define ROPECHECK_DD_INLINE __attribute__((always_inline)) inline
#else
#define ROPECHECK_DD_INLINE inline
#endif

// s + e = a + b exactly (Knuth's 2Sum), s = RN(a + b).
ROPECHECK_DD_INLINE DD two_sum(double a, double b) {
  const double s = a + b;
  const double bb = s - a;
  const double e = (a - (s - bb)) + (b - bb);
  return {s, e};
}

// s + e = a + b exactly when |a| >= |b| or a == 0 (Dekker's Fast2Sum).
ROPECHECK_DD_INLINE DD fast_two_sum(double a, double b) {
  const double s = a + b;
  const double e = b - (s - a);
  return {s, e};
}

// p + e = a * b exactly (2Prod with FMA), barring underflow of e.
ROPECHECK_DD_INLINE DD two_prod(double a, double b) {
  const double p = a * b;
  const double e = std::fma(a, b, -p);
  return {p, e};
}

ROPECHECK_DD_INLINE DD neg(DD x) { return {-x.hi, -x.lo}; }

// DWPlusFP: x + y, relative error <= 2u^2.
ROPECHECK_DD_INLINE DD add(DD x, double y) {
  const DD s = two_sum(x.hi, y);
  const double v = x.lo + s.lo;
  return fast_two_sum(s.hi, v);
}

// AccurateDWPlusDW: x + y, relative error <= 3u^2 / (1 - 4u) (relative to the exact sum, so it
// stays small under cancellation).
ROPECHECK_DD_INLINE DD add(DD x, DD y) {
  const DD s = two_sum(x.hi, y.hi);
  const DD t = two_sum(x.lo, y.lo);
  const double c = s.lo + t.hi;
  const DD v = fast_two_sum(s.hi, c);
  const double w = t.lo + v.lo;
  return fast_two_sum(v.hi, w);
}

// DWTimesFP3: x * y, relative error <= 2u^2.
ROPECHECK_DD_INLINE DD mul(DD x, double y) {
  const DD c = two_prod(x.hi, y);
  const double cl3 = std::fma(x.lo, y, c.lo);
  return fast_two_sum(c.hi, cl3);
}

// DWTimesDW3: x * y, relative error <= 5u^2.
ROPECHECK_DD_INLINE DD mul(DD x, DD y) {
  const DD c = two_prod(x.hi, y.hi);
  const double tl0 = x.lo * y.lo;
  const double tl1 = std::fma(x.hi, y.lo, tl0);
  const double cl2 = std::fma(x.lo, y.hi, tl1);
  const double cl3 = c.lo + cl2;
  return fast_two_sum(c.hi, cl3);
}

}  // namespace dd

// ---------------------------------------------------------------------------------------------
// Rounding with a proven enclosure.
//
// The unknown exact value v satisfies |v - (hi + lo)| <= err. Returns RNE(v) in format t as a
// double (exactly the value ropecheck::round_to_double would return for v), or nullopt when that
// cannot be decided: the interval [hi+lo-err, hi+lo+err] touches a rounding boundary of t (a
// midpoint, the overflow threshold, or zero, whose sign would be unknown), the inputs are not
// finite, or |hi + lo| lies outside [2^-960, 2^1000] (there the caller falls back to MPFR).
// err == 0 means hi + lo is exact: then ties are resolved to even and nullopt is returned only
// for the range reason above. An exact zero (hi + lo == 0, err == 0) returns hi when hi is a
// zero (its sign kept), else +0.
std::optional<double> round_dd(double hi, double lo, double err, DType t);

// ---------------------------------------------------------------------------------------------
// sin and cos in DD with a rigorous absolute error bound: |sin(theta) - (sin.hi + sin.lo)| <= err
// and the same for cos.
struct SinCosDD {
  DD sin;
  DD cos;
  double err = 0.0;
};

// theta = p * inv with inv = inv3[0] + inv3[1] + inv3[2] (up to inv_rel_err * |inv|); p is any
// double (positions are integers, exact in double). nullopt outside the fast path's range
// (|theta| > 2^40, |theta| < 2^-500, a reduced angle below 2^-300); theta == 0 exactly (p == 0 or
// inv == 0 given as three zeros) gives sin = +-0 (sign of p * inv), cos = 1, err = 0.
std::optional<SinCosDD> sincos_scaled(double p, const std::array<double, 3>& inv3, double inv_rel_err);
// theta = hi + lo (any DD) known to within theta_err.
std::optional<SinCosDD> sincos_dd(double hi, double lo, double theta_err);

}  // namespace ropecheck
