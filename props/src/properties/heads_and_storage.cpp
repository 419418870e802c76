// Properties of how a call is made and stored: head independence, the attention factor, store rounding.
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

// ---------------------------------------------------------------- heads
// Statement: a head's output depends only on its own input and position, not on the other heads of
// the call, their number, its place among them, or whether it is passed as q or as k: the same
// vectors (two tokens) rotated as head i1 of h1 heads (input "q") and as head i2 of h2 heads (input
// "k", other neighbours) agree.
// Tolerance: both are within E_c of the same exact value (the class bound at that token's position):
// 2 E_c per channel.
void prop_head_independence(Ctx& ctx) {
  auto cs = RopeCase::open(ctx);
  if (!cs) return;
  const RopeSpec& r = cs->rope();
  const auto D = static_cast<std::size_t>(r.head_dim);
  const std::int64_t mx = cs->max_pos();
  const std::vector<Position> pos = {Position::uniform(*gen::position(mx)), Position::uniform(*gen::position(mx))};
  const int h1 = *rc::gen::inRange(2, 5), h2 = *rc::gen::inRange(1, 5);
  const int i1 = *rc::gen::inRange(0, h1), i2 = *rc::gen::inRange(0, h2);
  // The watched head at tokens 0 and 1. Not shrunk (the failing channel is named; shrinking 2 D values
  // through calls of up to 8 heads costs a minute at head_dim 256).
  const auto x = *rc::gen::noShrink(gen::bf16_vector(2 * r.head_dim));
  auto embed = [&](int H, int i) {
    std::vector<double> xs = *rc::gen::noShrink(gen::bf16_vector(2 * H * r.head_dim));  // neighbours: not shrunk
    for (std::size_t t = 0; t < 2; ++t)
      std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(t * D), D,
                  xs.begin() + static_cast<std::ptrdiff_t>((t * static_cast<std::size_t>(H) + static_cast<std::size_t>(i)) * D));
    return xs;
  };
  const auto xa = embed(h1, i1), xb = embed(h2, i2);
  const auto ya = call_rope_raw(ctx, cs->spec(), "q", pos, h1, xa), yb = call_rope_raw(ctx, cs->spec(), "k", pos, h2, xb);
  if (!ya || !yb) return ctx.skip();
  double worst = 0;
  std::string what;
  std::int64_t wpos = pos[0].t;
  for (std::size_t t = 0; t < 2; ++t) {
    const auto E = cs->element_bounds(pos[t], row(x, t, D));
    const std::size_t oa = (t * static_cast<std::size_t>(h1) + static_cast<std::size_t>(i1)) * D;
    const std::size_t ob = (t * static_cast<std::size_t>(h2) + static_cast<std::size_t>(i2)) * D;
    for (std::size_t c = 0; c < D; ++c) {
      const double mg = ratio(std::fabs((*ya)[oa + c] - (*yb)[ob + c]), 2 * E[c]);
      if (!(mg <= worst))
        worst = mg, wpos = pos[t].t,
        what = "token " + std::to_string(t) + " (position " + std::to_string(pos[t].t) + "), channel " + std::to_string(c) +
               ": " + num((*ya)[oa + c]) + " as q head " + std::to_string(i1) + " of " + std::to_string(h1) + ", " +
               num((*yb)[ob + c]) + " as k head " + std::to_string(i2) + " of " + std::to_string(h2);
    }
  }
  cs->check(worst, cs->where() + "; x " + vec_brief(x) + ": " + what,
            wpos);
}

