// ---------------------------------------------------------------- store_shift
// Statement: the recipe rotates q at m, m + s and k at n, n + s to binary32 and stores them (rope_quantize);
// every stored value is within T_c (below) of the exact rotated value, and the logits of the stored values
// <x^q(m), x^k(n)> and <x^q(m+s), x^k(n+s)> equal the exact att^2 q^T R(n-m) k + q_pass . k_pass, hence
// each other.
// Tolerance (ERROR_MODEL.md section 15, "The class of a quantized store", and section 15.2): every stored
// value is within
//   T_c = e_g + 2 (D*_c + (|q*_c| + 1) ds*_c + db*_c)
// of the exact y*_c, e_g the budget of its scale group (group_budget of the largest input error E of the
// group, E = the class bound of a binary32 output + the f64 copy's half ulp: quantizer_input_error) and
// D*, q*, ds*, db* the step, code and scale / bias steps of the owner's quantizer applied to fl32(y*) (the
// exact side's store, never the candidate's: a wrong stored scale must not widen its own tolerance).
// The kernel's value is within half its own step of the binary32 value it quantized (a whole step where
// a code is clamped), and its step is at most twice the exact side's (its values and scale are within e
// of the exact ones: at most one binade / scale step apart), hence the factor 2. With T as the element
// bounds, each logit is within dot_tolerance of the exact one (common.hpp's dot bound, with the check's
// own binary64 arithmetic), and the two within the sum of their tolerances.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <rapidcheck.h>

#include "../properties/common.hpp"
#include "ropecheck/accuracy/quantized_store.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kernels/store_values.hpp"
#include "ropecheck/props/generators.hpp"
#include "ropecheck/props/kut_target.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "runner.hpp"

