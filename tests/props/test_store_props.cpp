// The storage properties (props/PROPERTIES.md, "Storage properties"): the correct own recipe passes
// store_shift on FP8 / GGML / MLX stores and norm_invariance with and without the spec's own norm stage;
// injected store and norm mistakes (kernels/rope_quantize.hpp, qk_norm.hpp) fail them. Few cases each:
// every case of a wrong recipe fails, so the first one carries the claim.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ropecheck/props/store_properties.hpp"
#include "ropecheck/reference/presets.hpp"

namespace ropecheck::props {
namespace {

using kernels::NormMistake;
using kernels::StoreMistake;

quant::StoreSpec store(const std::string& item) {
  std::string why;
  const auto s = quant::parse_store(item, why);
  EXPECT_TRUE(s) << why;
  return *s;
}

StorePropsOptions opts(int cases) {
  StorePropsOptions o;
  o.cases = cases;
  o.seed = 20261128;
  return o;
}

TEST(StoreProps, CorrectRecipePassesStoreShiftOnEveryStoreKind) {
  const EncodingSpec spec = load_preset("llama-3.1-8b");
  for (const char* item : {"e4m3fn", "e5m2:nonfinite:per-token-head", "q8_0", "int4g64", "int8g32:bf16"}) {
    const StorePropertyOutcome o = run_store_shift(spec, store(item), {}, opts(3));
    EXPECT_EQ(o.verdict, Verdict::pass) << item << ": " << o.counterexample;
    EXPECT_EQ(o.cases, 3) << item;
    EXPECT_LT(o.worst_margin, 1) << item;
    EXPECT_GT(o.worst_margin, 0) << item;  // the check saw the store's error
  }
}

TEST(StoreProps, StoreMistakesFailStoreShift) {
  const EncodingSpec spec = load_preset("llama-3.1-8b");
  const std::pair<const char*, StoreMistake> cases[] = {
      {"e4m3fn", StoreMistake::scale_applied_twice},
      {"e4m3fn", StoreMistake::e5m2_for_e4m3fn},
      {"q8_0", StoreMistake::scale_inverted},
      {"int4g64", StoreMistake::mlx_scale_bias_swapped},
  };
  for (const auto& [item, mistake] : cases) {
    StoreRecipe rec;
    rec.store_mistake = mistake;
    const StorePropertyOutcome o = run_store_shift(spec, store(item), rec, opts(6));
    EXPECT_EQ(o.verdict, Verdict::fail) << item << " " << kernels::to_string(mistake);
    EXPECT_NE(o.counterexample.find("store "), std::string::npos) << o.counterexample;
  }
}

TEST(StoreProps, StoreShiftRefusesAHeadDimTheStoreCannotGroup) {
  EncodingSpec spec = load_preset("llama-3.1-8b");
  spec.rope.head_dim = spec.rope.rotary_dim = 48;
  EXPECT_THROW(run_store_shift(spec, store("q8_0"), {}, opts(1)), std::invalid_argument);
  EXPECT_THROW(run_store_shift(load_preset("transformer-base"), store("q8_0"), {}, opts(1)), std::invalid_argument);
  EXPECT_EQ(store_property_names(), (std::vector<std::string>{"store_shift", "norm_invariance"}));
}

TEST(StoreProps, CorrectRecipePassesNormInvariance) {
  for (const char* preset : {"qwen3-8b", "llama-3.1-8b"}) {  // the spec's own stage; a drawn one
    const StorePropertyOutcome o = run_norm_invariance(load_preset(preset), {}, opts(6));
    EXPECT_EQ(o.verdict, Verdict::pass) << preset << ": " << o.counterexample;
    EXPECT_LT(o.worst_margin, 1) << preset;
  }
}

TEST(StoreProps, NormMistakesFailNormInvariance) {
  for (const NormMistake m : {NormMistake::weight_omitted, NormMistake::weight_form_swapped, NormMistake::whole_row,
                              NormMistake::mean_over_pairs, NormMistake::eps_omitted}) {
    StoreRecipe rec;
    rec.norm_mistake = m;
    const StorePropertyOutcome o = run_norm_invariance(load_preset("llama-3.1-8b"), rec, opts(6));
    EXPECT_EQ(o.verdict, Verdict::fail) << static_cast<int>(m);
  }
}

}  // namespace
}  // namespace ropecheck::props
