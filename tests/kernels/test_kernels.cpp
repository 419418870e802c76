// The fast CPU kernels and precision recipes (kernels/include/ropecheck/kernels/recipe.hpp,
// rope_kernels.hpp): the catalogue, plans, views, each recipe's defining facts, accuracy against the
// exact MPFR reference, and the layout / dtype / threading invariants of rope_apply and the tables.
// Every random input comes from a fixed seed printed in the failure message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../kernels/src/kernel_detail.hpp"  // the sin / cos core, for its own accuracy tests
#include "test_kernels_util.hpp"
#include "test_scale.hpp"
#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kernels/scalar_recipes.hpp"
#include "ropecheck/reference/angle_reduction.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"

namespace ropecheck::kernels {
namespace {

using test::ExactRope;
using test::log_positions;
using test::random_input;

constexpr double kU32 = 0x1p-24;  // unit roundoff of f32: errors below are in these units (M = 1)

// ---- the catalogue -----------------------------------------------------------------------------------

TEST(KernelRecipes, CatalogueListsEveryRecipeOnceAccurateFirst) {
  const auto all = recipes();
  ASSERT_EQ(all.size(), 11u);
  EXPECT_EQ(all[0].recipe, Recipe::accurate);
  EXPECT_FALSE(all[0].known_bad);
  std::set<std::string_view> names;
  for (const RecipeInfo& r : all) {
    EXPECT_TRUE(names.insert(r.name).second) << r.name;
    EXPECT_EQ(parse_recipe(r.name), r.recipe) << r.name;
    EXPECT_EQ(to_string(r.recipe), r.name);
    EXPECT_EQ(&recipe_info(r.recipe), &r);
    EXPECT_FALSE(r.description.empty()) << r.name;
  }
  for (const char* good : {"accurate", "hf", "meta", "ggml"}) EXPECT_FALSE(recipe_info(*parse_recipe(good)).known_bad);
  for (const char* bad : {"bf16-table", "f16-table", "bf16-inv-freq", "f16-inv-freq", "bf16-positions",
                          "f16-positions", "fast-sincos"})
    EXPECT_TRUE(recipe_info(*parse_recipe(bad)).known_bad) << bad;
}

TEST(KernelRecipes, ParseRejectsUnknownNames) {
  EXPECT_FALSE(parse_recipe("").has_value());
  EXPECT_FALSE(parse_recipe("Accurate").has_value());
  EXPECT_FALSE(parse_recipe("bf16_table").has_value());
  EXPECT_FALSE(parse_recipe("hf ").has_value());
}

TEST(KernelRecipes, TableDtype) {
  for (DType s : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    EXPECT_EQ(table_dtype(Recipe::hf, s), s);
    EXPECT_EQ(table_dtype(Recipe::bf16_table, s), DType::bf16);
    EXPECT_EQ(table_dtype(Recipe::f16_table, s), DType::f16);
    EXPECT_EQ(table_dtype(Recipe::accurate, s), s == DType::f64 ? DType::f64 : DType::f32);
    for (Recipe r : {Recipe::meta, Recipe::ggml, Recipe::bf16_inv_freq, Recipe::f16_inv_freq, Recipe::bf16_positions,
                     Recipe::f16_positions, Recipe::fast_sincos})
      EXPECT_EQ(table_dtype(r, s), DType::f32) << to_string(r);
  }
}

// ---- plans -----------------------------------------------------------------------------------------------

TEST(KernelPlan, FrequenciesFollowTheRecipeForEveryPreset) {
  for (const std::string& name : preset_names()) {
    const EncodingSpec e = load_preset(name);
    if (e.family != Family::rope) continue;
    const RopeFrequencies<double> f64 = rope_frequencies<double>(e.rope);
    const RopeFrequenciesF32 hf = hf_rope_frequencies_f32(e.rope);
    for (const RecipeInfo& info : recipes()) {
      const RopePlan plan = make_rope_plan(e.rope, info.recipe);
      SCOPED_TRACE(name + " / " + std::string(info.name));
      ASSERT_EQ(plan.pairs, rope_pairs(e.rope));
      EXPECT_EQ(plan.head_dim, e.rope.head_dim);
      EXPECT_EQ(plan.interleaved, e.rope.layout == RopeLayout::interleaved);
      ASSERT_EQ(plan.inv_freq_f64.size(), static_cast<std::size_t>(plan.pairs));
      ASSERT_EQ(plan.inv_freq_f32.size(), static_cast<std::size_t>(plan.pairs));
      ASSERT_EQ(plan.stream.size(), static_cast<std::size_t>(plan.pairs));
      EXPECT_EQ(plan.attention_factor_f64, f64.attention_factor);
      EXPECT_EQ(plan.attention_factor_f32, hf.attention_factor);
      for (int j = 0; j < plan.pairs; ++j) {
        const auto u = static_cast<std::size_t>(j);
        EXPECT_EQ(plan.inv_freq_f64[u], f64.inv_freq[u]) << j;
        EXPECT_EQ(plan.stream[u], e.rope.mrope == MropeMode::none ? 0 : mrope_stream(e.rope, j)) << j;
        const float w = plan.inv_freq_f32[u];
        switch (info.recipe) {
          case Recipe::accurate: EXPECT_EQ(w, static_cast<float>(f64.inv_freq[u])) << j; break;
          case Recipe::bf16_inv_freq:
            EXPECT_EQ(w, round_to_dtype(hf.inv_freq[u], DType::bf16)) << j;
            EXPECT_EQ(w, bf16_bits_to_f32(f32_to_bf16_bits(w))) << "not a bf16 value, pair " << j;
            break;
          case Recipe::f16_inv_freq: EXPECT_EQ(w, round_to_dtype(hf.inv_freq[u], DType::f16)) << j; break;
          case Recipe::ggml: break;  // the recurrence at p = 1 (KernelRows.GgmlRecurrence)
          default: EXPECT_EQ(w, hf.inv_freq[u]) << j;
        }
      }
    }
  }
}

TEST(KernelPlan, GgmlThetaScaleAndDivisors) {
  const RopeSpec plain = load_preset("llama-2-7b").rope;
  const RopePlan p = make_rope_plan(plain, Recipe::ggml);
  EXPECT_EQ(p.ggml_theta_scale, std::pow(10000.0f, -2.0f / 128.0f));
  for (float d : p.ggml_divisor) EXPECT_EQ(d, 1.0f);
  const RopeSpec l31 = load_preset("llama-3.1-8b").rope;
  const RopePlan q = make_rope_plan(l31, Recipe::ggml);
  const RopeFrequencies<double> f = rope_frequencies<double>(l31);
  for (int j = 0; j < q.pairs; ++j) {
    const double w_default = std::pow(l31.base, -2.0 * j / 128.0);
    EXPECT_EQ(q.ggml_divisor[static_cast<std::size_t>(j)],
              static_cast<float>(w_default / f.inv_freq[static_cast<std::size_t>(j)]))
        << j;
  }
  EXPECT_EQ(q.ggml_divisor[0], 1.0f);   // high-frequency band kept
  EXPECT_EQ(q.ggml_divisor[63], 8.0f);  // low-frequency band divided by the factor
}

TEST(KernelPlan, RejectsInvalidSpecs) {
  RopeSpec r = load_preset("llama-2-7b").rope;
  r.head_dim = 127;
  EXPECT_THROW(make_rope_plan(r, Recipe::accurate), SpecError);
  r = load_preset("llama-2-7b").rope;
  r.rotary_dim = 130;
  EXPECT_THROW(make_rope_plan(r, Recipe::hf), SpecError);
}

TEST(KernelPlan, SeqLenSelectsLongropeFactors) {
  const RopeSpec r = load_preset("phi-3.5-mini").rope;
  EXPECT_FALSE(make_rope_plan(r, Recipe::accurate).long_factors);
  EXPECT_FALSE(make_rope_plan(r, Recipe::accurate, 4096).long_factors);
  const RopePlan lp = make_rope_plan(r, Recipe::accurate, 4097);
  EXPECT_TRUE(lp.long_factors);
  EXPECT_EQ(lp.inv_freq_f64, rope_frequencies<double>(r, 4097).inv_freq);
}

// ---- views -------------------------------------------------------------------------------------------------

TEST(KernelViews, ContiguousStrides) {
  float buf[1];
  const TensorView v = TensorView::contiguous(buf, DType::bf16, 5, 3, 8);
  EXPECT_EQ(v.data, buf);
  EXPECT_EQ(v.dtype, DType::bf16);
  EXPECT_EQ(v.tokens, 5);
  EXPECT_EQ(v.heads, 3);
  EXPECT_EQ(v.head_dim, 8);
  EXPECT_EQ(v.stride_token, 24);
  EXPECT_EQ(v.stride_head, 8);
  EXPECT_EQ(v.stride_dim, 1);
}

TEST(KernelViews, Positions) {
  const std::vector<std::int64_t> p64{7, -3, 1LL << 40};
  const std::vector<std::int32_t> p32{7, -3, 65536};
  const PositionsView a = PositionsView::of(p64), b = PositionsView::of(p32);
  EXPECT_EQ(a.tokens, 3);
  EXPECT_TRUE(a.is_int64);
  EXPECT_FALSE(b.is_int64);
  EXPECT_EQ(a.at(2), Position::uniform(1LL << 40));
  EXPECT_EQ(b.at(1), Position::uniform(-3));
  EXPECT_EQ(b.at(2), Position::uniform(65536));
  const std::vector<std::int64_t> thw{1, 2, 3, 10, 20, 30, 100, 200, 300};  // [3, tokens]
  const PositionsView m = PositionsView::three_streams(thw, 3);
  EXPECT_EQ(m.streams, 3);
  EXPECT_EQ(m.tokens, 3);
  EXPECT_EQ(m.at(0), (Position{1, 10, 100}));
  EXPECT_EQ(m.at(2), (Position{3, 30, 300}));
  EXPECT_THROW(PositionsView::three_streams(thw, 4), std::invalid_argument);
}

// ---- rows: each recipe's defining facts -------------------------------------------------------------------

// accurate: binary64 angle, reduction, f32 polynomials: within about 1 ulp of f32 of the exact cos / sin
// at every position up to 2^24 (errors in units of u32 = 2^-24, i.e. relative to M = 1).
TEST(KernelRows, AccurateIsWithinAboutOneUlpOfExact) {
  for (const char* name : {"llama-3.1-8b", "llama-2-7b", "qwen2.5-7b-yarn", "gpt-neox-20b", "phi-3.5-mini"}) {
    const RopeSpec r = load_preset(name).rope;
    const RopePlan plan = make_rope_plan(r, Recipe::accurate);
    const std::vector<std::int64_t> pos = log_positions(1LL << 24, 6, 20240917);
    ExactRope exact(r, std::nullopt, 1LL << 24);
    std::vector<float> c(static_cast<std::size_t>(plan.pairs)), s(c.size());
    double worst = 0;
    std::int64_t worst_p = 0;
    for (std::int64_t p : pos) {
      recipe_cos_sin_row(plan, Position::uniform(p), c.data(), s.data());
      for (int j = 0; j < plan.pairs; ++j) {
        const auto [ec, es] = exact.cos_sin(Position::uniform(p), j);
        const double e = std::max(std::fabs(c[static_cast<std::size_t>(j)] - ec), std::fabs(s[static_cast<std::size_t>(j)] - es)) / kU32;
        if (e > worst) worst = e, worst_p = p;
      }
    }
    std::printf("[ accurate ] %-16s worst |error| %.3f u32 (position %lld), %zu positions up to 2^24\n", name, worst,
                static_cast<long long>(worst_p), pos.size());
    EXPECT_LE(worst, test::kAccurateRowBoundU32) << name << " at position " << worst_p;
  }
}

// hf and every recipe that evaluates sin / cos of an f32 angle: the angle is fl32(fl32(p) * w_f32), and
// sin / cos are those of its exact value within about 1 ulp.
TEST(KernelRows, F32AngleRecipesEvaluateTheirAngleAccurately) {
  const RopeSpec r = load_preset("llama-3.1-8b").rope;
  for (Recipe rec : {Recipe::hf, Recipe::meta, Recipe::bf16_table, Recipe::bf16_inv_freq, Recipe::f16_inv_freq}) {
    const RopePlan plan = make_rope_plan(r, rec);
    std::vector<float> c(64), s(64);
    std::vector<double> a(64);
    double worst = 0;
    for (std::int64_t p : log_positions(1LL << 24, 4, 7)) {
      recipe_cos_sin_row(plan, Position::uniform(p), c.data(), s.data());
      recipe_angle_row(plan, Position::uniform(p), a.data());
      for (std::size_t j = 0; j < 64; ++j) {
        const float theta = static_cast<float>(p) * plan.inv_freq_f32[j];
        ASSERT_EQ(a[j], static_cast<double>(theta)) << to_string(rec) << " p " << p << " pair " << j;
        // sin / cos of the exact f32 angle, in binary64 (glibc, < 1 ulp of binary64): plenty here.
        const double e = std::max(std::fabs(c[j] - std::cos(static_cast<double>(theta))),
                                  std::fabs(s[j] - std::sin(static_cast<double>(theta))));
        worst = std::max(worst, e / kU32);
      }
    }
    std::printf("[ %s ] worst |sin/cos error| of the f32 angle %.3f u32\n", std::string(to_string(rec)).c_str(), worst);
    EXPECT_LE(worst, 1.5) << to_string(rec);
  }
}

// The f32 polynomials on the reduced argument: within 1.5 ulp of sin r', cos r' for f32 r' in
// [-pi/4, pi/4] (accuracy/ERROR_MODEL.md section 10 asks this of f32-reduced). A binary64 r' that is an f32
// value with |r'| < pi/4 reduces to itself (k = 0), so the core's output is the polynomials' output.
// Here every 251st f32 in [2^-30, pi/4] and the small ones; DISABLED_...Exhaustive checks them all.
double poly_worst_ulps(std::uint32_t step, std::uint32_t* worst_bits) {
  const auto& be = detail::portable_backend();
  std::uint32_t lo = 0x30800000u;  // 2^-30: below it sin r' = r' and cos r' = 1 in f32
  float pi4 = 0.785398163f;
  std::uint32_t hi = 0;
  std::memcpy(&hi, &pi4, 4);
  double worst = 0;
  std::vector<double> theta;
  std::vector<float> s(1 << 20), c(1 << 20);
  auto flush = [&] {
    be.sincos(theta.data(), static_cast<std::int64_t>(theta.size()), s.data(), c.data());
    for (std::size_t i = 0; i < theta.size(); ++i) {
      const double es = std::sin(theta[i]), ec = std::cos(theta[i]);
      const double e = std::max(std::fabs(s[i] - es) / ulp(es, DType::f32), std::fabs(c[i] - ec) / ulp(ec, DType::f32));
      if (e > worst) {
        worst = e;
        const auto f = static_cast<float>(theta[i]);
        std::memcpy(worst_bits, &f, 4);
      }
    }
    theta.clear();
  };
  for (std::uint64_t b = lo; b <= hi; b += step) {
    float r;
    const auto b32 = static_cast<std::uint32_t>(b);
    std::memcpy(&r, &b32, 4);
    theta.push_back(r);
    theta.push_back(-r);
    if (theta.size() == s.size()) flush();
  }
  flush();
  return worst;
}

TEST(KernelRows, AccuratePolynomialsWithinOneAndAHalfUlp) {
  std::uint32_t bits = 0;
  const double worst = poly_worst_ulps(251, &bits);
  std::printf("[ accurate ] polynomials: worst %.3f ulp of f32 (r' bits 0x%08x)\n", worst, bits);
  EXPECT_LE(worst, 1.5) << "at r' bits 0x" << std::hex << bits;
}

TEST(KernelRows, DISABLED_AccuratePolynomialsExhaustive) {
  std::uint32_t bits = 0;
  const double worst = poly_worst_ulps(1, &bits);
  std::printf("[ accurate ] polynomials, every f32 in [2^-30, pi/4]: worst %.4f ulp (r' bits 0x%08x)\n", worst, bits);
  EXPECT_LE(worst, 1.5);
}

// The wide sweep behind kernels/RECIPES.md's figure: 1466 positions below 2^24 (80 random per octave, seed 424242)
// per preset, every pair, against MPFR. A few seconds (4 per octave at the small test scale).
TEST(KernelRows, AccurateWideSweep) {
  for (const char* name : {"llama-3.1-8b", "llama-2-7b", "qwen2.5-7b-yarn", "gpt-neox-20b", "phi-3.5-mini", "deepseek-v3"}) {
    const RopeSpec r = load_preset(name).rope;
    const RopePlan plan = make_rope_plan(r, Recipe::accurate);
    std::vector<std::int64_t> pos = log_positions(1LL << 24, ropecheck::test::scaled(80, 4), 424242);
    ExactRope exact(r, std::nullopt, 1LL << 24);
    std::vector<float> c(static_cast<std::size_t>(plan.pairs)), s(c.size());
    double worst = 0, worst_value_ulps = 0;
    for (std::int64_t p : pos) {
      recipe_cos_sin_row(plan, Position::uniform(p), c.data(), s.data());
      for (int j = 0; j < plan.pairs; ++j) {
        const auto [ec, es] = exact.cos_sin(Position::uniform(p), j);
        const auto u = static_cast<std::size_t>(j);
        worst = std::max({worst, std::fabs(c[u] - ec) / kU32, std::fabs(s[u] - es) / kU32});
        if (std::fabs(ec) >= 0.5) worst_value_ulps = std::max(worst_value_ulps, std::fabs(c[u] - ec) / ulp(ec, DType::f32));
        if (std::fabs(es) >= 0.5) worst_value_ulps = std::max(worst_value_ulps, std::fabs(s[u] - es) / ulp(es, DType::f32));
      }
    }
    std::printf("[ accurate ] %-16s %zu positions: worst |error| %.3f u32 (2^-24); values >= 1/2: %.3f ulp\n", name, pos.size(),
                worst, worst_value_ulps);
    EXPECT_LE(worst, test::kAccurateRowBoundU32) << name;
  }
}

// reference::reduce_two_pi (the exact reduction drift applies to the kernels' unreduced angles) against
// MPFR at 256 bits + x's exponent. Error bound: below 2^27 the Cody-Waite path rounds twice at |r| < 4
// (x - n C1 is exact; subtracting n C2 and then n C3 each round by <= 2^-52 there) and the 2pi constant is
// good to n 2^-107 <= 2^-80: |error| <= 2^-51 + 2^-80 < 2^-50. Beyond, MPFR rounds once: <= 2^-53 |r|.
TEST(AngleReduction, MatchesExactReductionBothPaths) {
  std::vector<double> xs = {0.5, -3.0, 3.2, 100.0, 4096.0, 131071.0, 16777215.0, 1e8, 0x1p27 - 1,
                            0x1p27, 0x1p27 + 3, 1e9, 0x1p40 + 0.5, 0x1p52, -0x1p53, 1e15};
  for (int k : {1, 710, 1000003}) xs.push_back(k * 6.283185307179586);  // near multiples: heavy cancellation
  for (double x : xs) {
    const double got = ropecheck::reduce_two_pi(x), want = test::reduce_two_pi_exact(x);
    EXPECT_LE(std::fabs(got - want), 0x1p-50) << "x = " << x;
    EXPECT_LE(std::fabs(got), 3.1415926535897936) << "x = " << x;
  }
  EXPECT_TRUE(std::isnan(ropecheck::reduce_two_pi(std::numeric_limits<double>::infinity())));
}

TEST(KernelRows, Bf16PositionsHold1409DistinctPositionsBelow131072) {
  const RopePlan plan = make_rope_plan(load_preset("llama-3.1-8b").rope, Recipe::bf16_positions);
  ASSERT_EQ(plan.inv_freq_f32[0], 1.0f);  // pair 0's angle is the position itself
  std::set<double> distinct;
  std::vector<double> a(64);
  for (std::int64_t p = 0; p < 131072; ++p) {
    recipe_angle_row(plan, Position::uniform(p), a.data());
    distinct.insert(a[0]);
  }
  EXPECT_EQ(distinct.size(), 1409u);
  // 257 is not a bf16 value: rounds to even, 256.
  recipe_angle_row(plan, Position::uniform(257), a.data());
  EXPECT_EQ(a[0], 256.0);
}

TEST(KernelRows, F16PositionsAreNanFrom65520) {
  for (const char* name : {"llama-3.1-8b", "gemma-3-4b-global"}) {
    const RopePlan plan = make_rope_plan(load_preset(name).rope, Recipe::f16_positions);
    std::vector<float> c(static_cast<std::size_t>(plan.pairs)), s(c.size());
    recipe_cos_sin_row(plan, Position::uniform(65519), c.data(), s.data());  // rounds to 65504, finite
    for (std::size_t j = 0; j < c.size(); ++j) EXPECT_TRUE(std::isfinite(c[j]) && std::isfinite(s[j])) << name << " " << j;
    for (std::int64_t p : {65520LL, 65536LL, 131071LL}) {
      recipe_cos_sin_row(plan, Position::uniform(p), c.data(), s.data());
      for (std::size_t j = 0; j < c.size(); ++j) EXPECT_TRUE(std::isnan(c[j]) && std::isnan(s[j])) << name << " p " << p << " pair " << j;
    }
  }
}

TEST(KernelRows, GgmlAngleIsTheRecurrence) {
  for (const char* name : {"llama-2-7b", "llama-3.1-8b", "qwen2-vl-7b"}) {
    const RopeSpec r = load_preset(name).rope;
    const RopePlan plan = make_rope_plan(r, Recipe::ggml);
    const RopePlan hf = make_rope_plan(r, Recipe::hf);
    std::vector<double> a(static_cast<std::size_t>(plan.pairs));
    int differs_from_product = 0;
    for (std::int64_t p : {1LL, 3LL, 1000LL, 65535LL, 1000003LL}) {
      const Position pos{p, p / 2 + 1, p / 3 + 2};
      recipe_angle_row(plan, pos, a.data());
      float th[3] = {static_cast<float>(pos.t), static_cast<float>(pos.h), static_cast<float>(pos.w)};
      const float scale = std::pow(static_cast<float>(r.base), -2.0f / static_cast<float>(r.rotary_dim));
      for (int j = 0; j < plan.pairs; ++j) {
        const auto u = static_cast<std::size_t>(j);
        const float want = th[plan.stream[u]] / plan.ggml_divisor[u];
        for (float& t : th) t = t * scale;
        ASSERT_EQ(a[u], static_cast<double>(want)) << name << " p " << p << " pair " << j;
        const std::int64_t ps = plan.stream[u] == 0 ? pos.t : (plan.stream[u] == 1 ? pos.h : pos.w);
        if (want != static_cast<float>(ps) * hf.inv_freq_f32[u]) ++differs_from_product;
      }
    }
    EXPECT_GT(differs_from_product, 0) << name << ": the recurrence should round differently from hf's product";
  }
}

// fast-sincos: hf's angle, then the __sinf / __cosf model: within about 2^-21.4 of the model with an
// exact sin of the revolution (tests/support's fast_sincos_model), and far from the truth at large angles.
TEST(KernelRows, FastSincosFollowsTheFastMathModel) {
  const RopeSpec r = load_preset("llama-3.1-8b").rope;
  const RopePlan plan = make_rope_plan(r, Recipe::fast_sincos);
  std::vector<float> c(64), s(64);
  double worst = 0, worst_vs_true = 0;
  for (std::int64_t p : log_positions(1LL << 20, 8, 11)) {
    recipe_cos_sin_row(plan, Position::uniform(p), c.data(), s.data());
    for (std::size_t j = 0; j < 64; ++j) {
      const float theta = static_cast<float>(p) * plan.inv_freq_f32[j];
      const auto [ms, mc] = test::fast_sincos_exact_model(theta);
      worst = std::max({worst, std::fabs(s[j] - ms), std::fabs(c[j] - mc)});
      worst_vs_true = std::max(worst_vs_true, std::fabs(s[j] - std::sin(static_cast<double>(theta))));
    }
  }
  std::printf("[ fast-sincos ] worst distance to the exact-revolution model 2^%.2f; to the true sin 2^%.2f\n",
              std::log2(worst), std::log2(worst_vs_true));
  EXPECT_LE(worst, 0x1p-21);
  EXPECT_GT(worst_vs_true, 0x1p-12);  // the f32 revolution loses bits at large angles
}

// ---- rope_apply --------------------------------------------------------------------------------------------

// accurate, f32 in / out, against the exact rotation: |error| <= k * u32 * M, M = att (|x_a| + |x_b|).
TEST(KernelApply, AccurateRotationAgainstExact) {
  for (const char* name : {"llama-3.1-8b", "gpt-j-6b", "qwen2.5-7b-yarn", "gpt-neox-20b"}) {
    const RopeSpec r = load_preset(name).rope;
    const RopePlan plan = make_rope_plan(r, Recipe::accurate);
    const std::vector<std::int64_t> pos = log_positions(1LL << 24, 2, 5);
    const std::int64_t T = static_cast<std::int64_t>(pos.size()), H = 2, D = r.head_dim;
    std::vector<float> x = random_input(T * H * D, 1234), y(x.size());
    rope_apply(plan, PositionsView::of(pos), TensorView::contiguous(x.data(), DType::f32, T, H, D),
               TensorView::contiguous(y.data(), DType::f32, T, H, D));
    ExactRope exact(r, std::nullopt, 1LL << 24);
    double worst = 0;
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t h = 0; h < H; ++h) {
        const float* xv = x.data() + (t * H + h) * D;
        const float* yv = y.data() + (t * H + h) * D;
        const std::vector<double> want = exact.rotate(Position::uniform(pos[static_cast<std::size_t>(t)]), xv);
        for (int j = 0; j < plan.pairs; ++j) {
          const auto [ia, ib] = pair_channels(r, j);
          const double M = exact.attention_factor() * (std::fabs(xv[ia]) + std::fabs(xv[ib]));
          if (M == 0) continue;
          worst = std::max({worst, std::fabs(yv[ia] - want[static_cast<std::size_t>(ia)]) / (M * kU32),
                            std::fabs(yv[ib] - want[static_cast<std::size_t>(ib)]) / (M * kU32)});
        }
        for (std::int64_t ch = 2 * plan.pairs; ch < D; ++ch) EXPECT_EQ(yv[ch], xv[ch]) << name << " pass-through " << ch;
      }
    std::printf("[ accurate ] %-16s worst rotated error %.3f u32 M\n", name, worst);
    EXPECT_LE(worst, test::kAccurateRotationBoundU32) << name << " (input seed 1234)";
  }
}

// A tensor in any dtype, built from float values (exact in every dtype: random_input's values).
struct Buffer {
  DType dtype;
  std::vector<unsigned char> bytes;
  Buffer(DType t, const std::vector<float>& v) : dtype(t), bytes(v.size() * size(t)) {
    for (std::size_t i = 0; i < v.size(); ++i) set(i, v[i]);
  }
  Buffer(DType t, std::size_t n) : dtype(t), bytes(n * size(t)) {}
  static std::size_t size(DType t) { return t == DType::f64 ? 8 : (t == DType::f32 ? 4 : 2); }
  void* data() { return bytes.data(); }
  void set(std::size_t i, float v) {
    unsigned char* p = bytes.data() + i * size(dtype);
    if (dtype == DType::f64) { const double d = v; std::memcpy(p, &d, 8); }
    else if (dtype == DType::f32) std::memcpy(p, &v, 4);
    else { const std::uint16_t b = dtype == DType::bf16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v); std::memcpy(p, &b, 2); }
  }
  double get(std::size_t i) const {
    const unsigned char* p = bytes.data() + i * size(dtype);
    if (dtype == DType::f64) { double d; std::memcpy(&d, p, 8); return d; }
    if (dtype == DType::f32) { float f; std::memcpy(&f, p, 4); return f; }
    std::uint16_t b;
    std::memcpy(&b, p, 2);
    return dtype == DType::bf16 ? bf16_bits_to_f32(b) : f16_bits_to_f32(b);
  }
  std::size_t count() const { return bytes.size() / size(dtype); }
};

