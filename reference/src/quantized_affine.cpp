// Golden values of MLX's group-affine store (reference/quantized_rounding.hpp, mlx_affine_exact):
// mlx_affine_quantize's algorithm (core/src/quantized_blocks.cpp) with exact arithmetic.
//
// Margins (the largest eps such that moving every value of the group by at most eps changes no code):
// the group's decisions move with its extremes, R = max - min by at most 2 eps and the edge by eps:
//   - the edge choice |min| > |max|: ||min| - |max|| / 2;
//   - the clamp of s0 at 1e-7f (R against n 1e-7f): |R - n 1e-7f| / 2;
//   - q0 = rint(t0), t0 = n edge / R: |t0' - t0| <= n eps (R + 2 |edge|) / (R (R - 2 eps)), below the
//     distance d0 of t0 to its rounding boundaries iff eps < d0 R^2 / (n (R + 2 |edge|) + 2 d0 R);
//     with the clamp, t0 = edge / 1e-7f moves by eps / 1e-7f;
//   - a code, q0 != 0: t = q0 (x - edge) / edge, |t' - t| <= |q0| eps (|edge| + |x|) / (|edge| (|edge| - eps)),
//     so eps < d e^2 / (|q0| (|e| + |x|) + d |e|); q0 = 0: t = n x / R, eps < d R^2 / (n (R + 2 |x|) + 2 d R),
//     or x / 1e-7f with the clamp.
// A code's margin is the least of its own and the group's decisions; the group's stored scale and
// bias add the distances of edge / q0 (moving by eps / |q0|) and edge to their roundings.
#include <algorithm>
#include <stdexcept>

#include "quantized_internal.hpp"
#include "ropecheck/reference/quantized_rounding.hpp"
#include "ropecheck/reference/rounding.hpp"

