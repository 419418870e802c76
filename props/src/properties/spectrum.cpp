// Properties of the whole spectrum of positions: uniqueness, RoFormer long-range decay, the cosine
// sum; and the deterministic scans the runner adds for a fixed spec.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <stdexcept>

#include <rapidcheck.h>

#include "common.hpp"
#include "ropecheck/props/generators.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"

namespace ropecheck::props::detail {

// ---------------------------------------------------------------- uniqueness
// Statement: E(t) != E(t') for t != t' in a window of W = 16 positions (stride 1, 2 or 7) wherever
// the error model says the exact rows are distinguishable; the smallest separation and the first
// colliding pair (identical rows) are reported.
// Derivation: per coordinate c, the exact separation d*_c = |E*_c(t) - E*_c(t')| satisfies
// d*_c <= d_c + E_c(t) + E_c(t') (d_c the target's separation). d*_c is bounded below with binary64
// rows r: d*_c >= |r_c(t) - r_c(t')| - F_c(t) - F_c(t') (F the fp64-angle bound). Margin per pair:
// max_c (lower d*_c - d_c) / (E_c(t) + E_c(t')); a collision (d = 0) where some coordinate's exact rows
// differ by more than both bounds fails: a correct target of class X never merges such rows.
void prop_uniqueness(Ctx& ctx) {
  const bool rope = ctx.fixed ? ctx.fixed->family == Family::rope : *rc::gen::element(true, true, false);
  const EncodingSpec spec = ctx.fixed ? *ctx.fixed : (rope ? *gen::rope_spec() : *gen::sinusoidal_spec(false));
  constexpr int W = 16;
  const std::int64_t stride = *rc::gen::element<std::int64_t>(1, 2, 7);
  const std::int64_t mx = max_pos(ctx);
  const std::int64_t p0 = std::min(*gen::position(mx), std::max<std::int64_t>(0, mx - stride * (W - 1)));
  std::vector<std::int64_t> ts;
  for (int i = 0; i < W; ++i) ts.push_back(p0 + stride * i);
  std::vector<std::vector<double>> rows, ref, E, F;
  const Bounds b = bounds_of(ctx.target);
  std::size_t n = 0;
  std::string where;
  if (rope) {
    const RopeSpec& r = spec.rope;
    const auto x = *gen::bf16_vector(r.head_dim);
    std::vector<Position> pos;
    std::vector<double> xs;
    for (auto t : ts) pos.push_back(Position::uniform(t)), xs.insert(xs.end(), x.begin(), x.end());
    const auto y = call_rope(ctx, spec, pos, 1, xs);
    if (!y) return ctx.skip();
    const RopeExact e = rope_exact(r);
    n = static_cast<std::size_t>(r.head_dim);
    for (std::size_t i = 0; i < ts.size(); ++i) {
      const auto row_i = row(*y, i, n);
      rows.emplace_back(row_i.begin(), row_i.end());
      ref.push_back(rope_f64(r, e, pos[i], x));
      E.push_back(rope_bounds(b, r, e, pos[i], x));
      F.push_back(rope_bounds(fp64_bounds(), r, e, pos[i], x));
    }
    where = describe_spec(spec) + "; head_dim " + std::to_string(r.head_dim) + "; x " + vec_brief(x);
  } else {
    const SinusoidalSpec& s = spec.sinusoidal;
    const auto pe = call_sin(ctx, spec, ts);
    if (!pe) return ctx.skip();
    const SinExact e = sin_exact(s);
    n = static_cast<std::size_t>(s.d_model);
    for (std::size_t i = 0; i < ts.size(); ++i) {
      const auto row_i = row(*pe, i, n);
      rows.emplace_back(row_i.begin(), row_i.end());
      ref.push_back(sin_f64(s, e, ts[i]));
      E.push_back(sin_bounds(b, s, e, ts[i]));
      F.push_back(sin_bounds(fp64_bounds(), s, e, ts[i]));
    }
    where = describe_spec(spec) + "; d_model " + std::to_string(s.d_model);
  }
  double worst = 0;
  std::string what;
  std::int64_t worst_pos = p0;
  for (std::size_t i = 0; i < ts.size(); ++i)
    for (std::size_t j = i + 1; j < ts.size(); ++j) {
      double sep = 0, mg = 0;
      bool distinct = false;  // the exact rows provably differ
      for (std::size_t c = 0; c < n; ++c) {
        const double d = std::fabs(rows[i][c] - rows[j][c]);
        sep = std::max(sep, d);
        const double lower = std::fabs(ref[i][c] - ref[j][c]) - F[i][c] - F[j][c] - 2 * kU64 * (std::fabs(ref[i][c]) + std::fabs(ref[j][c]));
        distinct |= lower > 0;
        const double m = ratio(std::max(0.0, lower - d), E[i][c] + E[j][c]);
        if (!(m <= mg)) mg = m;
      }
      if (!distinct) continue;  // (x = 0, or rows equal in exact arithmetic: nothing to separate)
      if (ctx.counting && (ctx.min_separation < 0 || sep < ctx.min_separation)) ctx.min_separation = sep;
      if (sep == 0 && ctx.counting && (!ctx.first_collision || ts[j] < ctx.first_collision->second))
        ctx.first_collision = std::make_pair(ts[i], ts[j]);
      if (!(mg <= worst))
        worst = mg, worst_pos = ts[j],
        what = "rows at " + std::to_string(ts[i]) + " and " + std::to_string(ts[j]) +
               (sep == 0 ? " are identical" : " are " + num(sep) + " apart") + " but the exact rows are distinguishable";
    }
  ctx.check(worst, where + "; window " + std::to_string(p0) + " + " + std::to_string(stride) + "i: " + what, worst_pos, spec);
}

// ---------------------------------------------------------------- RoFormer long-range decay
// Statement: the RoFormer relative upper bound R(r) = (1/P) sum_{j=1}^{P} |S_j(r)|,
// S_j = sum_{k<j} e^{i r w_k}, computed from the target's outputs (x = 1 on the first channel of
// every pair: y = att (cos, sin)) matches the exact curve (which never exceeds its start R(0) = (P+1)/2;
// the curve itself oscillates, so no monotonicity is asserted).
// Tolerance: |e^{i r w_k} estimate - exact| <= d_k = (E_a,k + E_b,k) / att (+ 2 u64), so
// | |Ŝ_j| - |S_j| | <= sum_{k<j} d_k and |R̂ - R| <= (1/P) sum_j sum_{k<j} d_k + 2 (P + 4)^2 u64.
void prop_roformer_decay(Ctx& ctx) {
  auto cs = RopeCase::open(ctx);
  if (!cs) return;
  const RopeSpec& r = cs->rope();
  const std::int64_t dist = *gen::position(cs->max_pos());
  const auto x = unit_pairs_input(r);
  const auto y = cs->apply({Position::uniform(dist)}, 1, x);
  if (!y) return ctx.skip();
  const RopeExact& e = cs->exact();
  const auto E = cs->element_bounds(Position::uniform(dist), x);
  std::vector<double> ce(static_cast<std::size_t>(e.P)), se(ce.size());
  {
    ScopedPrecision prec(working_precision_bits(53, rope_max_abs_angle(r, std::nullopt, dist)));
    std::vector<Real> c, s;
    rope_cos_sin<Real>(r, rope_frequencies<Real>(r), Position::uniform(dist), c, s);
    for (std::size_t j = 0; j < ce.size(); ++j) ce[j] = to_f64(c[j]), se[j] = to_f64(s[j]);
  }
  double re = 0, im = 0, rex = 0, imx = 0, R = 0, Rx = 0, acc = 0, tol_sum = 0;
  for (int j = 0; j < e.P; ++j) {
    const auto [ia, ib] = pair_channels(r, j);
    re += (*y)[static_cast<std::size_t>(ia)] / e.att;
    im += (*y)[static_cast<std::size_t>(ib)] / e.att;
    rex += ce[static_cast<std::size_t>(j)];
    imx += se[static_cast<std::size_t>(j)];
    acc += (E[static_cast<std::size_t>(ia)] + E[static_cast<std::size_t>(ib)]) / e.att + 2 * kU64;
    tol_sum += acc;
    R += std::hypot(re, im);
    Rx += std::hypot(rex, imx);
  }
  const double P = e.P;
  R /= P;
  Rx /= P;
  const double tol = tol_sum / P + 2 * (P + 4) * (P + 4) * kU64;
  const std::string where = describe_spec(cs->spec()) + "; pairs " + std::to_string(e.P) + "; distance " + std::to_string(dist);
  // (No separate R <= R(0) check: the exact curve never exceeds R(0) = (P+1)/2, since |S_j| <= j, so
  // R <= R(0) + tol follows from the check below by the triangle inequality and could never fail on its
  // own: audit-2 L1.)
  cs->check(ratio(std::fabs(R - Rx), tol), where + ": relative upper bound " + num(R) + ", exact " + num(Rx), dist);
}

// ---------------------------------------------------------------- base bounds context length
// Statement: B(m) = sum_j cos(m w_j) from the target (x = 1 on the first channel of every pair:
// y_a = att cos) equals the exact sum; the first m with B(m) < 0 is reported per spec.
// Tolerance: sum_j E_a,j / att + 2 (P + 2) u64 P.
void prop_cosine_sum(Ctx& ctx) {
  auto cs = RopeCase::open(ctx);
  if (!cs) return;
  const RopeSpec& r = cs->rope();
  const std::int64_t m = *gen::position(cs->max_pos());
  const auto x = unit_pairs_input(r);
  const auto y = cs->apply({Position::uniform(m)}, 1, x);
  if (!y) return ctx.skip();
  const RopeExact& e = cs->exact();
  const auto E = cs->element_bounds(Position::uniform(m), x);
  double B = 0, tol = 0, Bx = 0;
  for (int j = 0; j < e.P; ++j) {
    const auto a = static_cast<std::size_t>(pair_channels(r, j).first);
    B += (*y)[a] / e.att;
    tol += E[a] / e.att + 2 * kU64;
  }
  {
    ScopedPrecision prec(working_precision_bits(53, rope_max_abs_angle(r, std::nullopt, m)));
    std::vector<Real> c, s;
    rope_cos_sin<Real>(r, rope_frequencies<Real>(r), Position::uniform(m), c, s);
    Real sum = 0;
    for (const Real& v : c) sum += v;
    Bx = to_f64(sum);
  }
  tol += 2.0 * (e.P + 2) * kU64 * e.P;
  cs->check(ratio(std::fabs(B - Bx), tol),
            describe_spec(cs->spec()) + "; pairs " + std::to_string(e.P) + "; m " + std::to_string(m) + ": sum cos = " + num(B) +
                ", exact " + num(Bx),
            m);
}

// ---------------------------------------------------------------- deterministic reports

std::vector<std::string> collision_scan(Target& target, const EncodingSpec& spec, std::int64_t max_position) {
  const std::int64_t last = std::min<std::int64_t>(max_position > 0 ? max_position : gen::kDefaultMaxPosition, 2047);
  std::unordered_map<std::string, std::int64_t> seen;
  const std::size_t n = spec.family == Family::rope ? static_cast<std::size_t>(spec.rope.head_dim)
                                                    : static_cast<std::size_t>(spec.sinusoidal.d_model);
  std::vector<double> x;
  if (spec.family == Family::rope) {
    x.assign(n, 0.0);
    for (std::size_t i = 0; i < n; ++i) x[i] = 1.0 + static_cast<double>(i % 7) / 8;  // bf16-exact, every pair nonzero
  }
  for (std::int64_t start = 0; start <= last; start += 256) {
    const std::int64_t end = std::min(last + 1, start + 256);
    std::vector<double> out(static_cast<std::size_t>(end - start) * n);
    bool ok;
    if (spec.family == Family::rope) {
      std::vector<Position> pos;
      std::vector<double> xs;
      for (std::int64_t t = start; t < end; ++t) pos.push_back(Position::uniform(t)), xs.insert(xs.end(), x.begin(), x.end());
      ok = target.rope_apply(spec, pos, 1, xs, out);
    } else {
      std::vector<std::int64_t> pos;
      for (std::int64_t t = start; t < end; ++t) pos.push_back(t);
      ok = target.sinusoidal(spec, pos, out);
    }
    if (!ok) return {"collision scan: the target does not implement this spec"};
    for (std::int64_t t = start; t < end; ++t) {
      std::string key(reinterpret_cast<const char*>(&out[static_cast<std::size_t>(t - start) * n]), n * sizeof(double));
      const auto [it, inserted] = seen.emplace(std::move(key), t);
      if (!inserted)
        return {"first colliding pair over positions 0.." + std::to_string(last) + ": " + std::to_string(it->second) +
                " and " + std::to_string(t) + " (identical rows)"};
    }
  }
  return {"no colliding rows over positions 0.." + std::to_string(last)};
}

std::vector<std::string> cosine_sum_report(const EncodingSpec& spec, std::int64_t max_position) {
  if (spec.family != Family::rope) return {};
  const RopeExact e = rope_exact(spec.rope);
  const std::int64_t last = std::min<std::int64_t>(max_position > 0 ? max_position : gen::kDefaultMaxPosition, std::int64_t{1} << 20);
  // binary64 scan; the sign at the found m is confirmed in MPFR (a binary64 sum near 0 could be wrong).
  for (std::int64_t m = 0; m <= last; ++m) {
    double s = 0;
    for (double w : e.w) s += std::cos(static_cast<double>(m) * w);
    if (s < 0) {
      ScopedPrecision prec(working_precision_bits(53, rope_max_abs_angle(spec.rope, std::nullopt, m)));
      std::vector<Real> c, sn;
      rope_cos_sin<Real>(spec.rope, rope_frequencies<Real>(spec.rope), Position::uniform(m), c, sn);
      Real sum = 0;
      for (const Real& v : c) sum += v;
      if (sum < 0)
        return {"sum_j cos(m theta_j) first turns negative at m = " + std::to_string(m) + " (" + num(to_f64(sum)) + ")"};
    }
  }
  return {"sum_j cos(m theta_j) stays >= 0 for m <= " + std::to_string(last)};
}

std::vector<std::string> roformer_envelope_report(const EncodingSpec& spec) {
  if (spec.family != Family::rope) return {};
  const RopeExact e = rope_exact(spec.rope);
  std::string out = "RoFormer relative upper bound, max per octave [2^k, 2^(k+1)) for k = 0..10 (exact, binary64):";
  for (int k = 0; k <= 10; ++k) {
    double mx = 0;
    for (std::int64_t r = std::int64_t{1} << k; r < (std::int64_t{1} << (k + 1)); ++r) {
      double re = 0, im = 0, tot = 0;
      for (double w : e.w) re += std::cos(static_cast<double>(r) * w), im += std::sin(static_cast<double>(r) * w), tot += std::hypot(re, im);
      mx = std::max(mx, tot / static_cast<double>(e.w.size()));
    }
    out += ' ';
    out += num(mx);
  }
  return {out};
}

}  // namespace ropecheck::props::detail