// Elements equal bit for bit (any NaN equals any NaN: NaN payloads are not part of the contract).
void expect_same(const Buffer& a, const Buffer& b, const std::string& what) {
  ASSERT_EQ(a.count(), b.count()) << what;
  ASSERT_EQ(a.dtype, b.dtype) << what;
  const std::size_t sz = Buffer::size(a.dtype);
  int shown = 0;
  for (std::size_t i = 0; i < a.count(); ++i) {
    const double x = a.get(i), y = b.get(i);
    if (std::isnan(x) && std::isnan(y)) continue;
    if (std::memcmp(a.bytes.data() + i * sz, b.bytes.data() + i * sz, sz) != 0) {
      ADD_FAILURE() << what << ": element " << i << " differs: " << x << " vs " << y;
      if (++shown == 5) return;
    }
  }
}

constexpr DType kDtypes[] = {DType::f32, DType::bf16, DType::f16, DType::f64};

// Layout, in place, int32 / int64, threads: one result whatever the view, for every recipe and dtype.
TEST(KernelApply, ViewsInPlacePositionTypesAndThreadsAgree) {
  const std::uint64_t seed = 99;
  for (const char* name : {"llama-3.1-8b", "gpt-j-6b", "phi-2"}) {
    const RopeSpec r = load_preset(name).rope;
    const std::vector<std::int64_t> pos = log_positions(1 << 17, 1, seed);
    std::vector<std::int32_t> pos32(pos.begin(), pos.end());
    const std::int64_t T = static_cast<std::int64_t>(pos.size()), H = 3, D = r.head_dim;
    const std::vector<float> x = random_input(T * H * D, seed);
    for (const RecipeInfo& info : recipes()) {
      const RopePlan plan = make_rope_plan(r, info.recipe);
      for (DType dt : kDtypes) {
        const std::string what = std::string(name) + " / " + std::string(info.name) + " / " + std::string(to_string(dt)) +
                                 " (input seed " + std::to_string(seed) + ")";
        Buffer in(dt, x), ref(dt, x.size());
        rope_apply(plan, PositionsView::of(pos), TensorView::contiguous(in.data(), dt, T, H, D),
                   TensorView::contiguous(ref.data(), dt, T, H, D), {}, {}, {.threads = 1});
        // in place, 2 threads, int32 positions
        Buffer inplace(dt, x);
        const TensorView v = TensorView::contiguous(inplace.data(), dt, T, H, D);
        rope_apply(plan, PositionsView::of(pos32), v, v, {}, {}, {.threads = 2});
        expect_same(inplace, ref, what + " in place, int32, 2 threads");
        // [heads, tokens, dim] storage, and every other element (stride_dim 2)
        Buffer tin(dt, x.size()), tout(dt, x.size()), sin_(dt, 2 * x.size()), sout(dt, 2 * x.size());
        for (std::int64_t t = 0; t < T; ++t)
          for (std::int64_t h = 0; h < H; ++h)
            for (std::int64_t c = 0; c < D; ++c) {
              const float val = x[static_cast<std::size_t>((t * H + h) * D + c)];
              tin.set(static_cast<std::size_t>((h * T + t) * D + c), val);
              sin_.set(static_cast<std::size_t>(2 * ((t * H + h) * D + c)), val);
            }
        TensorView ti = TensorView::contiguous(tin.data(), dt, T, H, D), to = TensorView::contiguous(tout.data(), dt, T, H, D);
        ti.stride_token = to.stride_token = D;
        ti.stride_head = to.stride_head = T * D;
        rope_apply(plan, PositionsView::of(pos), ti, to);
        TensorView si = TensorView::contiguous(sin_.data(), dt, T, H, D), so = TensorView::contiguous(sout.data(), dt, T, H, D);
        si.stride_token = so.stride_token = 2 * H * D;
        si.stride_head = so.stride_head = 2 * D;
        si.stride_dim = so.stride_dim = 2;
        rope_apply(plan, PositionsView::of(pos), si, so);
        Buffer tback(dt, x.size()), sback(dt, x.size());
        for (std::int64_t t = 0; t < T; ++t)
          for (std::int64_t h = 0; h < H; ++h)
            for (std::int64_t c = 0; c < D; ++c) {
              const auto i = static_cast<std::size_t>((t * H + h) * D + c);
              const std::size_t sz = Buffer::size(dt);
              std::memcpy(tback.bytes.data() + i * sz, tout.bytes.data() + static_cast<std::size_t>((h * T + t) * D + c) * sz, sz);
              std::memcpy(sback.bytes.data() + i * sz, sout.bytes.data() + 2 * i * sz, sz);
            }
        expect_same(tback, ref, what + " [heads, tokens, dim] strides");
        expect_same(sback, ref, what + " stride_dim 2");
      }
    }
  }
}

