// exp, expm1, tanh and division in double-double with rigorous error bounds (dd_math.hpp).
//
// Notation: u = 2^-53; the DD building blocks of reference/double_double.hpp with their proven bounds
// (Joldes, Muller, Popescu 2017): DWPlusFP add(DD, double) <= 2u^2, AccurateDWPlusDW add(DD, DD)
// <= 3u^2 / (1 - 4u), DWTimesFP3 mul(DD, double) <= 2u^2, DWTimesDW3 mul(DD, DD) <= 5u^2, all relative
// to the exact result of the operation on its (computed) operands.
#include <mpfr.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>

#include "ropecheck/attention/dd_math.hpp"
#include "ropecheck/reference/mpfr_value.hpp"
#include "kernel.hpp"

namespace ropecheck::attention::detail {
namespace {

using dd::add;
using dd::fast_two_sum;
using dd::mul;
using dd::two_sum;

// Constants from MPFR at 320 bits, each rounded to nearest DD (relative error <= 2^-106):
//   two[i] = 2^(i/256), i = 0..255;
//   ln2/256 = l1 + l2 + l3 + e, l1 and l2 of 32 significant bits each, |e| <= 2^-53 |l3| < 2^-123 ln2/256;
//   inv_fact[k] = 1/k! for k = 0..21 (and its nearest double, inv_fact_d).
constexpr int kTable = 256;
struct Constants {
  std::array<DD, kTable> two;
  double l1 = 0, l2 = 0, l3 = 0;
  double inv_l = 0;  // RN(256 / ln 2), only to pick k
  std::array<DD, 22> inv_fact;
  std::array<double, 22> inv_fact_d;
};

DD dd_of(mpfr_srcptr v) {
  MpfrValue tmp(400);
  DD out;
  out.hi = mpfr_get_d(v, MPFR_RNDN);
  mpfr_sub_d(tmp.get(), v, out.hi, MPFR_RNDN);  // exact at 400 bits
  out.lo = mpfr_get_d(tmp.get(), MPFR_RNDN);
  return out;
}

// x rounded to nearest with `bits` significant bits, as a double.
double round_bits(mpfr_srcptr x, mpfr_prec_t bits) {
  MpfrValue t(bits);
  mpfr_set(t.get(), x, MPFR_RNDN);
  return mpfr_get_d(t.get(), MPFR_RNDN);  // exact: bits <= 53
}

Constants make_constants() {
  Constants k{};
  MpfrValue x(320), y(320);
  for (int i = 0; i < kTable; ++i) {
    mpfr_set_si(x.get(), i, MPFR_RNDN);
    mpfr_div_ui(x.get(), x.get(), kTable, MPFR_RNDN);
    mpfr_ui_pow(y.get(), 2, x.get(), MPFR_RNDN);
    k.two[static_cast<std::size_t>(i)] = dd_of(y.get());
  }
  mpfr_const_log2(x.get(), MPFR_RNDN);
  mpfr_div_ui(x.get(), x.get(), kTable, MPFR_RNDN);
  k.l1 = round_bits(x.get(), 32);
  mpfr_sub_d(y.get(), x.get(), k.l1, MPFR_RNDN);
  k.l2 = round_bits(y.get(), 32);
  mpfr_sub_d(y.get(), y.get(), k.l2, MPFR_RNDN);
  k.l3 = mpfr_get_d(y.get(), MPFR_RNDN);
  mpfr_ui_div(y.get(), 1, x.get(), MPFR_RNDN);
  k.inv_l = mpfr_get_d(y.get(), MPFR_RNDN);
  mpfr_set_ui(x.get(), 1, MPFR_RNDN);
  for (int i = 0; i < 22; ++i) {
    if (i > 1) mpfr_div_ui(x.get(), x.get(), static_cast<unsigned long>(i), MPFR_RNDN);
    k.inv_fact[static_cast<std::size_t>(i)] = dd_of(x.get());
    k.inv_fact_d[static_cast<std::size_t>(i)] = k.inv_fact[static_cast<std::size_t>(i)].hi;
  }
  mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
  return k;
}

const Constants& constants() {
  static const Constants k = make_constants();
  return k;
}

}  // namespace

// DWDivDW2 (Joldes, Muller, Popescu 2017, Algorithm 17) with the FMA product DWTimesFP3.
DD div(DD x, DD y) {
  const double th = x.hi / y.hi;
  const DD r = mul(y, th);
  const double pi_h = x.hi - r.hi;
  const double d_l = x.lo - r.lo;
  const double d = pi_h + d_l;
  const double tl = d / y.hi;
  return fast_two_sum(th, tl);
}

// 2^j for j in [-1022, 1023], exactly.
double pow2(int j) { return std::bit_cast<double>(static_cast<std::uint64_t>(j + 1023) << 52); }

// e^x = 2^j 2^(i/256) e^r with k = 256 j + i = RN(x.hi * 256/ln2) rounded to an integer, r = x - k ln2/256.
//
// Reduction. |x.hi| <= 700 gives |k| < 2^18; the quotient's rounding (<= 2^-52 relative) keeps
// |x.hi / (ln2/256) - k| <= 1/2 + 2^-33, so |r| <= 0.001354. k l1 and k l2 have at most 50 significant
// bits: exact. a = x.hi - k l1 is exact (k = 0: a = x.hi; otherwise x.hi and k l1 are within a factor 2,
// Sterbenz); two_sum(a, -k l2) is exact; adding x.lo and -RN(k l3) (DWPlusFP, twice) errs by
// <= 2u^2 (|r| + 2^-60) each; RN(k l3) by <= u |k l3| <= 2^-53 2^18 2^-72.5 = 2^-107.5; the constant's
// tail |k e| < 2^-113. So |r - (computed r)| <= 2^-107.
// Polynomial. P(r) = sum_{k<=9} r^k / k!, truncation <= |r|^10 / 10! e^|r| < 2^-117. The tail
// T = 1/5! + r (1/6! + ... + r / 9!) in double from r.hi (relative error <= 6u, r.lo's omission
// <= u |r| 1/6! / (1/5!)): T's error times |r|^5 <= 2^-54.5 stays below 2^-104.5. Then
// p <- p r + 1/k! for k = 4 .. 0 in DD: each step rounds by <= 5u^2 (DWTimesDW3) and 3.01u^2
// (AccurateDWPlusDW) relative to its result, weighted by |r|^k <= 2^-9.5 k; the coefficients' own error
// (2^-106, exact for k <= 1) by |r|^k / k!; the last sum (p r + 1) dominates: <= 3.1u^2 = 2^-104.4.
// In all |P - e^r| <= 2^-103.4 e^r.
// Scaling. Table entry (2^-106), DWTimesDW3 (5u^2 < 2^-103.6), then * 2^j exact while the result is
// normal (x.hi >= -650: e^x > 2^-938); a low part below the normal range rounds by <= 2^-1075 absolute.
// Total relative error: e^(2^-107) (1 + 2^-103.4)(1 + 2^-106)(1 + 2^-103.6) - 1 < 2^-102.3 <= kExpRel / 2.
ROPECHECK_ATTN_KERNEL
bool exp_dd(DD x, DD& out) {
  if (!(x.hi >= -650.0 && x.hi <= 700.0)) return false;
  const Constants& K = constants();
  const double kd = std::nearbyint(x.hi * K.inv_l);
  const double a = x.hi - kd * K.l1;
  DD r = two_sum(a, -(kd * K.l2));
  r = add(r, x.lo);
  r = add(r, -(kd * K.l3));
  const std::array<double, 22>& c = K.inv_fact_d;
  const double tail = c[5] + r.hi * (c[6] + r.hi * (c[7] + r.hi * (c[8] + r.hi * c[9])));
  DD p{tail, 0.0};
  for (int k = 4; k >= 0; --k) p = add(mul(p, r), K.inv_fact[static_cast<std::size_t>(k)]);
  const long ki = static_cast<long>(kd);
  const long i = ((ki % kTable) + kTable) % kTable;
  const double scale = pow2(static_cast<int>((ki - i) / kTable));
  const DD y = mul(K.two[static_cast<std::size_t>(i)], p);
  out = {y.hi * scale, y.lo * scale};
  return true;
}

// |x| <= 1/8: expm1(x) = x Q(x), Q = sum_{k<=20} x^k / (k+1)! by Horner in DD (truncation
// <= (1/8)^21 / 22! < 2^-133 relative; each step as in exp_dd, the last sum (Q r + 1) dominating:
// < 2^-104 relative), times x (DWTimesDW3, 5u^2): < 2^-103 relative.
// |x| > 1/8: e^x - 1 with e = exp_dd(x): |e - e^x| <= kExpRel e^x, then DWPlusFP (2u^2 relative):
// relative error <= kExpRel e^x / |e^x - 1| + 2u^2 <= kExpRel / (1 - e^-1/8) + 2u^2 < 8.6 kExpRel
// (x > 0: e^x / (e^x - 1) <= 1 / (1 - e^-1/8) = 8.51; x < 0: e^x / (1 - e^x) <= 7.51), within kExpm1Rel.
// x.hi < -650: e^x - 1 = -1 + e^x with e^x < 2^-937: -1 within 2^-937 (relative).
bool expm1_dd(DD x, DD& out) {
  if (!(std::fabs(x.hi) <= 700.0)) return false;
  if (std::fabs(x.hi) <= 0.125) {
    const Constants& K = constants();
    DD q = K.inv_fact[21];
    for (int k = 20; k >= 1; --k) q = add(mul(q, x), K.inv_fact[static_cast<std::size_t>(k)]);
    out = mul(q, x);
    return true;
  }
  if (x.hi < -650.0) {
    out = {-1.0, 0.0};
    return true;
  }
  DD e;
  exp_dd(x, e);
  out = add(e, -1.0);
  return true;
}

// tanh |x| = t / (t + 2), t = expm1(2 |x|) >= 0 (2|x| exact). t + 2 by DWPlusFP (2u^2), the quotient
// by div (kDivRel). d/dt [t / (t + 2)] * t / (t / (t + 2)) = 2 / (t + 2) <= 1, so t's relative error
// passes at most once: relative error <= kExpm1Rel + 2u^2 + kDivRel + (their products) < 2^-96.4.
// |x| > 40: tanh |x| = 1 - 2 / (e^2|x| + 1) lies within 2 e^-80 < 2^-114 of 1.
// Odd: tanh(-x) = -tanh x, exactly.
double tanh_dd(DD x, DD& out) {
  const bool neg = x.hi < 0;
  const DD a = neg ? DD{-x.hi, -x.lo} : x;
  double err = 0;
  if (a.hi > 40.0) {
    out = {1.0, 0.0};
    err = 0x1p-114;
  } else if (a.hi == 0.0) {
    out = {0.0, 0.0};
  } else {
    DD t;
    expm1_dd({2 * a.hi, 2 * a.lo}, t);
    out = div(t, add(t, 2.0));
    err = 0x1p-96 * std::fabs(out.hi);
  }
  if (neg) out = {-out.hi, -out.lo};
  return err;
}

}  // namespace ropecheck::attention::detail
