// The property suite against ropecheck's own fast kernels (`props --kernel builtin:RECIPE`, here through
// support/builtin_targets.hpp), each claiming the class the error model gives its recipe and dtype. The recommended recipes (accurate, hf, meta, ggml) must pass every property on
// generated specs of every kind; the known-bad recipes bf16-inv-freq and bf16-positions must be caught
// on the spec a user meets them with (llama-3.1-8b).
//
// Deterministic: RapidCheck seed kSeed, printed. Reproduce a failure with the `reproduce` line the suite
// prints, or `ropecheck props --kernel builtin:RECIPE --dtype f32 --cases N --seed 20261121`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "ropecheck/kernels/recipe.hpp"
#include "builtin_targets.hpp"
#include "ropecheck/props/kut_target.hpp"
#include "ropecheck/props/mutants.hpp"
#include "ropecheck/props/registry.hpp"
#include "ropecheck/props/suite.hpp"
#include "ropecheck/reference/presets.hpp"
#include "test_scale.hpp"

namespace ropecheck::props {
using namespace ropecheck::accuracy;
namespace {

namespace k = ropecheck::kernels;
constexpr std::uint64_t kSeed = 20261121;

class KernelProps : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { register_builtin_targets(); }
};

TEST_F(KernelProps, EveryRecipeClaimsItsClass) {
  for (const k::RecipeInfo& r : k::recipes())
    for (const DType dt : {DType::f32, DType::bf16}) {
      const auto t = ropecheck::test::builtin_target(r.recipe, dt);
      EXPECT_EQ(t->info().name, "builtin:" + std::string(r.name));
      EXPECT_EQ(t->info().dtype, dt) << r.name;
      EXPECT_EQ(t->info().accuracy, kernel_claimed_class(r.recipe, dt)) << r.name;
    }
  // The claims the error model derives (ERROR_MODEL.md section 10, kernels/RECIPES.md).
  EXPECT_EQ(kernel_claimed_class(k::Recipe::accurate, DType::f32), AccuracyClass::f32_reduced);
  EXPECT_EQ(kernel_claimed_class(k::Recipe::accurate, DType::bf16), AccuracyClass::fp64_angle);
  EXPECT_EQ(kernel_claimed_class(k::Recipe::accurate, DType::f64), AccuracyClass::fp64_angle);
  EXPECT_EQ(kernel_claimed_class(k::Recipe::hf, DType::f32), AccuracyClass::fp32_angle);
  EXPECT_EQ(kernel_claimed_class(k::Recipe::hf, DType::bf16), AccuracyClass::bf16_table);
  EXPECT_EQ(kernel_claimed_class(k::Recipe::hf, DType::f16), AccuracyClass::f16_table);
  EXPECT_EQ(kernel_claimed_class(k::Recipe::meta, DType::bf16), AccuracyClass::fp32_angle);
  EXPECT_EQ(kernel_claimed_class(k::Recipe::ggml, DType::f32), AccuracyClass::fp32_angle);
  EXPECT_EQ(kernel_claimed_class(k::Recipe::bf16_inv_freq, DType::f32), AccuracyClass::fp32_angle);
  EXPECT_EQ(kernel_claimed_class(k::Recipe::f16_table, DType::f32), AccuracyClass::f16_table);
  // The portable path is selectable and says so.
  EXPECT_NE(ropecheck::test::builtin_target(k::Recipe::accurate, DType::f32, true)->info().description.find("portable"),
            std::string::npos);
}

// Every property, generated specs of every kind (presets and preset-like configurations), positions up
// to 2^24: a correct kernel of its class never fails. At the tiny test scale (test_scale.hpp) 4 and 2
// cases per property (each property draws its own specs, so every kind still comes up).
TEST_F(KernelProps, RecommendedRecipesPassTheWholeSuite) {
  struct Run {
    k::Recipe recipe;
    DType dtype;
    int cases;
  };
  const int f32 = ropecheck::test::scaled(30, 30, 4), bf16 = ropecheck::test::scaled(12, 12, 2);
  using R = k::Recipe;
  for (const Run& r : {Run{R::accurate, DType::f32, f32}, Run{R::hf, DType::f32, f32}, Run{R::meta, DType::f32, f32},
                       Run{R::ggml, DType::f32, f32}, Run{R::accurate, DType::bf16, bf16}, Run{R::hf, DType::bf16, bf16},
                       Run{R::meta, DType::bf16, bf16}, Run{R::ggml, DType::bf16, bf16}}) {
    const auto t = ropecheck::test::builtin_target(r.recipe, r.dtype);
    const std::string target = t->info().name + " " + std::string(to_string(r.dtype));
    SuiteOptions o;
    o.cases = r.cases;
    o.seed = kSeed;
    const SuiteReport rep = run_suite(*t, nullptr, o);
    std::printf("%s (%s), generated specs, seed %llu, %d cases per property:\n%s", target.c_str(),
                std::string(to_string(t->info().accuracy)).c_str(), static_cast<unsigned long long>(kSeed), r.cases,
                rep.summary().c_str());
    EXPECT_TRUE(rep.passed()) << target << ":\n" << rep.summary();
    int run = 0;
    for (const PropertyOutcome& p : rep.outcomes) run += p.cases - p.skipped;
    EXPECT_GT(run, 0) << target << " ran no case";
  }
}

// The known-bad recipes a user meets (transformers #29496: bf16 inverse frequencies; position ids in
// bf16) claim what hf claims (fp32-angle with f32 outputs) and are caught.
TEST_F(KernelProps, KnownBadRecipesAreCaught) {
  const EncodingSpec spec = load_preset("llama-3.1-8b");
  for (const k::Recipe recipe : {k::Recipe::bf16_inv_freq, k::Recipe::bf16_positions}) {
    const auto t = ropecheck::test::builtin_target(recipe);
    const std::string name = t->info().name;
    SuiteOptions o;
    o.cases = 40;
    o.seed = kSeed;
    o.only = {"relative_shift"};  // the first property of the suite; shrinking a failure is the slow part
    const SuiteReport rep = run_suite(*t, &spec, o);
    EXPECT_FALSE(rep.passed()) << name << " passed:\n" << rep.summary();
    for (const PropertyOutcome& p : rep.outcomes)
      if (!p.passed)
        std::printf("%-30s caught by %-15s margin %-10.4g %s\n", name.c_str(), p.property.c_str(), p.worst_margin,
                    p.counterexample.c_str());
  }
}

}  // namespace
}  // namespace ropecheck::props
