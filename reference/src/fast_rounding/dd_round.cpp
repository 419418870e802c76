// round_dd: the correct rounding of a double-double value known to within an error bound, or
// nothing when the bound straddles a rounding boundary. See fast_rounding.hpp for the overview.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>

#include "fast_rounding_internal.hpp"

namespace ropecheck {
namespace {

using dd::two_sum;
using fast_rounding_detail::kInf;

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

}  // namespace ropecheck