namespace ropecheck::props::detail {

using kernels::StoredValuesAndSteps;
using kernels::dequantize_store;

namespace {

accuracy::GroupStore group_store(const quant::StoreSpec& s) {
  switch (s.kind) {
    case quant::StoreKind::fp8: return accuracy::GroupStore::fp8_dynamic;
    case quant::StoreKind::q8_0: return accuracy::GroupStore::q8_0;
    case quant::StoreKind::q4_0: return accuracy::GroupStore::q4_0;
    case quant::StoreKind::affine: break;
  }
  return accuracy::GroupStore::affine;
}

// The exact rotated rows (MPFR, rounded once) of x ([2][D]) at the two positions.
std::vector<double> exact_rows(const RopeSpec& r, const std::vector<double>& x, const std::int64_t pos[2]) {
  std::vector<double> y;
  ScopedPrecision prec(working_precision_bits(53, rope_max_abs_angle(r, std::nullopt, std::max(pos[0], pos[1]))));
  const RopeFrequencies<Real> f = rope_frequencies<Real>(r);  // once: the precision of the larger angle serves both
  for (int t = 0; t < 2; ++t) {
    const auto D = static_cast<std::ptrdiff_t>(r.head_dim);
    std::vector<Real> xr(x.begin() + t * D, x.begin() + (t + 1) * D);
    for (const Real& v : rope_apply<Real>(r, f, Position::uniform(pos[t]), xr)) y.push_back(to_f64(v));
  }
  return y;
}

// The per-element store tolerance T_c of one stored tensor (2 tokens, 1 head).
std::vector<double> store_tolerance(const RopeSpec& r, const RopeExact& e, const Bounds& b, const quant::StoreSpec& s,
                                    const std::vector<double>& x, const std::vector<double>& y, const std::int64_t pos[2]) {
  const auto D = static_cast<std::size_t>(r.head_dim);
  std::vector<float> y32(y.begin(), y.end());  // the exact side's binary32 values, quantized by the owner's recipe
  const StoredValuesAndSteps st = dequantize_store(kernels::quantize_store(y32, 2, 1, r.head_dim, s), s, 2, 1, r.head_dim);
  std::vector<double> E;
  for (std::size_t t = 0; t < 2; ++t) {
    const auto Et = rope_bounds(b, r, e, Position::uniform(pos[t]), row(x, t, D));
    E.insert(E.end(), Et.begin(), Et.end());
  }
  for (std::size_t i = 0; i < E.size(); ++i) E[i] += std::ldexp(std::fabs(y[i]), -53);
  std::vector<double> T(E.size());
  for (std::size_t i = 0; i < E.size();) {  // one scale group at a time
    std::size_t j = i;
    double e_max = 0, amax = 0;
    for (; j < E.size() && st.group[j] == st.group[i]; ++j) e_max = std::max(e_max, E[j]), amax = std::max(amax, std::fabs(y[j]));
    const double eg = accuracy::group_budget(group_store(s), e_max, amax);
    for (; i < j; ++i) T[i] = eg + 2 * (st.step[i] + st.scale_step[i]);
  }
  return T;
}

double exact_logit(const RopeSpec& r, const RopeExact& e, const std::vector<double>& q, const std::vector<double>& k,
                   std::int64_t delta) {
  ScopedPrecision prec(working_precision_bits(53, rope_max_abs_angle(r, std::nullopt, std::llabs(delta))));
  const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
  std::vector<Real> kr(k.begin(), k.begin() + r.head_dim);
  const std::vector<Real> g = rope_apply<Real>(r, f, Position::uniform(delta), kr);
  Real L = 0, Lp = 0;
  for (int c = 0; c < e.block; ++c) L += Real(q[static_cast<std::size_t>(c)]) * g[static_cast<std::size_t>(c)];
  for (int c = e.block; c < e.D; ++c) Lp += Real(q[static_cast<std::size_t>(c)]) * g[static_cast<std::size_t>(c)];
  return to_f64(f.attention_factor * L + Lp);
}

}  // namespace

void store_shift_case(Ctx& ctx, const RopeSpec& r, const quant::StoreSpec& s, const StoreRecipe& rec) {
  const std::int64_t mx = max_pos(ctx);
  const std::int64_t m = *gen::position(mx), n = *gen::position(mx);
  const std::int64_t sh = *rc::gen::inRange<std::int64_t>(0, mx - std::max(m, n) + 1);
  // Heads scaled by a power of two (exact): a data-derived scale far from 1, as real q / k have, shows a
  // scale applied twice or inverted (with amax near max_finite the scale is near 1 and s^2 near s).
  const int eq = *rc::gen::inRange(-10, 6), ek = *rc::gen::inRange(-10, 6);
  auto q = *gen::bf16_vector(r.head_dim), k = *gen::bf16_vector(r.head_dim);
  for (double& v : q) v = std::ldexp(v, eq);
  for (double& v : k) v = std::ldexp(v, ek);
  const auto D = static_cast<std::size_t>(r.head_dim);
  const std::int64_t pq[2] = {m, m + sh}, pk[2] = {n, n + sh};
  const kernels::RopePlan plan = kernels::make_rope_plan(r, rec.recipe);
  const auto stored = [&](const std::vector<double>& v, const std::int64_t pos[2]) {
    std::vector<float> in;
    for (int t = 0; t < 2; ++t)
      for (double x : v) in.push_back(static_cast<float>(x));  // bf16 values: exact
    const std::vector<std::int64_t> p(pos, pos + 2);
    const auto view = kernels::TensorView::contiguous(in.data(), DType::f32, 2, 1, r.head_dim);
    return dequantize_store(kernels::rope_quantize(plan, kernels::PositionsView::of(p), view, s, rec.store_mistake), s, 2, 1,
                            r.head_dim);
  };
  const StoredValuesAndSteps sq = stored(q, pq), sk = stored(k, pk);
  const RopeExact& e = rope_exact(r);
  const Bounds b = bounds_of(kernel_claimed_class(rec.recipe, DType::f32), DType::f32);
  std::vector<double> q2(q), k2(k);
  q2.insert(q2.end(), q.begin(), q.end()), k2.insert(k2.end(), k.begin(), k.end());
  const std::vector<double> yq = exact_rows(r, q2, pq), yk = exact_rows(r, k2, pk);
  const auto Tq = store_tolerance(r, e, b, s, q2, yq, pq);
  const auto Tk = store_tolerance(r, e, b, s, k2, yk, pk);
  const double exact = exact_logit(r, e, q, k, n - m);
  double val[2], tol[2];
  for (std::size_t i = 0; i < 2; ++i) {
    val[i] = dot(row(sq.value, i, D), row(sk.value, i, D));
    tol[i] = dot_tolerance(row(sq.value, i, D), row(Tq, i, D), row(sk.value, i, D), row(Tk, i, D), exact);
  }
  const std::string where = "store " + s.name() + ", head_dim " + std::to_string(r.head_dim) + "; q " + vec_brief(q) +
                            ", k " + vec_brief(k) + "; m " + std::to_string(m) + ", n " + std::to_string(n) + ", shift " +
                            std::to_string(sh);
  EncodingSpec spec;
  spec.family = Family::rope, spec.rope = r;
  // The premise of the dot bound, element by element: the worst stored value of q and k.
  const auto worst_element = [&](const StoredValuesAndSteps& st, const std::vector<double>& T, const std::vector<double>& y) {
    std::pair<double, std::size_t> w{0, 0};
    for (std::size_t i = 0; i < T.size(); ++i) {
      const double mg = ratio(std::fabs(st.value[i] - y[i]), T[i]);
      if (!(mg <= w.first)) w = {mg, i};
    }
    return w;
  };
  const auto wq = worst_element(sq, Tq, yq), wk = worst_element(sk, Tk, yk);
  const bool on_q = !(wq.first <= wk.first);
  const auto& w = on_q ? wq : wk;
  ctx.check(w.first, where + ": stored " + (on_q ? "q" : "k") + " element " + std::to_string(w.second % D) + " of token " +
                         std::to_string(w.second / D) + " = " + num((on_q ? sq : sk).value[w.second]) + ", exact " +
                         num((on_q ? yq : yk)[w.second]), std::max(m, n) + sh, spec);
  ctx.check(ratio(std::fabs(val[0] - exact), tol[0]),
            where + ": stored <f(q,m),f(k,n)> = " + num(val[0]) + ", exact q^T R(n-m) k = " + num(exact), std::max(m, n), spec);
  ctx.check(ratio(std::fabs(val[1] - exact), tol[1]), where + ": stored <f(q,m+s),f(k,n+s)> = " + num(val[1]) + ", exact " + num(exact),
            std::max(m, n) + sh, spec);
  ctx.check(ratio(std::fabs(val[0] - val[1]), tol[0] + tol[1]),
            where + ": stored logit " + num(val[0]) + " changes to " + num(val[1]) + " under the shift", std::max(m, n) + sh, spec);
}

}  // namespace ropecheck::props::detail

namespace ropecheck::props {

const std::vector<std::string>& store_property_names() {
  static const std::vector<std::string> names = {"store_shift", "norm_invariance"};
  return names;
}

StorePropertyOutcome run_store_shift(const EncodingSpec& spec, const quant::StoreSpec& store, const StoreRecipe& recipe,
                                     const StorePropsOptions& options) {
  const RopeSpec r = detail::rotation_only(spec);
  const std::string problem = quant::store_head_dim_problem(store, r.head_dim);
  if (!problem.empty()) throw std::invalid_argument("store " + store.name() + ": " + problem);
  return detail::run_store_cases("store_shift", store.name(), spec, options,
                                 [&](detail::Ctx& ctx) { detail::store_shift_case(ctx, r, store, recipe); });
}

}  // namespace ropecheck::props