// The dtype of the output: recipes with an f32 table round once at the end, so an f16 / bf16 output is
// the f32 output rounded; hf rotates in the storage dtype (HF with bf16 activations), reproduced here
// operation by operation from the recipe's cos / sin row.
TEST(KernelApply, OutputDtypeRoundingFollowsTheRecipe) {
  const RopeSpec r = load_preset("qwen2.5-7b-yarn").rope;  // attention factor != 1
  const std::vector<std::int64_t> pos = log_positions(1 << 20, 1, 3);
  const std::int64_t T = static_cast<std::int64_t>(pos.size()), H = 2, D = r.head_dim;
  const std::vector<float> x = random_input(T * H * D, 3);
  for (const RecipeInfo& info : recipes()) {
    const RopePlan plan = make_rope_plan(r, info.recipe);
    Buffer in(DType::f32, x), y32(DType::f32, x.size());
    rope_apply(plan, PositionsView::of(pos), TensorView::contiguous(in.data(), DType::f32, T, H, D),
               TensorView::contiguous(y32.data(), DType::f32, T, H, D));
    for (DType dt : {DType::bf16, DType::f16}) {
      Buffer ind(dt, x), yd(dt, x.size());
      rope_apply(plan, PositionsView::of(pos), TensorView::contiguous(ind.data(), dt, T, H, D),
                 TensorView::contiguous(yd.data(), dt, T, H, D));
      const DType table = table_dtype(info.recipe, dt);
      if (table == DType::f32) {
        Buffer want(dt, x.size());
        for (std::size_t i = 0; i < x.size(); ++i) want.set(i, static_cast<float>(y32.get(i)));
        expect_same(yd, want, std::string(info.name) + " " + std::string(to_string(dt)) + " = f32 result rounded once");
        continue;
      }
      // Rotation in the table dtype from the f32 row: c' = R(fl32(c * att)), y = R(R(a c') - R(b s')).
      auto R = [&](float v) { return round_to_dtype(v, table); };
      std::vector<float> c(static_cast<std::size_t>(plan.pairs)), s(c.size());
      Buffer want(dt, x.size());
      for (std::int64_t t = 0; t < T; ++t) {
        recipe_cos_sin_row(plan, Position::uniform(pos[static_cast<std::size_t>(t)]), c.data(), s.data());
        for (std::int64_t h = 0; h < H; ++h)
          for (int j = 0; j < plan.pairs; ++j) {
            const auto [ia, ib] = pair_channels(r, j);
            const std::size_t base = static_cast<std::size_t>((t * H + h) * D);
            const float a = R(x[base + ia]), b = R(x[base + ib]);
            const float cj = R(c[static_cast<std::size_t>(j)] * plan.attention_factor_f32);
            const float sj = R(s[static_cast<std::size_t>(j)] * plan.attention_factor_f32);
            want.set(base + ia, R(R(a * cj) - R(b * sj)));
            want.set(base + ib, R(R(b * cj) + R(a * sj)));
          }
      }
      expect_same(yd, want, std::string(info.name) + " " + std::string(to_string(dt)) + " rotated in " + std::string(to_string(table)));
    }
  }
}