namespace ropecheck::quant {
namespace {

using namespace detail;

struct GroupDecision {
  long q0 = 0;
  bool clamped = false;
  double sign = 1;     // the sign of s0: + when |min| > |max|
  double margin = 0;   // the least of the edge, clamp and q0 margins
};

GroupDecision decide_group(mpfr_srcptr lo, mpfr_srcptr hi, mpfr_srcptr r, mpfr_srcptr edge, double n, double eps32) {
  GroupDecision g;
  g.sign = mpfr_cmpabs(lo, hi) > 0 ? 1.0 : -1.0;
  const Mp dabs = sub_exact(abs_exact(lo)->get(), abs_exact(hi)->get());
  const double edge_margin = std::fabs(mpfr_get_d(dabs->get(), MPFR_RNDN)) / 2;
  const Mp neps = mp_d(n * eps32);  // exact: an 8-bit integer times a binary32 value
  g.clamped = mpfr_cmp(r, neps->get()) < 0;
  const Mp rmn = sub_exact(r, neps->get());
  const double clamp_margin = std::fabs(mpfr_get_d(rmn->get(), MPFR_RNDN)) / 2;
  const double rd = mpfr_get_d(r, MPFR_RNDN), ed = mpfr_get_d(edge, MPFR_RNDN);
  Mp t0;
  if (g.clamped) {
    const Mp s0 = mp_d(g.sign * eps32);
    t0 = div_odd(edge, s0->get());
  } else {
    const Mp num = mul_exact(edge, g.sign * n);
    t0 = div_odd(num->get(), r);
  }
  g.q0 = round_int(t0->get(), IntRule::nearest_even);
  const double t0d = mpfr_get_d(t0->get(), MPFR_RNDN);
  const double d0 = int_distance(t0d, g.q0, std::numeric_limits<long>::min(), std::numeric_limits<long>::max());
  const double q0_margin = g.clamped ? d0 * eps32 : d0 * rd * rd / (n * (rd + 2 * std::fabs(ed)) + 2 * d0 * rd);
  g.margin = std::min({edge_margin, clamp_margin, q0_margin});
  return g;
}

// One group: codes and margins into `out` from element `first` on, its scale and bias appended.
void affine_group(std::span<const mpfr_srcptr> w, const AffineSpec& spec, std::size_t first, AffineExact& out) {
  const auto n = static_cast<double>((1 << spec.bits) - 1);
  const auto nl = static_cast<long>(n);
  const double eps32 = static_cast<double>(1e-7f);
  mpfr_srcptr lo = w[0], hi = w[0];
  for (mpfr_srcptr x : w) {
    if (mpfr_cmp(x, lo) < 0) lo = x;
    if (mpfr_cmp(x, hi) > 0) hi = x;
  }
  const Mp r = sub_exact(hi, lo);
  mpfr_srcptr edge = mpfr_cmpabs(lo, hi) > 0 ? lo : hi;
  const GroupDecision g = decide_group(lo, hi, r->get(), edge, n, eps32);
  const double rd = mpfr_get_d(r->get(), MPFR_RNDN), ed = mpfr_get_d(edge, MPFR_RNDN);
  AffineGroup stored;
  double scale_margin = g.margin;
  Mp s0;  // q0 = 0: the scale s0 = sign R / n (or sign 1e-7f)
  if (g.q0 != 0) {
    const Mp q0 = mp_d(static_cast<double>(g.q0));
    const Mp scale = div_odd(edge, q0->get());
    stored = {round_to_double(scale->get(), spec.scale_dtype), round_to_double(edge, spec.scale_dtype)};
    scale_margin = std::min({scale_margin, dtype_distance(scale->get(), spec.scale_dtype) * std::fabs(static_cast<double>(g.q0)),
                             dtype_distance(edge, spec.scale_dtype)});
  } else {
    if (g.clamped) {
      s0 = mp_d(g.sign * eps32);
    } else {
      const Mp nn = mp_d(g.sign * n);
      s0 = div_odd(r->get(), nn->get());
      scale_margin = std::min(scale_margin, dtype_distance(s0->get(), spec.scale_dtype) * n / 2);
    }
    stored = {round_to_double(s0->get(), spec.scale_dtype), 0.0};
  }
  for (std::size_t j = 0; j < w.size(); ++j) {
    Mp t;
    if (g.q0 != 0) {
      const Mp num = mul_exact(sub_exact(w[j], edge)->get(), static_cast<double>(g.q0));
      t = div_odd(num->get(), edge);
    } else if (g.clamped) {
      t = div_odd(w[j], s0->get());
    } else {  // x / (sign R / n) as one quotient, n x sign / R
      const Mp num = mul_exact(w[j], g.sign * n);
      t = div_odd(num->get(), r->get());
    }
    const long code = std::clamp(round_int(t->get(), IntRule::nearest_even), 0L, nl);
    const double d = int_distance(mpfr_get_d(t->get(), MPFR_RNDN), code, 0, nl);
    const double xd = std::fabs(mpfr_get_d(w[j], MPFR_RNDN));
    double m = 0;
    if (g.q0 != 0) {
      const double q0 = std::fabs(static_cast<double>(g.q0));
      m = d * ed * ed / (q0 * (std::fabs(ed) + xd) + d * std::fabs(ed));
    } else {
      m = g.clamped ? d * eps32 : d * rd * rd / (n * (rd + 2 * xd) + 2 * d * rd);
    }
    out.q.codes[first + j] = static_cast<std::uint8_t>(code);
    out.margin[first + j] = lower(std::min(std::isnan(m) ? kInf : m, g.margin));
  }
  out.q.groups.push_back(stored);
  out.scale_margin.push_back(lower(scale_margin));
  out.decision_margin.push_back(lower(g.margin));
}

}  // namespace

AffineExact mlx_affine_exact(std::span<const mpfr_srcptr> w, const AffineSpec& spec) {
  if (spec.bits != 2 && spec.bits != 4 && spec.bits != 8) throw std::invalid_argument("ropecheck: affine bits must be 2, 4 or 8");
  if (spec.group_size != 32 && spec.group_size != 64 && spec.group_size != 128)
    throw std::invalid_argument("ropecheck: affine group size must be 32, 64 or 128");
  const auto gs = static_cast<std::size_t>(spec.group_size);
  if (w.size() % gs != 0) throw std::invalid_argument("ropecheck: affine input length is not a multiple of the group size");
  AffineExact out;
  out.q.codes.resize(w.size());
  out.margin.resize(w.size());
  for (std::size_t g0 = 0; g0 < w.size(); g0 += gs) affine_group(w.subspan(g0, gs), spec, g0, out);
  return out;
}

}  // namespace ropecheck::quant
