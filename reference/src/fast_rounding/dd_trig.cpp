// sin / cos in double-double with a rigorous error bound: the MPFR-built tables, the reduction by
// pi/2 and the table-plus-polynomial evaluation. See fast_rounding.hpp for the overview.
#include <cmath>
#include <optional>

#include "fast_rounding_internal.hpp"

namespace ropecheck {
namespace {

using dd::add;
using dd::mul;
using dd::neg;
using dd::two_prod;
using dd::two_sum;
using fast_rounding_detail::AngleIn;
using fast_rounding_detail::sincos_batch;

// ---------------------------------------------------------------------------------------------
// Tables for sin / cos: sin(i/1024), cos(i/1024) for i = 0 .. kTableSize-1 as DD, pi/2 in four
// doubles, 2/pi, and the DD constants of the polynomials; all from MPFR at 320 bits, so each DD
// is within 2^-106 (relative, hence absolute for values <= 1) of the exact value.
constexpr int kTableSize = 808;  // |r| <= 0.7862 after reduction -> |i| <= 806

struct Tables {
  double s_hi[kTableSize], s_lo[kTableSize], c_hi[kTableSize], c_lo[kTableSize];
  double pio2[4];      // pi/2 = pio2[0] + ... + pio2[3] + e, |e| < 2^-210
  double two_over_pi;  // RN(2/pi), only used to pick the quadrant
  DD minus_sixth;      // -1/6
  DD one_24th;         // 1/24
};

void split_dd(mpfr_srcptr v, mpfr_ptr tmp, double& hi, double& lo) {
  hi = mpfr_get_d(v, MPFR_RNDN);
  mpfr_sub_d(tmp, v, hi, MPFR_RNDN);  // exact at 320 bits
  lo = mpfr_get_d(tmp, MPFR_RNDN);
}

Tables make_tables() {
  Tables T{};
  mpfr_t x, s, c, tmp;
  mpfr_inits2(320, x, s, c, tmp, static_cast<mpfr_ptr>(nullptr));
  for (int i = 0; i < kTableSize; ++i) {
    mpfr_set_si(x, i, MPFR_RNDN);
    mpfr_div_2ui(x, x, 10, MPFR_RNDN);
    mpfr_sin_cos(s, c, x, MPFR_RNDN);
    split_dd(s, tmp, T.s_hi[i], T.s_lo[i]);
    split_dd(c, tmp, T.c_hi[i], T.c_lo[i]);
  }
  mpfr_const_pi(x, MPFR_RNDN);
  mpfr_div_2ui(x, x, 1, MPFR_RNDN);
  for (double& part : T.pio2) {
    part = mpfr_get_d(x, MPFR_RNDN);
    mpfr_sub_d(x, x, part, MPFR_RNDN);
  }
  mpfr_const_pi(x, MPFR_RNDN);
  mpfr_ui_div(x, 2, x, MPFR_RNDN);
  T.two_over_pi = mpfr_get_d(x, MPFR_RNDN);
  mpfr_set_si(x, -1, MPFR_RNDN);
  mpfr_div_ui(x, x, 6, MPFR_RNDN);
  split_dd(x, tmp, T.minus_sixth.hi, T.minus_sixth.lo);
  mpfr_set_ui(x, 1, MPFR_RNDN);
  mpfr_div_ui(x, x, 24, MPFR_RNDN);
  split_dd(x, tmp, T.one_24th.hi, T.one_24th.lo);
  mpfr_clears(x, s, c, tmp, static_cast<mpfr_ptr>(nullptr));
  return T;
}

const Tables& tables() {
  static const Tables t = make_tables();
  return t;
}

// ---------------------------------------------------------------------------------------------
// sin / cos of theta = p * (i0 + i1 + i2) in DD.
//
// Reduction. (a0, a1) = 2Prod(p, i0), (b0, b1) = 2Prod(p, i1) exactly, c = RN(p i2); so
// theta = a0 + a1 + b0 + b1 + c up to |c - p i2| <= 2^-53 |p i2| <= 2^-158 |theta| plus the
// inverse frequency's own error inv_rel_err * |theta|. k = RN(a0 * RN(2/pi)) rounded to an
// integer: for |a0| <= 2^40 the computed quotient is within 2^-11 of a0 * 2/pi, so the reduced
// angle r = theta - k pi/2 has |r| <= (pi/2)(1/2 + 2^-11) < 0.7862. k pi/2 is subtracted as
// 2Prod(k, C0), 2Prod(k, C1), 2Prod(k, C2) (exact) and RN(k C3), with |pi/2 - sum C| < 2^-210.
// The three large differences a0 - d0, a1 - d1, b0 - e0 are exact (2Sum); the rest
// (b1 - e1 + c - f0 - f1 - g, each term <= 2^-104 |theta|) is summed in double (error
// <= 2^-153 |theta|); the DD sums (two AccurateDWPlusDW, one DWPlusFP) add at most
// 3 * 2^-104.4 * (|r| + 2^-50 |theta|). In all:
//     |r - (rh + rl)| <= 2^-101 |rh| + (2^-146 + inv_rel_err) * 1.001 |a0|     (err_r)
// with ample slack (the terms above sum to < 2^-102.5 |r| + 2^-150 |theta|).
//
// Evaluation. i = RN(1024 rh), a = i/1024, t = r - a = (rh - a) + rl exactly (rh - a is exact by
// Sterbenz, then 2Sum), |t| <= 2^-11 (1 + 2^-50). With S = sin a, C = cos a from the table
// (each within 2^-106):
//     sin t - t = t^3 (-1/6 + t^2 (1/120 - t^2/5040 + t^4/362880)),  truncation <= t^11/11! < 2^-140
//     cos t - 1 = t^2 (-1/2 + t^2 (1/24 + t^2 (-1/720 + t^2/40320))), truncation <= t^10/10! < 2^-131
//     sin(a + t) = S + (C t + (S (cos t - 1) + C (sin t - t)))
//     cos(a + t) = C + (-S t + (C (cos t - 1) - S (sin t - t)))
// The inner polynomials (1/120 ..., -1/720 ...) are in double: their errors (<= 2^-59 and
// <= 2^-82 absolute) are multiplied by t^5 <= 2^-55 resp. t^4 <= 2^-44 and give < 2^-113.
// The leading terms are DD: t^2 (2^-103 rel), -1/6 and 1/24 (DD constants), t^3, the products
// with S and C (C t ~ 2^-11 contributes <= 2^-107 (table) + 2^-114, S (cos t - 1) ~ 2^-23 and
// C (sin t - t) ~ 2^-35.6 contribute < 2^-113), and the final sums (<= 1.01: <= 2^-104 each,
// three of them weighted 1, 2^-11, 2^-23). The table's own error adds 2^-106 * (1 + |t|).
// Total < 2^-103.5 for sin(r) and cos(r) given r exactly; the code uses 2^-100. Since sin and
// cos are 1-Lipschitz, err = 2^-100 + err_r. The quadrant (k mod 4) swaps / negates exactly.
//
// Underflow: the guards (|a0| >= 2^-500, |rh| >= 2^-300) keep every quantity whose rounding the
// analysis counts far above the normal range; tiny t (even 0) only gives smaller terms whose
// absolute errors (< 2^-900) vanish in the bound's slack.
ROPECHECK_INLINE bool sincos_one(double p, double i0, double i1, double i2, double inv_rel_err, const Tables& T,
                                 SinCosDD& out) {
  if (p == 0.0 || (i0 == 0.0 && i1 == 0.0 && i2 == 0.0)) {
    const double z = p * i0;  // +-0 with the sign MPFR gives p * inv
    out.sin = {z, 0.0};
    out.cos = {1.0, 0.0};
    out.err = 0.0;
    return true;
  }
  const DD A = two_prod(p, i0);
  const double aa = std::fabs(A.hi);
  if (!(aa <= 0x1p40 && aa >= 0x1p-500)) return false;
  const DD B = two_prod(p, i1);
  const double c = p * i2;
  const double y = A.hi * T.two_over_pi;
  const double k = (y + 0x1.8p52) - 0x1.8p52;  // RN to an integer, |y| < 2^51
  const DD Dk = two_prod(k, T.pio2[0]);
  const DD Ek = two_prod(k, T.pio2[1]);
  const DD Fk = two_prod(k, T.pio2[2]);
  const double g = k * T.pio2[3];
  const DD S1 = two_sum(A.hi, -Dk.hi);
  const DD S2 = two_sum(A.lo, -Dk.lo);
  const DD S3 = two_sum(B.hi, -Ek.hi);
  const double rest = ((B.lo - Ek.lo) + (c - Fk.hi)) - (Fk.lo + g);
  const DD r = add(add(add(S1, S2), S3), rest);
  const double ar = std::fabs(r.hi);
  if (!(ar >= 0x1p-300)) return false;
  const double err_r = 0x1p-101 * ar + (0x1p-146 + inv_rel_err) * 1.001 * aa;

  const double fi = (r.hi * 1024.0 + 0x1.8p52) - 0x1.8p52;
  const int i = static_cast<int>(fi);
  const int ai = i < 0 ? -i : i;
  if (ai >= kTableSize) return false;
  const DD t = two_sum(r.hi - fi * 0x1p-10, r.lo);
  const double s_sign = i < 0 ? -1.0 : 1.0;
  const DD Sa{s_sign * T.s_hi[ai], s_sign * T.s_lo[ai]};
  const DD Ca{T.c_hi[ai], T.c_lo[ai]};

  const DD t2 = mul(t, t);
  const double w = t2.hi;
  const double ps = 1.0 / 120.0 + w * (-1.0 / 5040.0 + w * (1.0 / 362880.0));
  const DD vs = add(mul(t2, ps), T.minus_sixth);
  const DD t3 = mul(t2, t);
  const DD st = mul(t3, vs);  // sin t - t
  const double pc = -1.0 / 720.0 + w * (1.0 / 40320.0);
  const DD ic = add(T.one_24th, w * pc);
  const DD vc = add(mul(t2, ic), -0.5);
  const DD cm1 = mul(t2, vc);  // cos t - 1
  const DD sin_r = add(Sa, add(mul(Ca, t), add(mul(Sa, cm1), mul(Ca, st))));
  const DD cos_r = add(Ca, add(neg(mul(Sa, t)), add(mul(Ca, cm1), neg(mul(Sa, st)))));

  switch (static_cast<std::int64_t>(k) & 3) {
    case 0:
      out.sin = sin_r;
      out.cos = cos_r;
      break;
    case 1:
      out.sin = cos_r;
      out.cos = neg(sin_r);
      break;
    case 2:
      out.sin = neg(sin_r);
      out.cos = neg(cos_r);
      break;
    default:
      out.sin = neg(cos_r);
      out.cos = sin_r;
      break;
  }
  // The bound's own evaluation (three roundings) is covered by the factor.
  out.err = (0x1p-100 + err_r) * (1.0 + 0x1p-40);
  return true;
}

}  // namespace

namespace fast_rounding_detail {

ROPECHECK_KERNEL
void sincos_batch(const AngleIn* in, int n, double inv_rel_err, SinCosDD* out, unsigned char* ok) {
  const Tables& T = tables();
  for (int j = 0; j < n; ++j)
    ok[j] = sincos_one(in[j].p, in[j].inv[0], in[j].inv[1], in[j].inv[2], inv_rel_err, T, out[j]) ? 1 : 0;
}

}  // namespace fast_rounding_detail

std::optional<SinCosDD> sincos_scaled(double p, const std::array<double, 3>& inv3, double inv_rel_err) {
  const AngleIn in{p, inv3};
  SinCosDD out;
  unsigned char ok = 0;
  sincos_batch(&in, 1, inv_rel_err, &out, &ok);
  if (!ok) return std::nullopt;
  return out;
}

std::optional<SinCosDD> sincos_dd(double hi, double lo, double theta_err) {
  if (!(theta_err >= 0.0)) return std::nullopt;
  std::optional<SinCosDD> r = sincos_scaled(1.0, {hi, lo, 0.0}, 0.0);
  if (r) r->err = (r->err + theta_err) * (1.0 + 0x1p-50);
  return r;
}

}  // namespace ropecheck
