// Properties of the RoPE variants: layout, multimodal streams, linear scaling, YaRN, partial rotary.
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

// ---------------------------------------------------------------- layout equivalence
// Statement: f_half(P x) = P f_interleaved(x), P the interleaved -> half-split channel permutation
// (the target run with both layouts of the same spec).
// Tolerance: angle-free, E0^half_k + E0^inter_{P^-1 k} (E0: the class bound without its angle term,
// ERROR_MODEL.md section 14). Both runs compute the same exact values (same pairs, same M), and a target
// forms a pair's angle θ̂ from its position and frequency alone, not from where the pair's channels
// sit: both runs rotate by the same θ̂, so their difference is made of the angle-free errors only.
EncodingSpec with_layout(EncodingSpec s, RopeLayout l) {
  s.rope.layout = l;
  return s;
}
void prop_layout_equivalence(Ctx& ctx) {
  const auto spec = rope_spec_for(ctx);
  if (!spec) return ctx.skip();
  const EncodingSpec sh = with_layout(*spec, RopeLayout::half_split), si = with_layout(*spec, RopeLayout::interleaved);
  const RopeSpec& r = spec->rope;
  const std::int64_t m = *gen::position(max_pos(ctx));
  const auto xi = *gen::bf16_vector(r.head_dim);
  const int block = rope_block_channels(r), half = block / 2;
  std::vector<int> perm(static_cast<std::size_t>(r.head_dim));  // interleaved channel i -> half-split channel
  for (int i = 0; i < r.head_dim; ++i) perm[static_cast<std::size_t>(i)] = i < block ? (i % 2) * half + i / 2 : i;
  std::vector<double> xh(xi.size());
  for (std::size_t i = 0; i < xi.size(); ++i) xh[static_cast<std::size_t>(perm[i])] = xi[i];
  const auto yh = call_rope(ctx, sh, {Position::uniform(m)}, 1, xh);
  const auto yi = call_rope(ctx, si, {Position::uniform(m)}, 1, xi);
  if (!yh || !yi) return ctx.skip();
  const RopeExact e = rope_exact(r);
  const Bounds b = bounds_of(ctx.target);
  const auto Eh = rope_bounds_angle_free(b, sh.rope, e, xh);
  const auto Ei = rope_bounds_angle_free(b, si.rope, e, xi);
  double worst = 0;
  std::string what;
  for (std::size_t i = 0; i < xi.size(); ++i) {
    const auto k = static_cast<std::size_t>(perm[i]);
    const double mg = ratio(std::fabs((*yh)[k] - (*yi)[i]), Eh[k] + Ei[i]);
    if (!(mg <= worst)) worst = mg, what = "interleaved channel " + std::to_string(i) + " = " + num((*yi)[i]) + ", half-split channel " + std::to_string(k) + " = " + num((*yh)[k]);
  }
  ctx.check(worst, describe_spec(*spec) + "; head_dim " + std::to_string(r.head_dim) + "; x " + vec_brief(xi) + "; m " + std::to_string(m) + ": " + what, m, *spec);
}

// ---------------------------------------------------------------- multimodal with equal streams
// Statement: multimodal RoPE at (p, p, p) equals 1-D RoPE at p (any sections, chunked or interleaved).
// Tolerance: the same exact value, and the same angle θ̂ = p w_j for every pair in both runs (the same
// position and frequency; the sections only choose which stream's position, all equal here): angle-free,
// 2 E0 per channel (ERROR_MODEL.md section 14).
// The spec itself when it is multimodal, else the spec with generated sections (chunked or
// interleaved); nullopt when those do not validate.
std::optional<EncodingSpec> with_mrope(const EncodingSpec& spec) {
  if (spec.rope.mrope != MropeMode::none) return spec;
  EncodingSpec mm = spec;
  const int P = rope_pairs(mm.rope);
  const int t = *rc::gen::inRange(0, P + 1);
  const int h = *rc::gen::inRange(0, P - t + 1);
  mm.rope.mrope = *rc::gen::element(MropeMode::chunked, MropeMode::interleaved);
  mm.rope.mrope_section = {t, h, P - t - h};
  try {
    validate(mm);
  } catch (const SpecError&) {
    return std::nullopt;
  }
  return mm;
}