TEST(KernelApply, MetaEqualsHfInF32) {
  const RopeSpec r = load_preset("llama-3.1-8b").rope;
  const std::vector<std::int64_t> pos = log_positions(1 << 24, 1, 8);
  const std::int64_t T = static_cast<std::int64_t>(pos.size()), H = 2, D = r.head_dim;
  const std::vector<float> x = random_input(T * H * D, 8);
  Buffer in(DType::f32, x), a(DType::f32, x.size()), b(DType::f32, x.size());
  rope_apply(make_rope_plan(r, Recipe::meta), PositionsView::of(pos), TensorView::contiguous(in.data(), DType::f32, T, H, D),
             TensorView::contiguous(a.data(), DType::f32, T, H, D));
  rope_apply(make_rope_plan(r, Recipe::hf), PositionsView::of(pos), TensorView::contiguous(in.data(), DType::f32, T, H, D),
             TensorView::contiguous(b.data(), DType::f32, T, H, D));
  expect_same(a, b, "meta vs hf, f32 (the complex multiply rounds as hf's rotation)");
}

// q and k in one call equal two calls; k may have fewer heads.
TEST(KernelApply, QAndKTogether) {
  const RopeSpec r = load_preset("llama-3.1-8b").rope;
  const std::vector<std::int64_t> pos = log_positions(1 << 16, 1, 4);
  const std::int64_t T = static_cast<std::int64_t>(pos.size()), D = r.head_dim;
  const std::vector<float> xq = random_input(T * 4 * D, 4), xk = random_input(T * 2 * D, 5);
  for (Recipe rec : {Recipe::accurate, Recipe::hf}) {
    const RopePlan plan = make_rope_plan(r, rec);
    Buffer q(DType::bf16, xq), k(DType::bf16, xk), q1(DType::bf16, xq), k1(DType::bf16, xk);
    const TensorView vq = TensorView::contiguous(q.data(), DType::bf16, T, 4, D), vk = TensorView::contiguous(k.data(), DType::bf16, T, 2, D);
    rope_apply(plan, PositionsView::of(pos), vq, vq, vk, vk);
    const TensorView wq = TensorView::contiguous(q1.data(), DType::bf16, T, 4, D), wk = TensorView::contiguous(k1.data(), DType::bf16, T, 2, D);
    rope_apply(plan, PositionsView::of(pos), wq, wq);
    rope_apply(plan, PositionsView::of(pos), wk, wk);
    expect_same(q, q1, "q with k");
    expect_same(k, k1, "k with q");
  }
}