// ---------------------------------------------------------------- attention factor
// Statement: on a spec whose attention factor att is not 1, every rotated pair's norm is att times the
// input pair's: ||(y_a, y_b)|| = att ||(x_a, x_b)||. The spec itself when its att != 1 (YaRN without
// mscale_all_dim = mscale, LongRoPE); else its YaRN variant (factor 8, original length
// max_position_embeddings (4096 if unset), no mscale keys: att = 0.1 ln 8 + 1 = 1.2079). A kernel that
// drops the factor is off by 1/att - 1 = -17%, one that applies it twice by att - 1 = +21%, at every
// position and on every preset.
// Tolerance: angle-free (a phase error does not change a norm; ERROR_MODEL.md section 14):
// E0_a + E0_b + 4 u64 M per pair.
std::optional<EncodingSpec> with_attention_factor(const EncodingSpec& spec) {
  if (rope_exact(spec.rope).att != 1.0) return spec;
  if (spec.rope.scaling.type == ScalingType::proportional) return std::nullopt;
  EncodingSpec y = spec;
  y.rope.scaling = RopeScaling{};
  y.rope.scaling.type = ScalingType::yarn;
  y.rope.scaling.factor = 8.0;
  y.rope.scaling.original_max_position_embeddings =
      y.rope.max_position_embeddings > 0 ? y.rope.max_position_embeddings : 4096;
  y.name += "+yarn8";
  try {
    validate(y);
  } catch (const SpecError&) {
    return std::nullopt;
  }
  if (rope_exact(y.rope).att == 1.0) return std::nullopt;
  return y;
}
void prop_attention_factor(Ctx& ctx) {
  const auto spec0 = rope_spec_for(ctx);
  if (!spec0) return ctx.skip();
  const auto spec = with_attention_factor(*spec0);
  if (!spec) return ctx.skip();
  const RopeSpec& r = spec->rope;
  const std::int64_t m = *gen::position(max_pos(ctx));
  // Not shrunk: the failing pair and its ratio |f(x)| / |x| are named (shrinking 256 values costs seconds).
  const auto x = *rc::gen::noShrink(gen::bf16_vector(r.head_dim));
  const auto y = call_rope(ctx, *spec, {Position::uniform(m)}, 1, x);
  if (!y) return ctx.skip();
  const auto [worst, what] = pair_norm_margin(ctx.target, r, x, *y);
  ctx.check(worst, describe_spec(*spec) + "; head_dim " + std::to_string(r.head_dim) + "; x " + vec_brief(x) + "; m " +
                       std::to_string(m) + ": " + what,
            m, *spec);
}

// ---------------------------------------------------------------- store rounding
// Statement: a result stored in a narrow dtype is the exact value's neighbour that rounding to nearest
// gives, wherever the class's error before the store is small against the dtype's spacing. The target
// computes y_pre with |y_pre - y*| <= E_pre (its class bound for a binary64 result: every term but the
// store's u_dt; rope_bounds with class_bound(class, f64)) and stores RN(y_pre), within half a spacing of
// y_pre: |stored - y*| <= E_pre + ulp_dt(|y*| + E_pre) / 2 (+ 2 u64 |y*| for the exact value's own
// binary64 rounding). A truncating store is off by up to a whole spacing and fails wherever y* lies in
// the upper half of its interval.
// Discrimination: an element counts where E_pre < ulp_dt(|y*|) / 4; a case with no such element is
// skipped (f32 / f64 outputs of the fp32-angle class, table classes: their own rounding before the store
// is as large as the store's, so the class does not allow the check; the exact class is checked to
// 0.5 ulp by every property).
void prop_store_rounding(Ctx& ctx) {
  const AccuracyClass cls = ctx.target.info().accuracy;
  const DType dt = ctx.target.info().dtype;
  if (cls == AccuracyClass::exact) return ctx.skip();
  auto cs = RopeCase::open(ctx);
  if (!cs) return;
  const RopeSpec& r = cs->rope();
  const std::int64_t m = *gen::position(cs->max_pos());
  const auto x = *rc::gen::noShrink(gen::bf16_vector(r.head_dim));  // not shrunk: the failing channel is named
  const auto y = cs->apply({Position::uniform(m)}, 1, x);
  if (!y) return ctx.skip();
  const RopeExact& e = cs->exact();
  const auto Epre = rope_bounds(bounds_of(cls, DType::f64), r, e, Position::uniform(m), x);
  std::vector<double> exact, nearest;
  {
    ScopedPrecision prec(working_precision_bits(53, rope_max_abs_angle(r, std::nullopt, m)));
    const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
    const std::vector<Real> xr(x.begin(), x.end());
    for (const Real& v : rope_apply<Real>(r, f, Position::uniform(m), xr))
      exact.push_back(to_f64(v)), nearest.push_back(round_to_double(v, dt));
  }
  double worst = 0;
  int counted = 0;
  std::string what;
  for (std::size_t c = 0; c < x.size(); ++c) {
    const double ye = exact[c], ae = std::fabs(ye);
    const double half = ulp(ae + Epre[c], dt) / 2;
    if (Epre[c] < ulp(ae, dt) / 4) ++counted;
    const double mg = ratio(std::fabs((*y)[c] - ye), Epre[c] + half + 2 * kU64 * ae);
    if (!(mg <= worst))
      worst = mg, what = "channel " + std::to_string(c) + " stored " + num((*y)[c]) + ", exact " + num(ye) +
                         ", nearest " + std::string(to_string(dt)) + " " + num(nearest[c]) +
                         " (spacing " + num(ulp(ae, dt)) + ")";
  }
  if (counted == 0) return ctx.skip();
  cs->check(worst, cs->where() + "; x " + vec_brief(x) + "; m " +
                       std::to_string(m) + "; output " + std::string(to_string(dt)) + ": " + what,
            m);
}

}  // namespace ropecheck::props::detail
