// ---------------------------------------------------------------- norm_invariance
// Statement: the recipe normalizes each head (rms_norm_f32) and rotates it (binary32, before any store);
// the norm of each rotated head equals the exact
//   |y*| = | Att n* |,  n*_c = x_c f_c s,  s = 1 / sqrt(|x|^2 / D + eps),
// i.e. att sqrt(D) |f . x| / sqrt(|x|^2 + D eps) when every channel rotates (Att: att on the rotated
// channels, 1 on the pass-through ones): the norm's output has norm sqrt(D) |f . x| / sqrt(|x|^2 + D eps)
// and the rotation keeps it (times att).
// Tolerance: the norm's binary32 output is within t |n*_c| per channel, t = qk_norm_relative_term(D)
// (ERROR_MODEL.md section 17), so |Att n^| is within t |y*| of |y*|; the rotation of n^ by the recipe's
// angle keeps |Att n^| and leaves per pair an error vector of 2-norm <= E0_a + E0_b (section 14: the class
// bound without its angle term, M = att (|n^_a| + |n^_b|) <= att (1 + t) (|n*_a| + |n*_b|)), so
//   | |y^| - |y*| | <= t |y*| + sqrt(sum_pairs (E0_a + E0_b)^2 + sum_pass E0_c^2) + (D + 4) u64 |y^| + u64 |y*|
// the last two the check's binary64 norm of y^ and the rounding of the MPFR |y*|.
#include <cmath>
#include <numeric>

#include <rapidcheck.h>

#include "../properties/common.hpp"
#include "ropecheck/formulas/qk_norm.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/props/generators.hpp"
#include "ropecheck/props/kut_target.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "runner.hpp"