// Multimodal: three streams against the exact reference; equal streams equal one stream.
TEST(KernelApply, ThreeStreams) {
  for (const char* name : {"qwen2-vl-7b", "qwen3-vl-8b"}) {
    const RopeSpec r = load_preset(name).rope;
    const RopePlan plan = make_rope_plan(r, Recipe::accurate);
    const std::int64_t T = 24, H = 2, D = r.head_dim;
    std::vector<std::int64_t> thw(static_cast<std::size_t>(3 * T)), same(thw.size()), one(static_cast<std::size_t>(T));
    std::mt19937_64 rng(21);
    std::uniform_int_distribution<std::int64_t> d(0, 40000);
    for (std::int64_t t = 0; t < T; ++t) {
      for (int k = 0; k < 3; ++k) thw[static_cast<std::size_t>(k * T + t)] = d(rng);
      one[static_cast<std::size_t>(t)] = thw[static_cast<std::size_t>(t)];
      for (int k = 0; k < 3; ++k) same[static_cast<std::size_t>(k * T + t)] = one[static_cast<std::size_t>(t)];
    }
    const std::vector<float> x = random_input(T * H * D, 21);
    std::vector<float> y(x.size()), ys(x.size()), yo(x.size());
    const TensorView in = TensorView::contiguous(const_cast<float*>(x.data()), DType::f32, T, H, D);
    rope_apply(plan, PositionsView::three_streams(thw, T), in, TensorView::contiguous(y.data(), DType::f32, T, H, D));
    rope_apply(plan, PositionsView::three_streams(same, T), in, TensorView::contiguous(ys.data(), DType::f32, T, H, D));
    rope_apply(plan, PositionsView::of(one), in, TensorView::contiguous(yo.data(), DType::f32, T, H, D));
    EXPECT_EQ(std::memcmp(ys.data(), yo.data(), ys.size() * 4), 0) << name;
    ExactRope exact(r, std::nullopt, 40000);
    double worst = 0;
    for (std::int64_t t = 0; t < T; ++t) {
      const Position p = PositionsView::three_streams(thw, T).at(t);
      for (std::int64_t h = 0; h < H; ++h) {
        const std::size_t base = static_cast<std::size_t>((t * H + h) * D);
        const std::vector<double> want = exact.rotate(p, x.data() + base);
        for (int j = 0; j < plan.pairs; ++j) {
          const auto [ia, ib] = pair_channels(r, j);
          const double M = std::fabs(x[base + ia]) + std::fabs(x[base + ib]);
          if (M > 0)
            worst = std::max({worst, std::fabs(y[base + ia] - want[static_cast<std::size_t>(ia)]) / (M * kU32),
                              std::fabs(y[base + ib] - want[static_cast<std::size_t>(ib)]) / (M * kU32)});
        }
      }
    }
    EXPECT_LE(worst, test::kAccurateRotationBoundU32) << name << " (seed 21)";
  }
}