void prop_mrope_equal_streams(Ctx& ctx) {
  const auto spec = rope_spec_for(ctx);
  if (!spec) return ctx.skip();
  const auto mm_opt = with_mrope(*spec);
  if (!mm_opt) return ctx.skip();
  const EncodingSpec& mm = *mm_opt;
  EncodingSpec plain = *spec;
  plain.rope.mrope = MropeMode::none;
  plain.rope.mrope_section = {0, 0, 0};
  const RopeSpec& r = plain.rope;
  const std::int64_t m = *gen::position(max_pos(ctx));
  const auto x = *gen::bf16_vector(r.head_dim);
  const auto y1 = call_rope(ctx, mm, {Position::uniform(m)}, 1, x);
  const auto y2 = call_rope(ctx, plain, {Position::uniform(m)}, 1, x);
  if (!y1 || !y2) return ctx.skip();
  const RopeExact e = rope_exact(r);
  const auto E = rope_bounds_angle_free(bounds_of(ctx.target), r, e, x);
  double worst = 0;
  std::size_t wc = 0;
  for (std::size_t c = 0; c < x.size(); ++c) {
    const double mg = ratio(std::fabs((*y1)[c] - (*y2)[c]), 2 * E[c]);
    if (!(mg <= worst)) worst = mg, wc = c;
  }
  const auto& sec = mm.rope.mrope_section;
  ctx.check(worst,
            describe_spec(mm) + "; head_dim " + std::to_string(r.head_dim) + "; sections [" + std::to_string(sec[0]) + "," +
                std::to_string(sec[1]) + "," + std::to_string(sec[2]) + "]; x " + vec_brief(x) + "; m " + std::to_string(m) +
                ": channel " + std::to_string(wc) + " = " + num((*y1)[wc]) + " with mrope, " + num((*y2)[wc]) + " without",
            m, mm);
}

// ---------------------------------------------------------------- multimodal streams
// Statement: with distinct t/h/w positions, every channel equals the exact reference (MPFR), each
// pair rotated by the position of the stream its section assigns (Qwen2-VL chunked, Qwen3-VL
// interleaved sections). This is what mrope_equal_streams cannot see: a swap of sections.
// Tolerance: the target's class bound E_c at each pair's own stream position and frequency (the
// checker's per-element verdict); the exact value is rounded to binary64 once (<= 2^-53 |y|,
// far inside E_c for every class but exact, where the target's own value is that rounding).
void prop_mrope_streams(Ctx& ctx) {
  const auto spec = rope_spec_for(ctx);
  if (!spec) return ctx.skip();
  const auto mm_opt = with_mrope(*spec);
  if (!mm_opt) return ctx.skip();
  const EncodingSpec& mm = *mm_opt;
  const RopeSpec& r = mm.rope;
  const std::int64_t mx = max_pos(ctx);
  const Position pos{*gen::position(mx), *gen::position(mx), *gen::position(mx)};
  const auto x = *gen::bf16_vector(r.head_dim);
  const auto y = call_rope(ctx, mm, {pos}, 1, x);
  if (!y) return ctx.skip();
  const RopeExact e = rope_exact(r);
  const auto E = rope_bounds(bounds_of(ctx.target), r, e, pos, x);
  const std::int64_t pmax = std::max({pos.t, pos.h, pos.w});
  std::vector<double> exact;
  {
    ScopedPrecision prec(working_precision_bits(53, rope_max_abs_angle(r, std::nullopt, pmax)));
    const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
    const std::vector<Real> xr(x.begin(), x.end());
    for (const Real& v : rope_apply<Real>(r, f, pos, xr)) exact.push_back(to_f64(v));
  }
  double worst = 0;
  std::size_t wc = 0;
  for (std::size_t c = 0; c < x.size(); ++c) {
    const double mg = ratio(std::fabs((*y)[c] - exact[c]), E[c]);
    if (!(mg <= worst)) worst = mg, wc = c;
  }
  const auto& sec = r.mrope_section;
  ctx.check(worst,
            describe_spec(mm) + "; head_dim " + std::to_string(r.head_dim) + "; sections [" + std::to_string(sec[0]) + "," +
                std::to_string(sec[1]) + "," + std::to_string(sec[2]) + "]; x " + vec_brief(x) + "; t/h/w " +
                std::to_string(pos.t) + "/" + std::to_string(pos.h) + "/" + std::to_string(pos.w) + ": channel " +
                std::to_string(wc) + " = " + num((*y)[wc]) + ", exact " + num(exact[wc]),
            pmax, mm);
}

