#include "ropecheck/reference/rounding.hpp"

#include "ropecheck/reference/mpfr_value.hpp"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace ropecheck {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();


// MPFR 4 allows 1-bit precision, which the smallest-subnormal binade needs.
static_assert(MPFR_PREC_MIN <= 1, "needs MPFR >= 4 (1-bit precision)");

}  // namespace

// Single RNE rounding. Instead of scaling by the quantum and calling mpfr_rint, round |x| to
// exactly as many bits as the format keeps in x's binade ("keep"): for normal binades that is p,
// in the subnormal range fewer, so the last kept bit always has weight = the format's quantum.
// MPFR's RNDN at that precision is then exactly the format's ties-to-even rounding, in one step,
// with no change to MPFR's exponent range.
double round_to_double(mpfr_srcptr x, DType t) {
  const FormatInfo& f = format_info(t);
  if (mpfr_nan_p(x)) return std::numeric_limits<double>::quiet_NaN();
  const bool neg = mpfr_signbit(x) != 0;
  if (mpfr_inf_p(x)) return neg ? -kInf : kInf;
  if (mpfr_zero_p(x)) return neg ? -0.0 : 0.0;

  // MPFR convention: |x| in [2^(e-1), 2^e).
  const mpfr_exp_t e = mpfr_get_exp(x);
  // |x| >= 2^(max_exp+1) is past max_finite + ulp/2 already; also keeps mpfr_get_d in range.
  if (e - 1 > f.max_exp) return neg ? -kInf : kInf;

  // Exponent of the quantum (weight of the last significand bit) in x's binade.
  const mpfr_exp_t quantum_exp =
      std::max<mpfr_exp_t>(e - f.precision, f.min_normal_exp - f.precision + 1);
  const mpfr_exp_t keep = e - quantum_exp;  // <= precision

  double mag = 0.0;
  if (keep >= 1) {
    MpfrValue y(static_cast<mpfr_prec_t>(keep));
    mpfr_abs(y.get(), x, MPFR_RNDN);  // the one rounding (ties to even)
    // Rounding may carry into the next binade; past max_exp that is overflow (this is where
    // max_finite + ulp/2, a tie, goes to the even neighbour 2^(max_exp+1) = inf).
    if (mpfr_get_exp(y.get()) - 1 > f.max_exp) return neg ? -kInf : kInf;
    mag = mpfr_get_d(y.get(), MPFR_RNDN);  // exact: <= 53 bits, in binary64 range
  } else if (keep == 0) {
    // 2^(quantum_exp-1) <= |x| < 2^quantum_exp: between 0 and the smallest subnormal. The exact
    // half is a tie between 0 (even) and the smallest subnormal (odd), so it goes to 0.
    const int cmp_half = neg ? -mpfr_cmp_si_2exp(x, -1, e - 1) : mpfr_cmp_ui_2exp(x, 1, e - 1);
    mag = cmp_half > 0 ? std::ldexp(1.0, static_cast<int>(quantum_exp)) : 0.0;
  }
  // keep < 0: |x| < half the smallest subnormal, rounds to zero.
  return neg ? -mag : mag;
}

double round_to_double(const boost::multiprecision::mpfr_float& x, DType t) {
  return round_to_double(x.backend().data(), t);
}

std::uint64_t round_to_bits(mpfr_srcptr x, DType t) {
  return double_to_bits(round_to_double(x, t), t);
}

std::uint64_t round_to_bits(const boost::multiprecision::mpfr_float& x, DType t) {
  return round_to_bits(x.backend().data(), t);
}

double to_f64(const boost::multiprecision::mpfr_float& x) { return round_to_double(x, DType::f64); }

float to_f32(const boost::multiprecision::mpfr_float& x) {
  // Exact: the value is already a binary32 value (or inf / NaN).
  return static_cast<float>(round_to_double(x, DType::f32));
}

std::uint16_t to_f16_bits(const boost::multiprecision::mpfr_float& x) {
  return static_cast<std::uint16_t>(round_to_bits(x, DType::f16));
}

std::uint16_t to_bf16_bits(const boost::multiprecision::mpfr_float& x) {
  return static_cast<std::uint16_t>(round_to_bits(x, DType::bf16));
}

}  // namespace ropecheck
