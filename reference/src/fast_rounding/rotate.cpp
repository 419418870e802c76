// Rotation of one head in double-double with a rigorous error bound per value (the fast path of
// RopeRoundingEngine). See fast_rounding.hpp for the overview.
#include <cmath>

#include "fast_rounding_internal.hpp"

namespace ropecheck::fast_rounding_detail {
namespace {

using dd::add;
using dd::mul;
using dd::neg;
using dd::two_prod;

// ---------------------------------------------------------------------------------------------
// Rotation of one head: y_a = att (a cos - b sin), y_b = att (b cos + a sin) for every pair.
//
// With c, s the DD cos / sin (absolute error E each) and a, b exact doubles:
//   a c, b s, b c, a s by DWTimesFP3 (relative <= 2u^2 < 2^-104 of the computed value),
//   x = a c - b s by AccurateDWPlusDW (<= 2^-104 |x|):
//     |x - (a cos - b sin)| <= (|a| + |b|) E + 2^-104 (|a c| + |b s| + |x|)
//   y = x * att by DWTimesDW3 (<= 2^-103 |y|), att known to att_rel_err (relative):
//     |y - exact| <= |att| e_x + |x att| att_rel_err + 2^-103 |y|
// evaluated in double and inflated by (1 + 2^-40) (the bound's own roundings) plus 2^-1000 (an
// underflowing term). Exact cases: angle exactly 0 (cos 1, sin +-0): x is computed in double
// exactly as MPFR computes it (same signed zeros), y = att x exactly when att is a double;
// a = b = 0: the result is a signed zero whose sign follows IEEE / MPFR rules from the signs of
// a, b, cos, sin and att (the sign of cos / sin must be certain, else the value falls back).
ROPECHECK_INLINE void rot_exact_zero_angle(double a, double b, double s0, DD att, bool att_one, bool att_exact,
                                           double att_rel_err, DD& y, double& e, bool first) {
  // MPFR: m1 = a * 1, m2 = b * s0, x = m1 - m2 (first) / x = b * 1 + a * s0 (second).
  const double x = first ? a - b * s0 : b + a * s0;
  if (att_one) {
    y = {x, 0.0};
    e = 0.0;
  } else if (x == 0.0) {
    y = {x * (att.hi < 0.0 ? -1.0 : 1.0), 0.0};
    e = 0.0;
  } else {
    y = mul(att, x);
    e = att_exact ? 0.0
                  : ((std::fabs(x * att.hi) * att_rel_err + 0x1p-103 * std::fabs(y.hi)) * (1.0 + 0x1p-40) + 0x1p-1000);
  }
}

}  // namespace

ROPECHECK_KERNEL
void rotate_head(const double* x, const RotIn* ch, const SinCosDD* sc, const unsigned char* ok, int n, DD att,
                 bool att_one, bool att_exact, double att_rel_err, DD* y, double* e) {
  for (int j = 0; j < n; ++j) {
    const double a = x[ch[j].ia], b = x[ch[j].ib];
    DD& ya = y[2 * j];
    DD& yb = y[2 * j + 1];
    double& ea = e[2 * j];
    double& eb = e[2 * j + 1];
    if (!ok[j]) {
      ea = eb = kInf;  // no fast value: round_dd refuses, the fallback takes it
      continue;
    }
    const SinCosDD& v = sc[j];
    if (v.err == 0.0) {  // angle exactly 0: cos = 1, sin = +-0
      rot_exact_zero_angle(a, b, v.sin.hi, att, att_one, att_exact, att_rel_err, ya, ea, true);
      rot_exact_zero_angle(a, b, v.sin.hi, att, att_one, att_exact, att_rel_err, yb, eb, false);
      continue;
    }
    if (a == 0.0 && b == 0.0) {
      // Signed zeros. cos / sin signs are certain when |hi| > 2 err (|lo| <= ulp(hi) / 2).
      if (!(std::fabs(v.cos.hi) > 2.0 * v.err && std::fabs(v.sin.hi) > 2.0 * v.err)) {
        ea = eb = kInf;
        continue;
      }
      const double cs = v.cos.hi < 0.0 ? -1.0 : 1.0, ss = v.sin.hi < 0.0 ? -1.0 : 1.0;
      const double as = att.hi < 0.0 ? -1.0 : 1.0;
      ya = {(a * cs - b * ss) * as, 0.0};
      yb = {(b * cs + a * ss) * as, 0.0};
      ea = eb = 0.0;
      continue;
    }
    const DD ac = mul(v.cos, a), bs = mul(v.sin, b), bc = mul(v.cos, b), as = mul(v.sin, a);
    const DD x1 = add(ac, neg(bs));
    const DD x2 = add(bc, as);
    const double ab_e = (std::fabs(a) + std::fabs(b)) * v.err;
    const double e1 = ab_e + 0x1p-104 * (std::fabs(ac.hi) + std::fabs(bs.hi) + std::fabs(x1.hi));
    const double e2 = ab_e + 0x1p-104 * (std::fabs(bc.hi) + std::fabs(as.hi) + std::fabs(x2.hi));
    if (att_one) {
      ya = x1;
      yb = x2;
      ea = e1 * (1.0 + 0x1p-40) + 0x1p-1000;
      eb = e2 * (1.0 + 0x1p-40) + 0x1p-1000;
    } else {
      ya = mul(x1, att);
      yb = mul(x2, att);
      const double aat = std::fabs(att.hi) * (1.0 + 0x1p-50);
      ea =
          (aat * e1 + std::fabs(x1.hi) * aat * att_rel_err + 0x1p-103 * std::fabs(ya.hi)) * (1.0 + 0x1p-40) + 0x1p-1000;
      eb =
          (aat * e2 + std::fabs(x2.hi) * aat * att_rel_err + 0x1p-103 * std::fabs(yb.hi)) * (1.0 + 0x1p-40) + 0x1p-1000;
    }
  }
}

}  // namespace ropecheck::fast_rounding_detail
