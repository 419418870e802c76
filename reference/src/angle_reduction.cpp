// Exact reduction modulo 2*pi (angle_reduction.hpp).
#include "ropecheck/reference/angle_reduction.hpp"

#include <mpfr.h>

#include <cmath>

namespace ropecheck {

double reduce_two_pi(double x) {
  if (!std::isfinite(x)) return std::nan("");
  if (std::fabs(x) <= 3.141592653589793) return x;  // below fl64(pi) < pi: already in range
  if (std::fabs(x) < 0x1p27) {
    // Three-part Cody-Waite 2pi (26 + 26 + 53 bits, 2pi to 2^-107): n * C1 and n * C2 are exact
    // for |n| < 2^25 and x - n * C1 is exact, so the result is within about 1 ulp of the exact one.
    const double n = std::nearbyint(x * 0x1.45f306dc9c883p-3);
    return ((x - n * 0x1.921fb5p+2) - n * 0x1.110b46p-24) - n * 0x1.1a62633145c07p-52;
  }
  // Larger: x - n * 2pi with n = round(x / 2pi) in MPFR, 2pi carried to 64 bits past x's integer
  // part, so the remainder is correct far below binary64's precision before its one rounding.
  int e = 0;
  std::frexp(x, &e);
  const auto prec = static_cast<mpfr_prec_t>(53 + e + 64);
  mpfr_t mx, two_pi, r;
  mpfr_inits2(prec, mx, two_pi, r, static_cast<mpfr_ptr>(nullptr));
  mpfr_set_d(mx, x, MPFR_RNDN);  // exact
  mpfr_const_pi(two_pi, MPFR_RNDN);
  mpfr_mul_2ui(two_pi, two_pi, 1, MPFR_RNDN);
  mpfr_remainder(r, mx, two_pi, MPFR_RNDN);
  const double out = mpfr_get_d(r, MPFR_RNDN);
  mpfr_clears(mx, two_pi, r, static_cast<mpfr_ptr>(nullptr));
  return out;
}

}  // namespace ropecheck