// accurate with f64 storage: everything in binary64.
TEST(KernelApply, AccurateF64IsBinary64) {
  const RopeSpec r = load_preset("llama-3.1-8b").rope;
  const RopePlan plan = make_rope_plan(r, Recipe::accurate);
  const std::vector<std::int64_t> pos = log_positions(1LL << 24, 1, 6);
  const std::int64_t T = static_cast<std::int64_t>(pos.size()), D = r.head_dim;
  const std::vector<float> xf = random_input(T * D, 6);
  const std::vector<double> x(xf.begin(), xf.end());
  std::vector<double> y(x.size());
  rope_apply(plan, PositionsView::of(pos), TensorView::contiguous(const_cast<double*>(x.data()), DType::f64, T, 1, D),
             TensorView::contiguous(y.data(), DType::f64, T, 1, D));
  ExactRope exact(r, std::nullopt, 1LL << 24);
  double worst = 0;
  for (std::int64_t t = 0; t < T; ++t) {
    const std::vector<double> want = exact.rotate(Position::uniform(pos[static_cast<std::size_t>(t)]), xf.data() + t * D);
    for (int j = 0; j < plan.pairs; ++j) {
      const auto [ia, ib] = pair_channels(r, j);
      const std::size_t base = static_cast<std::size_t>(t * D);
      const double M = std::fabs(x[base + ia]) + std::fabs(x[base + ib]);
      const double theta = static_cast<double>(pos[static_cast<std::size_t>(t)]) * plan.inv_freq_f64[static_cast<std::size_t>(j)];
      // fp64-angle: (6 |ln w| + 14) u64 |theta| + 8 u64, with margin
      const double bound = (1 + 1.0 / 32) * ((6 * std::fabs(std::log(plan.inv_freq_f64[static_cast<std::size_t>(j)])) + 14) * theta + 8) * 0x1p-53;
      if (M > 0)
        worst = std::max({worst, std::fabs(y[base + ia] - want[static_cast<std::size_t>(ia)]) / (M * bound),
                          std::fabs(y[base + ib] - want[static_cast<std::size_t>(ib)]) / (M * bound)});
    }
  }
  std::printf("[ accurate f64 ] worst error / fp64-angle bound %.3f\n", worst);
  EXPECT_LE(worst, 1.0);
}

