// Rotation of every token's heads in double-double with an error bound per channel, kept as norms.
#include <cmath>
#include <limits>

#include "engine_impl.hpp"

namespace ropecheck::attention::detail {
namespace {

using dd::add;
using dd::mul;
using dd::neg;

constexpr double kInf = std::numeric_limits<double>::infinity();

// y = att (a c - b s) for the first channel of a pair, att (b c + a s) for the second, with c, s the DD
// cos / sin within E (absolute) each and a, b exact doubles:
//   a c, b s by DWTimesFP3 (2u^2 of each), their sum by AccurateDWPlusDW (<= 2^-104 of |x|):
//     |x - exact| <= (|a| + |b|) E + 2^-104 (|a c| + |b s| + |x|)
//   y = x att by DWTimesDW3 (5u^2 < 2^-103 of |y|), att within att_rel:
//     |y - exact| <= |att| e_x + |x| |att| att_rel + 2^-103 |y|
// evaluated in double and inflated by kUp (the bound's own roundings), plus 2^-1000 (a term that may
// underflow). Angle exactly 0 (E == 0: cos = 1, sin = +-0): x = a (resp. b) exactly.
struct Rotated {
  DD y;
  double e;
};

Rotated rotate_channel(const Impl& m, double a, double b, const SinCosDD& v, bool first) {
  DD x;
  double ex = 0;
  if (v.err == 0.0) {
    x = {first ? a : b, 0.0};
  } else {
    const DD p1 = mul(v.cos, first ? a : b);
    const DD p2 = mul(v.sin, first ? b : a);
    x = first ? add(p1, neg(p2)) : add(p1, p2);
    ex = (std::fabs(a) + std::fabs(b)) * v.err +
         0x1p-104 * (std::fabs(p1.hi) + std::fabs(p2.hi) + std::fabs(x.hi));
  }
  if (m.att_one) return {x, ex == 0 ? 0.0 : ex * kUp + 0x1p-1000};
  const DD y = mul(x, m.att);
  const double aat = std::fabs(m.att.hi) * (1 + 0x1p-50);
  const double e = aat * ex + std::fabs(x.hi) * (1 + 0x1p-50) * aat * m.att_rel + 0x1p-103 * std::fabs(y.hi);
  return {y, e == 0 ? 0.0 : e * kUp + 0x1p-1000};
}

// sqrt of a sum of squares computed in double, made an upper bound: each square and sum rounds by at
// most u, the square root by u: (1 + gamma(n + 2)) covers them (gradual underflow of a square only adds
// the 2^-1000 slack).
double norm_up(double sum_sq, int n) { return std::sqrt(sum_sq * (1 + gamma(n + 4))) * (1 + 0x1p-50) + 0x1p-500; }

}  // namespace

RotatedSet rotate_tokens(const Impl& m, std::span<const Position> positions, std::span<const double> x, int heads) {
  RotatedSet r;
  r.heads = heads;
  r.D = m.D;
  const std::size_t D = static_cast<std::size_t>(m.D), P = static_cast<std::size_t>(m.P);
  const std::size_t n = positions.size() * static_cast<std::size_t>(heads);
  r.hi.assign(n * D, 0.0);
  r.lo.assign(n * D, 0.0);
  r.norm_hi.assign(n, 0.0);
  r.norm_err.assign(n, 0.0);
  std::vector<SinCosDD> sc(P);
  std::vector<char> ok(P);
  std::vector<double> err(D);
  for (std::size_t t = 0; t < positions.size(); ++t) {
    for (std::size_t j = 0; j < P; ++j) {
      const double p = static_cast<double>(m.stream_position(positions[t], static_cast<int>(j)));
      const std::optional<SinCosDD> v = sincos_scaled(p, m.inv3[j], kInvRelErr);
      ok[j] = v.has_value() && !(m.options.force_fallback && v->err != 0.0);
      if (v) sc[j] = *v;
    }
    for (int h = 0; h < heads; ++h) {
      const std::size_t base = r.at(static_cast<std::int64_t>(t), h);
      const double* xh = x.data() + base * D;
      double* hi = r.hi.data() + base * D;
      double* lo = r.lo.data() + base * D;
      for (std::size_t j = 0; j < P; ++j) {
        const auto [ia, ib] = m.channels[j];
        const double a = xh[ia], b = xh[ib];
        if (!ok[j]) {
          err[static_cast<std::size_t>(ia)] = err[static_cast<std::size_t>(ib)] = kInf;
          continue;
        }
        const Rotated ya = rotate_channel(m, a, b, sc[j], true), yb = rotate_channel(m, a, b, sc[j], false);
        hi[ia] = ya.y.hi, lo[ia] = ya.y.lo, err[static_cast<std::size_t>(ia)] = ya.e;
        hi[ib] = yb.y.hi, lo[ib] = yb.y.lo, err[static_cast<std::size_t>(ib)] = yb.e;
      }
      for (int c : m.passthrough) {
        hi[c] = xh[c], lo[c] = 0.0, err[static_cast<std::size_t>(c)] = 0.0;
      }
      double sh = 0, se = 0;
      for (std::size_t c = 0; c < D; ++c) {
        sh += hi[c] * hi[c];
        se += err[c] * err[c];
      }
      r.norm_hi[base] = norm_up(sh, m.D);
      r.norm_err[base] = std::isfinite(se) ? (se == 0 ? 0.0 : norm_up(se, m.D)) : kInf;
    }
  }
  return r;
}

}  // namespace ropecheck::attention::detail
