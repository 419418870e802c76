// The Q/K RMSNorm stage of the spec (core/SPEC_FORMAT.md, "q_norm / k_norm"): JSON round trip, one-line
// errors naming the key, the weight factor w or 1 + w, the Hugging Face import of Qwen3 / Gemma 3, and
// specs without the stage writing exactly the JSON they wrote before.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "ropecheck/core/spec.hpp"
#include "ropecheck/core/spec_json.hpp"
#include "ropecheck/reference/presets.hpp"

namespace {

using nlohmann::json;
using ropecheck::NormWeightForm;
using ropecheck::SpecError;

json with_norm(const json& q_norm) {
  json j = json::parse(R"({"name": "t", "family": "rope",
                           "rope": {"head_dim": 4, "base": 10000.0, "layout": "half_split"}})");
  j["rope"]["q_norm"] = q_norm;
  return j;
}

std::string error_of(const json& j) {
  try {
    (void)ropecheck::spec_from_json(j);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(QkNormSpec, RoundTripsAndNamesTheForm) {
  const auto s = ropecheck::spec_from_json(with_norm({{"eps", 1e-6}, {"weight_form", "1+w"}, {"weight", {0.5, -1, 0, 2}}}));
  ASSERT_TRUE(s.rope.q_norm.has_value());
  EXPECT_FALSE(s.rope.k_norm.has_value());
  EXPECT_EQ(s.rope.q_norm->weight_form, NormWeightForm::one_plus_w);
  EXPECT_EQ(ropecheck::norm_weight_factor(*s.rope.q_norm, 0), 1.5);
  EXPECT_EQ(ropecheck::norm_weight_factor(*s.rope.q_norm, 1), 0.0);
  EXPECT_EQ(ropecheck::norm_stage(s.rope, "q"), &*s.rope.q_norm);
  EXPECT_EQ(ropecheck::norm_stage(s.rope, "k"), nullptr);
  const auto back = ropecheck::spec_from_json(ropecheck::spec_to_json(s));
  EXPECT_EQ(back.rope.q_norm->weight, s.rope.q_norm->weight);
  EXPECT_EQ(back.rope.q_norm->eps, 1e-6);
  EXPECT_EQ(ropecheck::spec_to_json(s)["rope"]["q_norm"]["weight_form"], "1+w");
}

TEST(QkNormSpec, SpecsWithoutTheStageWriteNoNormKey) {
  for (const std::string& name : ropecheck::preset_names()) {
    const auto s = ropecheck::load_preset(name);
    if (s.family != ropecheck::Family::rope || ropecheck::has_qk_norm(s.rope)) continue;
    const json j = ropecheck::spec_to_json(s);
    EXPECT_FALSE(j["rope"].contains("q_norm")) << name;
    EXPECT_FALSE(j["rope"].contains("k_norm")) << name;
  }
}

TEST(QkNormSpec, BadValuesGiveOneLineNamingTheKey) {
  EXPECT_NE(error_of(with_norm({{"eps", 0.0}})).find("'rope.q_norm.eps'"), std::string::npos);
  EXPECT_NE(error_of(with_norm({{"weight_form", "w"}})).find("rope.q_norm.eps': missing"), std::string::npos);
  EXPECT_NE(error_of(with_norm({{"eps", 1e-6}, {"weight_form", "x"}})).find("rope.q_norm.weight_form"),
            std::string::npos);
  EXPECT_NE(error_of(with_norm({{"eps", 1e-6}, {"weight", {1, 2}}})).find("needs head_dim (4) values"),
            std::string::npos);
  // 0.1 is not a bf16 value; 1 + 2^-40 needs 41 significant bits.
  EXPECT_NE(error_of(with_norm({{"eps", 1e-6}, {"weight", {1, 0.1, 1, 1}}})).find("rope.q_norm.weight[1]"),
            std::string::npos);
  EXPECT_NE(error_of(with_norm({{"eps", 1e-6}, {"weight_form", "1+w"}, {"weight", {1, 1, 0x1p-40, 1}}}))
                .find("rope.q_norm.weight[2]"),
            std::string::npos);
  EXPECT_NE(error_of(with_norm({{"eps", 1e-6}, {"bias", 1}})).find("rope.q_norm.bias': unknown key"), std::string::npos);
  for (const json& j : {with_norm({{"eps", 0.0}}), with_norm({{"eps", 1e-6}, {"weight", {1, 0.1, 1, 1}}})})
    EXPECT_EQ(error_of(j).find('\n'), std::string::npos);
}

TEST(QkNormSpec, Qwen3PresetHasTheStage) {
  const auto s = ropecheck::load_preset("qwen3-8b");
  ASSERT_TRUE(s.rope.q_norm && s.rope.k_norm);
  EXPECT_EQ(s.rope.q_norm->eps, 1e-6);
  EXPECT_EQ(s.rope.q_norm->weight_form, NormWeightForm::w);
  EXPECT_TRUE(s.rope.q_norm->weight.empty());
  EXPECT_EQ(s.rope.head_dim, 128);
  EXPECT_EQ(s.rope.base, 1e6);
}

TEST(QkNormSpec, HfImportRecognisesQwen3AndGemma3) {
  const json qwen3 = {{"model_type", "qwen3"}, {"head_dim", 128}, {"hidden_size", 4096}, {"num_attention_heads", 32},
                     {"rope_theta", 1000000}, {"rms_norm_eps", 1e-6}, {"max_position_embeddings", 40960}};
  const auto q = ropecheck::spec_from_hf_config(qwen3, {});
  ASSERT_TRUE(q.rope.q_norm && q.rope.k_norm);
  EXPECT_EQ(q.rope.k_norm->weight_form, NormWeightForm::w);
  EXPECT_EQ(q.rope.k_norm->eps, 1e-6);
  json gemma = {{"model_type", "gemma3"},
                {"text_config", {{"model_type", "gemma3_text"}, {"head_dim", 256}, {"hidden_size", 2560},
                                 {"num_attention_heads", 8}, {"rope_theta", 1000000.0}, {"rms_norm_eps", 1e-6}}}};
  const auto g = ropecheck::spec_from_hf_config(gemma, {});
  ASSERT_TRUE(g.rope.q_norm.has_value());
  EXPECT_EQ(g.rope.q_norm->weight_form, NormWeightForm::one_plus_w);
  json llama = qwen3;
  llama["model_type"] = "llama";
  EXPECT_FALSE(ropecheck::has_qk_norm(ropecheck::spec_from_hf_config(llama, {}).rope));
}

}  // namespace