// ---------------------------------------------------------------- linear scaling
// Statement: linear scaling by an integer factor F at position F q equals no scaling at q (the
// angles are equal exactly: (w / F)(F q) = w q).
// Tolerance: E^linear(F q) + E^none(q) (each its own class bound at its own position and frequency).
// For F a power of two and F q < 2^24, angle-free: E0^linear + E0^none (ERROR_MODEL.md section 14). A
// target scales its frequency by 1/F (w / F, or 1 / (F w^-1)) and converts F q to its working format:
// with F = 2^k both are exact (scaling by a power of two commutes with rounding; F q < 2^24 is exact in
// f32), so its angle fl(fl(w)/F * F q) is bit for bit its angle fl(fl(w) * q) at q and only the angle-free
// errors differ. For other F the two angles round differently and the full bounds apply.
void prop_linear_scaling(Ctx& ctx) {
  const auto spec = rope_spec_for(ctx);
  if (!spec) return ctx.skip();
  EncodingSpec plain = *spec;
  if (plain.rope.scaling.type == ScalingType::proportional) return ctx.skip();
  plain.rope.scaling = RopeScaling{};
  EncodingSpec lin = plain;
  lin.rope.scaling.type = ScalingType::linear;
  const double given = spec->rope.scaling.type == ScalingType::linear ? *spec->rope.scaling.factor : 0.0;
  const std::int64_t F = given >= 2 && given == std::floor(given) && given < 1024 ? static_cast<std::int64_t>(given)
                                                                                   : *rc::gen::element<std::int64_t>(2, 4, 8, 3, 16);
  lin.rope.scaling.factor = static_cast<double>(F);
  const std::int64_t q = *gen::position(max_pos(ctx) / F);
  const auto x = *gen::bf16_vector(plain.rope.head_dim);
  const auto y1 = call_rope(ctx, lin, {Position::uniform(F * q)}, 1, x);
  const auto y2 = call_rope(ctx, plain, {Position::uniform(q)}, 1, x);
  if (!y1 || !y2) return ctx.skip();
  const Bounds b = bounds_of(ctx.target);
  const bool same_angle = (F & (F - 1)) == 0 && F * q < (std::int64_t{1} << 24);
  const auto E1 = same_angle ? rope_bounds_angle_free(b, lin.rope, rope_exact(lin.rope), x)
                             : rope_bounds(b, lin.rope, rope_exact(lin.rope), Position::uniform(F * q), x);
  const auto E2 = same_angle ? rope_bounds_angle_free(b, plain.rope, rope_exact(plain.rope), x)
                             : rope_bounds(b, plain.rope, rope_exact(plain.rope), Position::uniform(q), x);
  double worst = 0;
  std::size_t wc = 0;
  for (std::size_t c = 0; c < x.size(); ++c) {
    const double mg = ratio(std::fabs((*y1)[c] - (*y2)[c]), E1[c] + E2[c]);
    if (!(mg <= worst)) worst = mg, wc = c;
  }
  ctx.check(worst,
            describe_spec(lin) + "; head_dim " + std::to_string(plain.rope.head_dim) + "; x " + vec_brief(x) + "; factor " +
                std::to_string(F) + ", positions " + std::to_string(F * q) + " vs " + std::to_string(q) + ": channel " +
                std::to_string(wc) + " = " + num((*y1)[wc]) + " vs " + num((*y2)[wc]),
            F * q, lin);
}

