// Fast path in double-double with rigorous error bounds, MPFR fallback with Ziv's loop.
// See fast_rounding.hpp for the overview. Built with -ffp-contract=off (reference/CMakeLists.txt):
// every FMA here is an explicit std::fma, so each rounding the error analysis counts is the one
// the machine performs.
#include "ropecheck/reference/fast_rounding.hpp"

#include <mpfr.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "ropecheck/reference/rope_reference.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/reference/sinusoidal_reference.hpp"

// The hot kernels use FMA (2Prod). Built for baseline x86-64 (no -mfma), std::fma would be a
// library call; target_clones compiles the kernels twice, with and without FMA instructions,
// and picks one at load time (the results are identical: std::fma is exact either way).
#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && !defined(__FMA__) && \
    !defined(ROPECHECK_NO_FMA_CLONES)
#define ROPECHECK_KERNEL __attribute__((target_clones("fma", "default")))
#else
#define ROPECHECK_KERNEL
#endif
#if defined(__GNUC__)
#define ROPECHECK_INLINE __attribute__((always_inline)) inline
#else
#define ROPECHECK_INLINE inline
#endif

namespace ropecheck {
namespace {

using dd::add;
using dd::fast_two_sum;
using dd::mul;
using dd::neg;
using dd::two_prod;
using dd::two_sum;

constexpr double kInf = std::numeric_limits<double>::infinity();

// 2^k for k in [-1022, 1023], exact.
ROPECHECK_INLINE double pow2(int k) { return std::bit_cast<double>(static_cast<std::uint64_t>(k + 1023) << 52); }
constexpr double pow2c(int k) {
  double v = 1.0;
  for (; k > 0; --k) v *= 2.0;
  for (; k < 0; ++k) v *= 0.5;
  return v;
}
// floor(log2 x) for a positive normal double.
ROPECHECK_INLINE int exponent_of(double x) {
  return static_cast<int>((std::bit_cast<std::uint64_t>(x) >> 52) & 0x7ff) - 1023;
}
ROPECHECK_INLINE bool same_bits(double a, double b) {
  return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

// ---------------------------------------------------------------------------------------------
// round_dd
//
// For the positive value v = h + l (normalized DD, 2^-960 <= h <= 2^1000):
//   1. Candidate R = RNE_t(h): h itself for binary64; otherwise (h + C) - C with
//      C = 1.5 * 2^(qe + 52), qe the exponent of the quantum of t in h's binade (or the subnormal
//      quantum). h + C lies in [2^(qe+52), 2^(qe+53)), where the double spacing is 2^qe, so the
//      addition is the RNE rounding of h to a multiple of the quantum, and the subtraction is exact.
//   2. R's rounding interval is (R - gb/2, R + ga/2): ga the gap to the next value of t above R,
//      gb the gap below (ga/2 when R is a power of two, except at the bottom of the normal range),
//      for R = 0 the lower end is 0 itself (the sign of a zero result must be known), for the
//      largest finite value the upper end is the overflow threshold max + ulp/2.
//   3. D = v - R exactly: h - R is exact (Sterbenz: R is within a factor 2 of h, or R = 0), then
//      2Sum with l.
//   4. Exact mode (err == 0): compare D with +-ga/2, gb/2 exactly (a normalized DD compares
//      lexicographically) and step to the neighbour (ties to even). The candidate is at most one
//      step off, since |v - h| <= ulp_53(h)/2 <= quantum/2.
//   5. Otherwise R is returned only if ga/2 - D - err > slack and D - err + gb/2 > slack, both
//      evaluated in double with slack = 2^-50 * (sum of the magnitudes involved), which exceeds the
//      three roundings of each evaluation (<= 3 * 2^-53 * that sum). So a value is returned only
//      when the whole interval [v - err, v + err] lies strictly inside R's rounding interval.
// Overflow (formats other than binary64): when the candidate exceeds the largest finite value M,
// v is compared with the threshold T = M + ulp(M)/2 (a tie there goes to infinity, as in
// round_to_double).
template <int P, int EMIN, int EMAX>
std::optional<double> round_dd_fmt(double hi, double lo, double err) {
  if (!(std::isfinite(hi) && std::isfinite(lo))) return std::nullopt;
  if (!(err >= 0.0 && err <= std::numeric_limits<double>::max())) return std::nullopt;
  const DD v = two_sum(hi, lo);
  if (!std::isfinite(v.hi)) return std::nullopt;
  if (v.hi == 0.0) {  // hi + lo == 0 exactly (gradual underflow makes 2Sum exact)
    if (err != 0.0) return std::nullopt;
    return hi == 0.0 ? hi : 0.0;
  }
  const bool neg_v = v.hi < 0.0;
  const double h = neg_v ? -v.hi : v.hi;
  const double l = neg_v ? -v.lo : v.lo;
  if (!(h >= 0x1p-960 && h <= 0x1p1000)) return std::nullopt;
  auto sign = [neg_v](double r) { return neg_v ? -r : r; };

  constexpr int kQmin = EMIN - P + 1;  // exponent of the subnormal quantum
  constexpr double kMaxFin = (2.0 - pow2c(1 - P)) * pow2c(EMAX);
  constexpr double kHalfTop = pow2c(EMAX - P);  // ulp(max finite) / 2

  double R = h;
  bool overflow = false;
  if constexpr (P < 53) {
    if (h >= pow2c(EMAX + 1)) {
      overflow = true;
    } else {
      const int qe = std::max(exponent_of(h) - P + 1, kQmin);
      const double C = 1.5 * pow2(qe + 52);
      R = (h + C) - C;
      overflow = R > kMaxFin;
    }
  }
  if constexpr (P < 53) {
    if (overflow) {
      constexpr double T = kMaxFin + kHalfTop;  // exact: a value of binary64
      const DD s = two_sum(h, -T);              // s.hi >= 0 here (h >= T)
      if (err == 0.0) {
        // If s.hi > 0, s.hi >= ulp_53(h) > |l|; if s.hi == 0 then s.lo == 0 and v - T = l.
        const bool inf = s.hi > 0.0 || (s.hi == 0.0 && l >= 0.0);
        return sign(inf ? kInf : kMaxFin);
      }
      const double m = s.hi + (s.lo + l);  // v - T, error <= 2 * 2^-53 * (|s.hi| + |s.lo| + |l|)
      const double slack = 0x1p-50 * (std::fabs(s.hi) + std::fabs(s.lo) + std::fabs(l) + err);
      if (m - err > slack) return sign(kInf);
      // Below T by more than err; err < kHalfTop keeps the interval above M - ulp(M)/2 (v >= T - ulp_53).
      if (-m - err > slack && err < kHalfTop) return sign(kMaxFin);
      return std::nullopt;
    }
  }

  double ga, gb_half;
  int qR = kQmin;
  if (R == 0.0) {
    ga = pow2(kQmin);
    gb_half = 0.0;
  } else {
    const int eR = exponent_of(R);
    qR = std::max(eR - P + 1, kQmin);
    ga = pow2(qR);
    const bool power_of_two = (std::bit_cast<std::uint64_t>(R) & ((std::uint64_t{1} << 52) - 1)) == 0;
    gb_half = (power_of_two && eR > EMIN) ? 0.25 * ga : 0.5 * ga;
  }
  const double ga_half = 0.5 * ga;
  const DD d = two_sum(h - R, l);

  if (err == 0.0) {
    auto odd = [&](double r) {
      if (r == 0.0) return false;
      const double n = r * pow2(-qR);  // integer significand, exact (< 2^53)
      return (static_cast<std::uint64_t>(n) & 1u) != 0;
    };
    if (d.hi > ga_half || (d.hi == ga_half && d.lo > 0.0)) {
      R += ga;
    } else if (d.hi == ga_half && d.lo == 0.0) {
      if (odd(R)) R += ga;
    } else if (R > 0.0 && (d.hi < -gb_half || (d.hi == -gb_half && d.lo < 0.0))) {
      R -= 2.0 * gb_half;
    } else if (R > 0.0 && d.hi == -gb_half && d.lo == 0.0) {
      if (odd(R)) R -= 2.0 * gb_half;
    }
    if (P < 53 && R > kMaxFin) R = kInf;
    return sign(R);
  }
  const double slack = 0x1p-50 * (ga + std::fabs(d.hi) + std::fabs(d.lo) + err);
  const double m_up = ((ga_half - d.hi) - d.lo) - err;
  const double m_dn = ((d.hi + gb_half) - err) + d.lo;
  if (m_up > slack && m_dn > slack) return sign(R);
  return std::nullopt;
}

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

struct AngleIn {
  double p;
  std::array<double, 3> inv;
};

ROPECHECK_KERNEL
void sincos_batch(const AngleIn* in, int n, double inv_rel_err, SinCosDD* out, unsigned char* ok) {
  const Tables& T = tables();
  for (int j = 0; j < n; ++j)
    ok[j] = sincos_one(in[j].p, in[j].inv[0], in[j].inv[1], in[j].inv[2], inv_rel_err, T, out[j]) ? 1 : 0;
}

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
struct RotIn {
  int ia, ib;
};

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

// ---------------------------------------------------------------------------------------------
// MPFR fallback (Ziv).

// An mpfr_t with explicit precision, cleared on scope exit.
class Mp {
 public:
  explicit Mp(mpfr_prec_t prec) { mpfr_init2(v_, prec); }
  ~Mp() { mpfr_clear(v_); }
  Mp(const Mp&) = delete;
  Mp& operator=(const Mp&) = delete;
  mpfr_ptr get() { return v_; }
  mpfr_srcptr get() const { return v_; }

 private:
  mpfr_t v_;
};

// An error bound 2^e, or exactly zero.
struct Err2 {
  bool zero = true;
  long e = 0;
};
Err2 err_add(Err2 x, Err2 y) {
  if (x.zero) return y;
  if (y.zero) return x;
  return {false, std::max(x.e, y.e) + 1};
}
Err2 err_scale(Err2 x, long k) { return x.zero ? x : Err2{false, x.e + k}; }
Err2 err_pow(long e) { return {false, e}; }
// Rounding error of a w-bit RN result y: <= ulp(y)/2 = 2^(EXP(y) - w - 1) <= 2^(EXP(y) - w);
// zero when the operation was exact (ternary value 0).
Err2 err_round(mpfr_srcptr y, int ternary, mpfr_prec_t w) {
  if (ternary == 0) return {};
  return err_pow(static_cast<long>(mpfr_get_exp(y)) - static_cast<long>(w));
}
// k with |d| < 2^k (d a nonzero finite double).
long exp_of_double(double d) {
  int e = 0;
  (void)std::frexp(d, &e);
  return e;
}

struct ZivInputs {
  double p = 0;               // the position (an integer, exact)
  mpfr_srcptr inv = nullptr;  // stored inverse frequency: +0 exactly, or relative error <= 2^-guard_bits
  mpfr_srcptr att = nullptr;  // attention factor (rot only), same convention
  bool att_exact = false;
  long guard_bits = 0;  // stored precision - 64
};

enum class ZivQuantity { cos, sin, rot };

// Resolves results[i] for every i with need[i] != 0, for the value cos(theta), sin(theta) or
// att * (u cos(theta) + v sin(theta)), theta = p * inv. At precision w every operation is one
// correctly rounded MPFR call; the bound is propagated as a power of two (sin, cos are
// 1-Lipschitz; products scale by 2^EXP of the other factor). The interval [y - 2^e, y + 2^e] is
// widened outward (RNDD / RNDU) and both ends rounded with round_to_double: equal results
// (bitwise, so +0 and -0 differ) prove the rounding, since rounding is monotonic. Returns how
// many values it resolved.
int ziv_round(const ZivInputs& in, ZivQuantity q, double u, double v, std::span<const DType> types, double* results,
              unsigned char* need) {
  int todo = 0;
  for (std::size_t i = 0; i < types.size(); ++i) todo += need[i] ? 1 : 0;
  const int resolved_total = todo;
  if (todo == 0) return 0;

  const bool inv_zero = mpfr_zero_p(in.inv) != 0;
  long theta_exp = 0;
  if (in.p != 0.0 && !inv_zero) theta_exp = exp_of_double(in.p) + static_cast<long>(mpfr_get_exp(in.inv));
  constexpr mpfr_prec_t kMaxW = RopeRoundingEngine::kZivMaxBits;
  mpfr_prec_t w = std::min<mpfr_prec_t>(160 + std::max(0L, theta_exp), kMaxW);
  Mp P(64);
  mpfr_set_d(P.get(), in.p, MPFR_RNDN);  // exact: an integer below 2^64

  for (;; w = std::min<mpfr_prec_t>(2 * w, kMaxW)) {
    Mp th(w), s(w), c(w);
    const int t_th = mpfr_mul(th.get(), P.get(), in.inv, MPFR_RNDN);
    Err2 e_th = err_round(th.get(), t_th, w);
    if (!inv_zero && !mpfr_zero_p(th.get()))  // stored inverse frequency: |theta| 2^-guard <= 2^(EXP+1-guard)
      e_th = err_add(e_th, err_pow(static_cast<long>(mpfr_get_exp(th.get())) + 1 - in.guard_bits));
    const int t_sc = mpfr_sin_cos(s.get(), c.get(), th.get(), MPFR_RNDN);  // returns s + 4c, 0 = exact
    const Err2 e_s = err_add(e_th, err_round(s.get(), t_sc & 3, w));
    const Err2 e_c = err_add(e_th, err_round(c.get(), t_sc >> 2, w));

    Mp y(w);
    Err2 e_y;
    if (q == ZivQuantity::cos) {
      mpfr_set(y.get(), c.get(), MPFR_RNDN);
      e_y = e_c;
    } else if (q == ZivQuantity::sin) {
      mpfr_set(y.get(), s.get(), MPFR_RNDN);
      e_y = e_s;
    } else {
      Mp m1(w), m2(w), xs(w);
      const int t1 = mpfr_mul_d(m1.get(), c.get(), u, MPFR_RNDN);
      const int t2 = mpfr_mul_d(m2.get(), s.get(), v, MPFR_RNDN);
      Err2 e1 = err_round(m1.get(), t1, w), e2 = err_round(m2.get(), t2, w);
      if (u != 0.0) e1 = err_add(e1, err_scale(e_c, exp_of_double(u)));
      if (v != 0.0) e2 = err_add(e2, err_scale(e_s, exp_of_double(v)));
      const int tx = mpfr_add(xs.get(), m1.get(), m2.get(), MPFR_RNDN);
      const Err2 e_x = err_add(err_add(e1, e2), err_round(xs.get(), tx, w));
      if (mpfr_cmp_ui(in.att, 1) == 0 && in.att_exact) {
        mpfr_set(y.get(), xs.get(), MPFR_RNDN);
        e_y = e_x;
      } else {
        const int ty = mpfr_mul(y.get(), in.att, xs.get(), MPFR_RNDN);
        const long att_exp = static_cast<long>(mpfr_get_exp(in.att));
        e_y = err_add(err_scale(e_x, att_exp), err_round(y.get(), ty, w));
        if (!in.att_exact) {
          // |att_true - att| |x_true| with |x_true| <= |xs| + e_x < 2^(max(EXP(xs), e_x) + 1).
          long x_exp = mpfr_zero_p(xs.get()) ? LONG_MIN / 4 : static_cast<long>(mpfr_get_exp(xs.get()));
          if (!e_x.zero) x_exp = std::max(x_exp, e_x.e);
          if (!(mpfr_zero_p(xs.get()) && e_x.zero)) e_y = err_add(e_y, err_pow(att_exp + x_exp + 1 - in.guard_bits));
        }
      }
    }

    if (e_y.zero) {
      for (std::size_t i = 0; i < types.size(); ++i)
        if (need[i]) {
          results[i] = round_to_double(y.get(), types[i]);
          need[i] = 0;
        }
      return resolved_total;
    }
    Mp eps(8), lo(w + 8), hi(w + 8);
    mpfr_set_ui_2exp(eps.get(), 1, static_cast<mpfr_exp_t>(e_y.e), MPFR_RNDN);
    mpfr_sub(lo.get(), y.get(), eps.get(), MPFR_RNDD);
    mpfr_add(hi.get(), y.get(), eps.get(), MPFR_RNDU);
    for (std::size_t i = 0; i < types.size(); ++i) {
      if (!need[i]) continue;
      const double rl = round_to_double(lo.get(), types[i]);
      const double rh = round_to_double(hi.get(), types[i]);
      if (same_bits(rl, rh)) {
        results[i] = rl;
        need[i] = 0;
        --todo;
      }
    }
    if (todo == 0) return resolved_total;
    if (w >= kMaxW)
      throw std::runtime_error("ropecheck: correct rounding not settled at " + std::to_string(kMaxW) +
                               " bits (an exact midpoint?); please report this value");
  }
}

// An exact double rounded to t (pass-through channels).
double round_exact(double x, DType t) {
  if (const std::optional<double> r = round_dd(x, 0.0, 0.0, t)) return *r;
  Mp m(64);
  mpfr_set_d(m.get(), x, MPFR_RNDN);
  return round_to_double(m.get(), t);
}

constexpr mpfr_prec_t kStoredBits = RopeRoundingEngine::kZivMaxBits + 128;
constexpr long kStoredGuardBits = kStoredBits - 64;  // stored values: relative error <= 2^-kStoredGuardBits
// Relative error of the triple-double inverse frequency: splitting gives <= 2^-159; the stored
// value adds 2^-kStoredGuardBits. 2^-150 is used.
constexpr double kInvRelErr = 0x1p-150;

std::unique_ptr<Mp> stored_copy(const Real& v) {
  auto m = std::make_unique<Mp>(kStoredBits);
  mpfr_set(m->get(), v.backend().data(), MPFR_RNDN);
  return m;
}

std::array<double, 3> triple_of(mpfr_srcptr v) {
  Mp tmp(kStoredBits + 64);
  std::array<double, 3> out{};
  mpfr_set(tmp.get(), v, MPFR_RNDN);
  for (double& part : out) {
    part = mpfr_get_d(tmp.get(), MPFR_RNDN);
    mpfr_sub_d(tmp.get(), tmp.get(), part, MPFR_RNDN);  // exact
  }
  return out;
}

void check_position(std::int64_t p) {
  if (p > kMaxPosition || p < -kMaxPosition)
    throw std::invalid_argument("ropecheck: position " + std::to_string(p) + " is beyond +-2^53");
}

void check_max_position(std::int64_t m) {
  if (m > kMaxPosition || m < -kMaxPosition)
    throw SpecError("max_abs_position " + std::to_string(m) + " is beyond 2^53");
}

// Per-thread scratch for evaluate().
struct Scratch {
  std::vector<AngleIn> angles;
  std::vector<SinCosDD> sc;
  std::vector<unsigned char> ok;
  std::vector<DD> y;
  std::vector<double> e;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

std::optional<double> round_dd(double hi, double lo, double err, DType t) {
  switch (t) {
    case DType::f64:
      return round_dd_fmt<53, -1022, 1023>(hi, lo, err);
    case DType::f32:
      return round_dd_fmt<24, -126, 127>(hi, lo, err);
    case DType::f16:
      return round_dd_fmt<11, -14, 15>(hi, lo, err);
    case DType::bf16:
      return round_dd_fmt<8, -126, 127>(hi, lo, err);
  }
  throw std::invalid_argument("ropecheck: invalid DType");
}

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

// ---------------------------------------------------------------------------------------------
// RoPE engine

struct RopeRoundingEngine::Impl {
  int P = 0, D = 0;
  std::vector<int> stream;      // per pair
  std::vector<RotIn> channels;  // per pair
  std::vector<std::array<double, 3>> inv;
  std::vector<std::unique_ptr<Mp>> inv_mp;
  std::vector<int> passthrough;
  std::unique_ptr<Mp> att_mp;
  DD att;
  bool att_one = false, att_exact = false;
  double att_rel_err = 0.0;
  EngineOptions options;
};

RopeRoundingEngine::RopeRoundingEngine(const RopeSpec& rope, std::optional<std::int64_t> seq_len,
                                       std::int64_t max_abs_position, EngineOptions options)
    : impl_(std::make_unique<Impl>()) {
  check_max_position(max_abs_position);
  EncodingSpec spec;
  spec.name = "rope";
  spec.family = Family::rope;
  spec.rope = rope;
  validate(spec);
  Impl& m = *impl_;
  m.options = options;
  m.P = rope_pairs(rope);
  m.D = rope.head_dim;
  {
    ScopedPrecision prec(static_cast<unsigned>(kStoredBits));
    const RopeFrequencies<Real> f = rope_frequencies<Real>(rope, seq_len);
    for (const Real& v : f.inv_freq) m.inv_mp.push_back(stored_copy(v));
    m.att_mp = stored_copy(f.attention_factor);
  }
  std::vector<bool> covered(static_cast<std::size_t>(m.D), false);
  for (int j = 0; j < m.P; ++j) {
    m.stream.push_back(mrope_stream(rope, j));
    const auto [ia, ib] = pair_channels(rope, j);
    m.channels.push_back({ia, ib});
    covered[static_cast<std::size_t>(ia)] = covered[static_cast<std::size_t>(ib)] = true;
    m.inv.push_back(triple_of(m.inv_mp[static_cast<std::size_t>(j)]->get()));
  }
  for (int ch = 0; ch < m.D; ++ch)
    if (!covered[static_cast<std::size_t>(ch)]) m.passthrough.push_back(ch);
  const std::array<double, 3> att3 = triple_of(m.att_mp->get());
  m.att = {att3[0], att3[1]};
  m.att_one = mpfr_cmp_ui(m.att_mp->get(), 1) == 0;
  m.att_exact = mpfr_cmp_d(m.att_mp->get(), att3[0]) == 0;
  m.att_rel_err = m.att_exact ? 0.0 : 0x1p-104;
}

RopeRoundingEngine::~RopeRoundingEngine() = default;
RopeRoundingEngine::RopeRoundingEngine(RopeRoundingEngine&&) noexcept = default;
RopeRoundingEngine& RopeRoundingEngine::operator=(RopeRoundingEngine&&) noexcept = default;

int RopeRoundingEngine::pairs() const { return impl_->P; }
int RopeRoundingEngine::head_dim() const { return impl_->D; }
double RopeRoundingEngine::attention_factor() const { return impl_->att.hi; }

void RopeRoundingEngine::evaluate(const Position& pos, std::span<const double> x, int heads,
                                  std::span<const DType> dtypes, std::span<const RoundedOut> out,
                                  RoundingStats& stats) const {
  const Impl& m = *impl_;
  if (out.size() != dtypes.size()) throw std::invalid_argument("ropecheck: evaluate: one RoundedOut per dtype");
  for (std::int64_t v : {pos.t, pos.h, pos.w}) check_position(v);
  bool any_rot = false;
  for (const RoundedOut& o : out) any_rot = any_rot || o.rot != nullptr;
  if (any_rot) {
    if (heads < 0 || x.size() < static_cast<std::size_t>(heads) * static_cast<std::size_t>(m.D))
      throw std::invalid_argument("ropecheck: evaluate: x needs heads * head_dim values");
    for (std::size_t i = 0; i < static_cast<std::size_t>(heads) * static_cast<std::size_t>(m.D); ++i)
      if (!std::isfinite(x[i])) throw std::invalid_argument("ropecheck: evaluate: x must be finite");
  }

  const std::size_t P = static_cast<std::size_t>(m.P), nd = dtypes.size();
  Scratch& sc = scratch();
  sc.angles.resize(P);
  sc.sc.resize(P);
  sc.ok.resize(P);
  for (std::size_t j = 0; j < P; ++j) {
    const int st = m.stream[j];
    const std::int64_t p = st == 0 ? pos.t : (st == 1 ? pos.h : pos.w);
    sc.angles[j] = {static_cast<double>(p), m.inv[j]};
  }
  sincos_batch(sc.angles.data(), m.P, kInvRelErr, sc.sc.data(), sc.ok.data());
  if (m.options.force_fallback)
    for (std::size_t j = 0; j < P; ++j)
      if (sc.sc[j].err != 0.0) sc.ok[j] = 0;

  double results[4];
  unsigned char need[4];
  if (nd > 4) throw std::invalid_argument("ropecheck: evaluate: at most 4 dtypes");
  auto inputs_for = [&](std::size_t j) {
    ZivInputs in;
    in.p = sc.angles[j].p;
    in.inv = m.inv_mp[j]->get();
    in.att = m.att_mp->get();
    in.att_exact = m.att_exact;
    in.guard_bits = kStoredGuardBits;
    return in;
  };
  // Rounds one value for every dtype (fast path, then the fallback for the rest); writes via put.
  auto settle = [&](std::size_t j, bool ok, DD val, double err, ZivQuantity q, double u, double v, auto&& put) {
    int missing = 0;
    for (std::size_t d = 0; d < nd; ++d) {
      need[d] = 0;
      if (!put(d, nullptr)) continue;  // output not requested
      std::optional<double> r;
      if (ok) r = round_dd(val.hi, val.lo, err, dtypes[d]);
      if (r) {
        results[d] = *r;
        ++stats.fast_values;
      } else {
        need[d] = 1;
        ++missing;
      }
    }
    if (missing) stats.fallback_values += ziv_round(inputs_for(j), q, u, v, dtypes, results, need);
    for (std::size_t d = 0; d < nd; ++d)
      if (put(d, nullptr)) put(d, &results[d]);
  };

  for (std::size_t j = 0; j < P; ++j) {
    const SinCosDD& v = sc.sc[j];
    const bool ok = sc.ok[j] != 0;
    settle(j, ok, v.cos, v.err, ZivQuantity::cos, 0, 0, [&](std::size_t d, const double* r) {
      if (out[d].cos == nullptr) return false;
      if (r) out[d].cos[j] = *r;
      return true;
    });
    settle(j, ok, v.sin, v.err, ZivQuantity::sin, 0, 0, [&](std::size_t d, const double* r) {
      if (out[d].sin == nullptr) return false;
      if (r) out[d].sin[j] = *r;
      return true;
    });
  }
  if (!any_rot) return;

  sc.y.resize(2 * P);
  sc.e.resize(2 * P);
  const std::size_t D = static_cast<std::size_t>(m.D);
  for (int h = 0; h < heads; ++h) {
    const std::size_t base = static_cast<std::size_t>(h) * D;
    const double* xh = x.data() + base;
    rotate_head(xh, m.channels.data(), sc.sc.data(), sc.ok.data(), m.P, m.att, m.att_one, m.att_exact, m.att_rel_err,
                sc.y.data(), sc.e.data());
    for (std::size_t j = 0; j < P; ++j) {
      const double a = xh[m.channels[j].ia], b = xh[m.channels[j].ib];
      for (int which = 0; which < 2; ++which) {
        const std::size_t ch = static_cast<std::size_t>(which == 0 ? m.channels[j].ia : m.channels[j].ib);
        double err = sc.e[2 * j + static_cast<std::size_t>(which)];
        if (m.options.force_fallback && err != 0.0) err = kInf;
        settle(j, true, sc.y[2 * j + static_cast<std::size_t>(which)], err, ZivQuantity::rot, which == 0 ? a : b,
               which == 0 ? -b : a, [&](std::size_t d, const double* r) {
                 if (out[d].rot == nullptr) return false;
                 if (r) out[d].rot[base + ch] = *r;
                 return true;
               });
      }
    }
    for (int ch : m.passthrough) {
      const std::size_t c = static_cast<std::size_t>(ch);
      for (std::size_t d = 0; d < nd; ++d)
        if (out[d].rot != nullptr) {
          out[d].rot[base + c] = round_exact(xh[c], dtypes[d]);
          ++stats.fast_values;
        }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Sinusoidal engine

struct SinusoidalRoundingEngine::Impl {
  SinusoidalSpec spec;
  int n = 0;  // frequencies
  std::vector<SinusoidalColumn> columns;
  std::vector<std::array<double, 3>> w;
  std::vector<std::unique_ptr<Mp>> w_mp;
  std::unique_ptr<Mp> one;
  EngineOptions options;
};

SinusoidalRoundingEngine::SinusoidalRoundingEngine(const SinusoidalSpec& s, std::int64_t max_abs_position,
                                                   EngineOptions options)
    : impl_(std::make_unique<Impl>()) {
  check_max_position(max_abs_position);
  EncodingSpec spec;
  spec.name = "sinusoidal";
  spec.family = Family::sinusoidal;
  spec.sinusoidal = s;
  validate(spec);
  Impl& m = *impl_;
  m.spec = s;
  m.options = options;
  m.n = sinusoidal_frequency_count(s);
  {
    ScopedPrecision prec(static_cast<unsigned>(kStoredBits));
    for (const Real& v : sinusoidal_frequencies<Real>(s)) m.w_mp.push_back(stored_copy(v));
  }
  for (const auto& v : m.w_mp) m.w.push_back(triple_of(v->get()));
  for (int c = 0; c < s.d_model; ++c) m.columns.push_back(sinusoidal_column(s, c));
  m.one = std::make_unique<Mp>(2);
  mpfr_set_ui(m.one->get(), 1, MPFR_RNDN);
}

SinusoidalRoundingEngine::~SinusoidalRoundingEngine() = default;
SinusoidalRoundingEngine::SinusoidalRoundingEngine(SinusoidalRoundingEngine&&) noexcept = default;
SinusoidalRoundingEngine& SinusoidalRoundingEngine::operator=(SinusoidalRoundingEngine&&) noexcept = default;

int SinusoidalRoundingEngine::d_model() const { return impl_->spec.d_model; }

void SinusoidalRoundingEngine::evaluate(std::int64_t position, std::span<const DType> dtypes,
                                        std::span<double* const> rows, RoundingStats& stats) const {
  const Impl& m = *impl_;
  if (rows.size() != dtypes.size()) throw std::invalid_argument("ropecheck: evaluate: one row per dtype");
  if (dtypes.size() > 4) throw std::invalid_argument("ropecheck: evaluate: at most 4 dtypes");
  check_position(position);
  const std::int64_t p = position + m.spec.position_offset;
  check_position(p);
  const std::size_t n = static_cast<std::size_t>(m.n), nd = dtypes.size();
  Scratch& sc = scratch();
  sc.angles.resize(n);
  sc.sc.resize(n);
  sc.ok.resize(n);
  for (std::size_t i = 0; i < n; ++i) sc.angles[i] = {static_cast<double>(p), m.w[i]};
  sincos_batch(sc.angles.data(), m.n, kInvRelErr, sc.sc.data(), sc.ok.data());

  double results[4];
  unsigned char need[4];
  for (std::size_t c = 0; c < m.columns.size(); ++c) {
    const SinusoidalColumn col = m.columns[c];
    if (col.kind == SinusoidalKind::zero) {
      for (std::size_t d = 0; d < nd; ++d)
        if (rows[d]) {
          rows[d][c] = 0.0;
          ++stats.fast_values;
        }
      continue;
    }
    const std::size_t i = static_cast<std::size_t>(col.frequency);
    const SinCosDD& v = sc.sc[i];
    const bool sine = col.kind == SinusoidalKind::sine;
    const DD val = sine ? v.sin : v.cos;
    const bool ok = sc.ok[i] != 0 && !(m.options.force_fallback && v.err != 0.0);
    int missing = 0;
    for (std::size_t d = 0; d < nd; ++d) {
      need[d] = 0;
      if (!rows[d]) continue;
      std::optional<double> r;
      if (ok) r = round_dd(val.hi, val.lo, v.err, dtypes[d]);
      if (r) {
        results[d] = *r;
        ++stats.fast_values;
      } else {
        need[d] = 1;
        ++missing;
      }
    }
    if (missing) {
      ZivInputs in;
      in.p = static_cast<double>(p);
      in.inv = m.w_mp[i]->get();
      in.att = m.one->get();
      in.att_exact = true;
      in.guard_bits = kStoredGuardBits;
      stats.fallback_values += ziv_round(in, sine ? ZivQuantity::sin : ZivQuantity::cos, 0, 0, dtypes, results, need);
    }
    for (std::size_t d = 0; d < nd; ++d)
      if (rows[d]) rows[d][c] = results[d];
  }
}

}  // namespace ropecheck