namespace ropecheck::props::detail {

namespace {

// The spec's q_norm stage (eps, form) or a drawn one; weights drawn (bf16) when it gives none. eps is drawn
// large (1e-2) a third of the time so that heads whose mean square is near it show an omitted eps.
RmsNormStage draw_stage(const RopeSpec& spec_rope) {
  RmsNormStage st;
  if (spec_rope.q_norm) st = *spec_rope.q_norm;
  else {
    st.eps = *rc::gen::element(1e-6, 1e-5, 1e-2);
    st.weight_form = *rc::gen::element(NormWeightForm::w, NormWeightForm::one_plus_w);
  }
  if (st.weight.size() != static_cast<std::size_t>(spec_rope.head_dim)) st.weight = *gen::bf16_vector(spec_rope.head_dim);
  return st;
}

// Which channels rotate (pair_channels: a prefix, or spread over both halves for proportional specs).
std::vector<bool> rotated_channels(const RopeSpec& r, const RopeExact& e) {
  std::vector<bool> rot(static_cast<std::size_t>(e.D), false);
  for (int j = 0; j < e.P; ++j) {
    const auto [ia, ib] = pair_channels(r, j);
    rot[static_cast<std::size_t>(ia)] = rot[static_cast<std::size_t>(ib)] = true;
  }
  return rot;
}

// |y*| of one head (MPFR, rounded once); with_att false: |n*|, the norm stage's output alone.
double exact_norm(const RopeSpec& r, const RopeExact& e, const RmsNormStage& st, std::span<const double> x, bool with_att) {
  ScopedPrecision prec(kMinWorkingBits);
  const Real s = rms_norm_scale<Real>(x, st.eps), att = Real(with_att ? e.att : 1.0);
  const std::vector<bool> rot = rotated_channels(r, e);
  Real sum = 0;
  for (int c = 0; c < e.D; ++c) {
    Real n = Real(x[static_cast<std::size_t>(c)]) * Real(norm_weight_factor(st, c)) * s;
    if (rot[static_cast<std::size_t>(c)]) n *= att;
    sum += n * n;
  }
  return to_f64(sqrt(sum));
}

// The binary64 norm of v (att on the rotated channels when given): within (D + 4) u64 of the exact norm of v.
double norm_of(std::span<const float> v, const std::vector<bool>& rotated, double att) {
  double sum = 0;
  for (std::size_t c = 0; c < v.size(); ++c) {
    const double a = static_cast<double>(v[c]) * (rotated[c] ? att : 1.0);
    sum += a * a;
  }
  return std::sqrt(sum);
}

// The 2-norm bound of the rotation's error vector, angle-free (section 14): sqrt(sum_pairs (E0_a + E0_b)^2 +
// sum_pass E0_c^2), E0 with M of the values rotated.
double rotation_radius(const Bounds& b, const RopeSpec& r, const RopeExact& e, const std::vector<double>& n) {
  const auto E0 = rope_bounds_angle_free(b, r, e, n);
  double rad = 0;
  for (int j = 0; j < e.P; ++j) {
    const auto [ia, ib] = pair_channels(r, j);
    const double pair = E0[static_cast<std::size_t>(ia)] + E0[static_cast<std::size_t>(ib)];
    rad += pair * pair;
  }
  const std::vector<bool> rotated = rotated_channels(r, e);
  for (std::size_t c = 0; c < n.size(); ++c)
    if (!rotated[c]) rad += E0[c] * E0[c];
  return std::sqrt(rad);
}

}  // namespace

// Three sub-checks per head: the norm stage's output |n^| against |n*| (t |n*|), the rotation keeping it
// (|y^| against |Att n^|: the angle-free radius of n^), and the two together (|y^| against |y*|, the radius
// of n^'s bound (1 + t) |n*|).
void norm_invariance_case(Ctx& ctx, const RopeSpec& r, const RopeSpec& spec_rope, const StoreRecipe& rec) {
  const RmsNormStage st = draw_stage(spec_rope);
  constexpr int H = 2;
  const auto D = static_cast<std::size_t>(r.head_dim);
  std::vector<double> x = *gen::bf16_vector(H * r.head_dim);
  const int e2 = *rc::gen::inRange(-12, 3);  // the second head scaled by 2^e2: a different mean square
  for (std::size_t c = D; c < 2 * D; ++c) x[c] = std::ldexp(x[c], e2);
  const std::int64_t p = *gen::position(max_pos(ctx));
  std::vector<float> xf(x.begin(), x.end()), nf(x.size()), yf(x.size());
  kernels::rms_norm_f32(st, xf, H, r.head_dim, nf, rec.norm_mistake);
  const kernels::RopePlan plan = kernels::make_rope_plan(r, rec.recipe);
  const std::vector<std::int64_t> pos = {p};
  std::vector<float> nin(nf);
  kernels::rope_apply(plan, kernels::PositionsView::of(pos), kernels::TensorView::contiguous(nin.data(), DType::f32, 1, H, r.head_dim),
                      kernels::TensorView::contiguous(yf.data(), DType::f32, 1, H, r.head_dim));
  const RopeExact& e = rope_exact(r);
  const Bounds b = bounds_of(kernel_claimed_class(rec.recipe, DType::f32), DType::f32);
  const double t = qk_norm_relative_term(r.head_dim), g = (static_cast<double>(D) + 4) * kU64;
  const std::vector<bool> rotated = rotated_channels(r, e), none(D, false);
  EncodingSpec spec;
  spec.family = Family::rope, spec.rope = r;
  for (std::size_t h = 0; h < H; ++h) {
    const std::span<const double> xh = row(x, h, D);
    const std::span<const float> nh(nf.data() + h * D, D), yh(yf.data() + h * D, D);
    const double want_n = exact_norm(r, e, st, xh, false), want = exact_norm(r, e, st, xh, true);
    const double got_n = norm_of(nh, none, 1), kept = norm_of(nh, rotated, e.att), got = norm_of(yh, none, 1);
    std::vector<double> n_up(D), n_hat(nh.begin(), nh.end());  // |n^_c| <= (1 + t) |n*_c|: M of the joint bound
    const double s = 1 / std::sqrt(std::inner_product(xh.begin(), xh.end(), xh.begin(), 0.0) / static_cast<double>(D) + st.eps);
    for (std::size_t c = 0; c < D; ++c) n_up[c] = (1 + t) * (1 + 0x1p-40) * xh[c] * norm_weight_factor(st, static_cast<int>(c)) * s;
    const std::string where = "head " + std::to_string(h) + " of 2 (second scaled by 2^" + std::to_string(e2) + "), head_dim " +
                              std::to_string(D) + ", eps " + num(st.eps) + ", form " + std::string(to_string(st.weight_form)) +
                              ", position " + std::to_string(p) + ": ";
    ctx.check(ratio(std::fabs(got_n - want_n), t * want_n + g * got_n + kU64 * want_n),
              where + "|norm(x)| = " + num(got_n) + ", exact sqrt(D) |f.x| / sqrt(|x|^2 + D eps) = " + num(want_n), p, spec);
    ctx.check(ratio(std::fabs(got - kept), rotation_radius(b, r, e, n_hat) + g * (got + kept)),
              where + "the rotation changed |Att norm(x)| = " + num(kept) + " to " + num(got), p, spec);
    ctx.check(ratio(std::fabs(got - want), t * want + rotation_radius(b, r, e, n_up) + g * got + kU64 * want),
              where + "|rotated norm(x)| = " + num(got) + ", exact " + num(want), p, spec);
  }
}

}  // namespace ropecheck::props::detail

namespace ropecheck::props {

StorePropertyOutcome run_norm_invariance(const EncodingSpec& spec, const StoreRecipe& recipe,
                                         const StorePropsOptions& options) {
  const RopeSpec r = detail::rotation_only(spec);
  return detail::run_store_cases("norm_invariance", "", spec, options,
                                 [&](detail::Ctx& ctx) { detail::norm_invariance_case(ctx, r, spec.rope, recipe); });
}

}  // namespace ropecheck::props