TEST(KernelApply, RejectsBadArguments) {
  const RopeSpec r = load_preset("llama-2-7b").rope;
  const RopePlan plan = make_rope_plan(r, Recipe::accurate);
  std::vector<float> buf(4 * 128 * 2);
  const std::vector<std::int64_t> pos{0, 1, 2, 3};
  const TensorView v = TensorView::contiguous(buf.data(), DType::f32, 4, 1, 128);
  auto throws_with = [&](auto&& f, const char* needle) {
    try {
      f();
      ADD_FAILURE() << "no exception, expected one naming '" << needle << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  throws_with([&] { rope_apply(plan, PositionsView::of(std::span(pos).first(3)), v, v); }, "tokens");
  TensorView bad = v;
  bad.head_dim = 64;
  throws_with([&] { rope_apply(plan, PositionsView::of(pos), bad, bad); }, "head_dim");
  TensorView shifted = v;
  shifted.data = buf.data() + 1;
  throws_with([&] { rope_apply(plan, PositionsView::of(pos), v, shifted); }, "overlap");
  TensorView null_out = v;
  null_out.data = nullptr;
  throws_with([&] { rope_apply(plan, PositionsView::of(pos), v, null_out); }, "q_out.data");
  throws_with([&] { rope_apply(plan, PositionsView::of(pos), v, TensorView{}); }, "shape");
  throws_with([&] { rope_apply(plan, PositionsView::of(pos), v, v, {}, {}, {.threads = -1}); }, "threads");
  PositionsView two = PositionsView::of(pos);
  two.streams = 2;
  throws_with([&] { rope_apply(plan, two, v, v); }, "streams");
  TensorView k = TensorView::contiguous(buf.data() + 4 * 128, DType::f32, 3, 1, 128);
  throws_with([&] { rope_apply(plan, PositionsView::of(pos), v, v, k, k); }, "tokens");
  // No heads: nothing to read, no data needed.
  EXPECT_NO_THROW(rope_apply(plan, PositionsView::of(pos), TensorView::contiguous(nullptr, DType::f32, 4, 0, 128),
                             TensorView::contiguous(nullptr, DType::f32, 4, 0, 128)));
  // A disjoint out of place call is fine.
  TensorView out = TensorView::contiguous(buf.data() + 4 * 128, DType::f32, 4, 1, 128);
  EXPECT_NO_THROW(rope_apply(plan, PositionsView::of(pos), v, out));
}

// ---- tables ---------------------------------------------------------------------------------------------------

TEST(KernelTables, CosSinTableIsTheRowRounded) {
  const RopeSpec r = load_preset("llama-3.1-8b").rope;
  const std::vector<std::int64_t> pos = log_positions(1 << 20, 1, 9);
  const std::int64_t T = static_cast<std::int64_t>(pos.size()), P = 64;
  for (const RecipeInfo& info : recipes()) {
    const RopePlan plan = make_rope_plan(r, info.recipe);
    for (DType dt : kDtypes) {
      Buffer c(dt, static_cast<std::size_t>(T * P)), s(dt, static_cast<std::size_t>(T * P));
      rope_cos_sin_table(plan, PositionsView::of(pos), c.data(), s.data(), dt);
      Buffer wc(dt, c.count()), ws(dt, s.count());
      std::vector<float> rc(64), rs(64);
      const DType table = table_dtype(info.recipe, dt);
      for (std::int64_t t = 0; t < T; ++t) {
        const std::int64_t p = pos[static_cast<std::size_t>(t)];
        recipe_cos_sin_row(plan, Position::uniform(p), rc.data(), rs.data());
        for (std::int64_t j = 0; j < P; ++j) {
          const auto i = static_cast<std::size_t>(t * P + j);
          if (table == DType::f64 && info.recipe == Recipe::accurate) {  // binary64 values
            const double theta = static_cast<double>(p) * plan.inv_freq_f64[static_cast<std::size_t>(j)];
            ASSERT_EQ(c.get(i), std::cos(theta)) << p << " " << j;
            ASSERT_EQ(s.get(i), std::sin(theta)) << p << " " << j;
            continue;
          }
          const DType t1 = table == DType::f64 ? DType::f32 : table;
          wc.set(i, round_to_dtype(rc[static_cast<std::size_t>(j)], t1));
          ws.set(i, round_to_dtype(rs[static_cast<std::size_t>(j)], t1));
        }
      }
      if (table == DType::f64 && info.recipe == Recipe::accurate) continue;
      expect_same(c, wc, std::string(info.name) + " cos " + std::string(to_string(dt)));
      expect_same(s, ws, std::string(info.name) + " sin " + std::string(to_string(dt)));
    }
  }
}

TEST(KernelTables, SinusoidalAgainstExact) {
  for (const char* name : {"transformer-base", "fairseq-transformer"}) {
    const SinusoidalSpec spec = load_preset(name).sinusoidal;
    const std::vector<std::int64_t> pos = log_positions(1 << 20, 2, 10);
    const std::size_t T = pos.size(), d = static_cast<std::size_t>(spec.d_model);
    ScopedPrecision prec(working_precision_bits(53, sinusoidal_max_abs_angle(spec, 1 << 20)));
    const std::vector<Real> w = sinusoidal_frequencies<Real>(spec);
    std::vector<float> acc(T * d), hf(T * d);
    std::vector<double> acc64(T * d);
    sinusoidal_table(spec, Recipe::accurate, pos, acc.data(), DType::f32);
    sinusoidal_table(spec, Recipe::accurate, pos, acc64.data(), DType::f64);
    sinusoidal_table(spec, Recipe::hf, pos, hf.data(), DType::f32);
    const std::vector<float> w32 = hf_sinusoidal_frequencies_f32(spec);
    double worst = 0, worst64 = 0, worst_hf = 0;
    for (std::size_t t = 0; t < T; ++t) {
      const std::vector<Real> row = sinusoidal_row(spec, w, pos[t]);
      const auto pf = static_cast<float>(pos[t] + spec.position_offset);
      for (std::size_t c = 0; c < d; ++c) {
        const double e = row[c].convert_to<double>();
        worst = std::max(worst, std::fabs(acc[t * d + c] - e) / kU32);
        worst64 = std::max(worst64, std::fabs(acc64[t * d + c] - e) / 0x1p-53 / (1 + static_cast<double>(pos[t] + spec.position_offset)));
        const SinusoidalColumn col = sinusoidal_column(spec, static_cast<int>(c));
        if (col.kind == SinusoidalKind::zero) {
          EXPECT_EQ(hf[t * d + c], 0.0f);
          continue;
        }
        const float theta = pf * w32[static_cast<std::size_t>(col.frequency)];
        const double want = col.kind == SinusoidalKind::sine ? std::sin(static_cast<double>(theta)) : std::cos(static_cast<double>(theta));
        worst_hf = std::max(worst_hf, std::fabs(hf[t * d + c] - want) / kU32);
      }
    }
    std::printf("[ sinusoidal %s ] accurate %.3f u32, accurate f64 %.3f u64 per unit angle, hf vs its f32 angle %.3f u32\n", name,
                worst, worst64, worst_hf);
    EXPECT_LE(worst, test::kAccurateRowBoundU32) << name;
    EXPECT_LE(worst64, 16.0) << name;
    EXPECT_LE(worst_hf, 1.5) << name;
  }
}

TEST(KernelTables, SinusoidalKnownBadRecipesApplyTheirDefect) {
  const SinusoidalSpec spec = load_preset("transformer-base").sinusoidal;
  const std::vector<std::int64_t> pos{1000, 65519, 65520, 70000, 131071};
  const std::size_t d = static_cast<std::size_t>(spec.d_model);
  std::vector<float> f16p(pos.size() * d), bf16p(pos.size() * d), bf16t(pos.size() * d), hf(pos.size() * d);
  sinusoidal_table(spec, Recipe::f16_positions, pos, f16p.data(), DType::f32);
  sinusoidal_table(spec, Recipe::bf16_positions, pos, bf16p.data(), DType::f32);
  sinusoidal_table(spec, Recipe::bf16_table, pos, bf16t.data(), DType::f32);
  sinusoidal_table(spec, Recipe::hf, pos, hf.data(), DType::f32);
  for (std::size_t t = 0; t < pos.size(); ++t)
    for (std::size_t c = 0; c < d; ++c) {
      EXPECT_EQ(std::isnan(f16p[t * d + c]), pos[t] + spec.position_offset >= 65520) << pos[t] << " " << c;
      EXPECT_EQ(bf16t[t * d + c], round_to_dtype(hf[t * d + c], DType::bf16));
    }
  // bf16 positions: 65519 and 65520 are both held as 65536.
  for (std::size_t c = 0; c < d; ++c) EXPECT_EQ(bf16p[1 * d + c], bf16p[2 * d + c]) << c;
}

}  // namespace
}  // namespace ropecheck::kernels