// ---------------------------------------------------------------- YaRN frequencies
// Statement: every YaRN frequency lies between the interpolated one (w / factor) and the original
// w, measured from the target: w_j = atan2(y_b, y_a) at position 1 with x = 1 on the first channel of
// each pair (w_j <= 1 < pi, so atan2 returns it).
// Tolerance: the pair's chord error is <= eps = (E_a + E_b) / att, so the angle is off by
// <= 2 asin(eps / 2) <= (pi / 2) eps (eps <= 2); + 4 u64 for atan2 and the division.
void prop_yarn_frequencies(Ctx& ctx) {
  const auto spec0 = rope_spec_for(ctx);
  if (!spec0) return ctx.skip();
  EncodingSpec spec = *spec0;
  if (spec.rope.scaling.type != ScalingType::yarn) {
    if (ctx.fixed) {  // derive a YaRN variant of the fixed spec
      spec.rope.scaling = RopeScaling{};
      spec.rope.scaling.type = ScalingType::yarn;
      spec.rope.scaling.factor = 8.0;
      spec.rope.scaling.original_max_position_embeddings =
          spec.rope.max_position_embeddings > 0 ? spec.rope.max_position_embeddings : 4096;
      spec.name += "+yarn8";
    } else {
      EncodingSpec g;
      do g = *gen::rope_spec();  // (the generator makes YaRN specs 1 time in 14)
      while (g.rope.scaling.type != ScalingType::yarn && *rc::gen::element(true, true, true, false));
      if (g.rope.scaling.type != ScalingType::yarn) return ctx.skip();
      spec = g;
    }
  }
  const RopeSpec& r = spec.rope;
  EncodingSpec plain = spec;
  plain.rope.scaling = RopeScaling{};
  const RopeExact e = rope_exact(r), e0 = rope_exact(plain.rope);
  const double F = effective_factor(r);
  const auto x = unit_pairs_input(r);
  const auto y = call_rope(ctx, spec, {Position::uniform(1)}, 1, x);
  if (!y) return ctx.skip();
  const auto E = rope_bounds(bounds_of(ctx.target), r, e, Position::uniform(1), x);
  double worst = 0;
  std::string what;
  for (int j = 0; j < e.P; ++j) {
    const auto [ia, ib] = pair_channels(r, j);
    const auto a = static_cast<std::size_t>(ia), b = static_cast<std::size_t>(ib);
    const double w = std::atan2((*y)[b], (*y)[a]);
    const double eps = (E[a] + E[b]) / e.att;
    const double tol = std::numbers::pi / 2 * std::min(eps, 2.0) + 4 * kU64;
    const double hi = e0.w[static_cast<std::size_t>(j)], lo = hi / F;
    const double excess = std::max(w - hi, lo - w);
    const double mg = ratio(std::max(0.0, excess), tol);
    if (!(mg <= worst)) worst = mg, what = "pair " + std::to_string(j) + ": frequency " + num(w) + " outside [" + num(lo) + ", " + num(hi) + "]";
  }
  ctx.check(worst, describe_spec(spec) + "; pairs " + std::to_string(e.P) + ": " + what, 1, spec);
}

// ---------------------------------------------------------------- partial rotary
// Statement: channels past the rotary block are bit-identical to the input (x is bf16, so it is
// representable in every output dtype: the correctly rounded copy is x itself).
// Tolerance: none (identity); margin 0 when identical, 2 otherwise.
void prop_partial_passthrough(Ctx& ctx) {
  const auto spec0 = rope_spec_for(ctx);
  if (!spec0) return ctx.skip();
  EncodingSpec spec = *spec0;
  RopeSpec& r = spec.rope;
  if (r.scaling.type == ScalingType::proportional) return ctx.skip();  // every channel is in the block
  if (r.rotary_dim == r.head_dim) {
    if (r.head_dim < 4) return ctx.skip();
    const int rot = 2 * *rc::gen::inRange(1, r.head_dim / 2);
    if (r.scaling.type == ScalingType::longrope) {
      r.scaling.short_factor.resize(static_cast<std::size_t>(rot / 2));
      r.scaling.long_factor.resize(static_cast<std::size_t>(rot / 2));
    }
    if (r.scaling.type == ScalingType::dynamic && rot <= 2) return ctx.skip();
    r.rotary_dim = rot;
    if (r.mrope != MropeMode::none) r.mrope_section = {rot / 2, 0, 0};
    spec.name += "+partial";
    try {
      validate(spec);
    } catch (const SpecError&) {
      return ctx.skip();
    }
  }
  const std::int64_t m = *gen::position(max_pos(ctx));
  const auto x = *gen::bf16_vector(r.head_dim);
  const auto y = call_rope(ctx, spec, {Position::uniform(m)}, 1, x);
  if (!y) return ctx.skip();
  int bad = -1;
  for (int c = rope_block_channels(r); c < r.head_dim && bad < 0; ++c)
    if (std::memcmp(&(*y)[static_cast<std::size_t>(c)], &x[static_cast<std::size_t>(c)], sizeof(double)) != 0 &&
        !((*y)[static_cast<std::size_t>(c)] == 0 && x[static_cast<std::size_t>(c)] == 0))
      bad = c;
  ctx.check(bad < 0 ? 0.0 : 2.0,
            describe_spec(spec) + "; head_dim " + std::to_string(r.head_dim) + ", rotary_dim " + std::to_string(r.rotary_dim) +
                "; m " + std::to_string(m) + ": pass-through channel " + std::to_string(bad) + " = " +
                (bad < 0 ? "" : num((*y)[static_cast<std::size_t>(bad)]) + ", input " + num(x[static_cast<std::size_t>(bad)])),
            m, spec);
}

}  // namespace ropecheck::props::detail
