// Tests for the Hugging Face config.json importer (spec_from_hf_config, core/src/hf_config.cpp).
//
// Each config below is written as it appears on the Hub (key names, legacy `rope_scaling` +
// `rope_theta`, or the transformers v5 `rope_parameters`), and the expected fields come from
// variants.md sections 1 and 5. Where transformers generations disagree (variants.md 1.0) the test
// asserts the current behaviour (G4: PR #40320 and v5) and says so in a comment.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/core/spec_json.hpp"

namespace {

using nlohmann::json;
using ropecheck::EncodingSpec;
using ropecheck::Family;
using ropecheck::HfImportOptions;
using ropecheck::MropeMode;
using ropecheck::RopeLayout;
using ropecheck::RopeSpec;
using ropecheck::ScalingType;
using ropecheck::SpecError;

RopeSpec import(const json& cfg, const HfImportOptions& opt = {}) {
  const EncodingSpec s = ropecheck::spec_from_hf_config(cfg, opt);
  EXPECT_EQ(s.family, Family::rope);
  EXPECT_EQ(s.name, opt.name);
  return s.rope;
}

::testing::AssertionResult import_fails(const json& cfg, std::initializer_list<std::string> needles,
                                        const HfImportOptions& opt = {}) {
  try {
    (void)ropecheck::spec_from_hf_config(cfg, opt);
  } catch (const SpecError& e) {
    const std::string msg = e.what();
    for (const std::string& n : needles)
      if (msg.find(n) == std::string::npos)
        return ::testing::AssertionFailure() << "message \"" << msg << "\" does not contain \"" << n << "\"";
    if (msg.find('\n') != std::string::npos)
      return ::testing::AssertionFailure() << "message \"" << msg << "\" is not one line";
    return ::testing::AssertionSuccess() << msg;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-SpecError exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "no SpecError thrown";
}

// ---------------------------------------------------------------------------------------------
// Llama

const char* kLlama31_8B = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
})";

TEST(HfConfig, Llama31_8B_LegacyRopeScalingLlama3) {
  const RopeSpec r = import(json::parse(kLlama31_8B));
  EXPECT_EQ(r.head_dim, 128);  // hidden_size 4096 / 32 heads
  EXPECT_EQ(r.rotary_dim, 128);
  EXPECT_EQ(r.base, 500000.0);
  EXPECT_EQ(r.layout, RopeLayout::half_split);
  EXPECT_EQ(r.max_position_embeddings, 131072);
  EXPECT_EQ(r.scaling.type, ScalingType::llama3);
  EXPECT_EQ(r.scaling.factor, 8.0);
  EXPECT_EQ(r.scaling.low_freq_factor, 1.0);
  EXPECT_EQ(r.scaling.high_freq_factor, 4.0);
  EXPECT_EQ(r.scaling.original_max_position_embeddings, 8192);
  EXPECT_FALSE(r.scaling.attention_factor.has_value());
  EXPECT_EQ(r.mrope, MropeMode::none);
  EXPECT_EQ(ropecheck::effective_factor(r), 8.0);
}

TEST(HfConfig, ImportedSpecRoundTripsThroughSpecJson) {
  HfImportOptions opt;
  opt.name = "llama31";
  const EncodingSpec s = ropecheck::spec_from_hf_config(json::parse(kLlama31_8B), opt);
  EXPECT_EQ(s.name, "llama31");
  EXPECT_NE(s.source.find("llama"), std::string::npos) << s.source;
  const json j = ropecheck::spec_to_json(s);
  EXPECT_EQ(ropecheck::spec_to_json(ropecheck::spec_from_json(j)), j);
}

TEST(HfConfig, Llama32_1B_ExplicitHeadDim) {
  const RopeSpec r = import(json::parse(R"({
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 2048,
    "head_dim": 64,
    "intermediate_size": 8192,
    "max_position_embeddings": 131072,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 16,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
      "factor": 32.0,
      "high_freq_factor": 4.0,
      "low_freq_factor": 1.0,
      "original_max_position_embeddings": 8192,
      "rope_type": "llama3"
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": true,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0",
    "vocab_size": 128256
  })"));
  EXPECT_EQ(r.head_dim, 64);
  EXPECT_EQ(r.rotary_dim, 64);
  EXPECT_EQ(r.base, 500000.0);
  EXPECT_EQ(r.layout, RopeLayout::half_split);
  EXPECT_EQ(r.scaling.type, ScalingType::llama3);
  EXPECT_EQ(r.scaling.factor, 32.0);
  EXPECT_EQ(r.scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(r.max_position_embeddings, 131072);
}

TEST(HfConfig, ExplicitHeadDimWinsOverHiddenSizeOverHeads) {
  // Gemma-3-4B text: head_dim 256 while hidden_size / heads = 2560 / 8 = 320.
  // G4 (and G2+) read config.head_dim; G1 ignored it and used hidden_size // heads.
  const RopeSpec r = import(json::parse(R"({
    "model_type": "gemma3_text", "hidden_size": 2560, "num_attention_heads": 8, "num_key_value_heads": 4,
    "head_dim": 256, "max_position_embeddings": 131072, "rope_theta": 10000.0
  })"));
  EXPECT_EQ(r.head_dim, 256);
  EXPECT_EQ(r.rotary_dim, 256);
}

// ---------------------------------------------------------------------------------------------
// Phi

json phi35_mini() {
  json cfg = json::parse(R"({
    "architectures": ["Phi3ForCausalLM"],
    "attention_bias": false,
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "embd_pdrop": 0.0,
    "eos_token_id": 32000,
    "hidden_act": "silu",
    "hidden_size": 3072,
    "initializer_range": 0.02,
    "intermediate_size": 8192,
    "max_position_embeddings": 131072,
    "model_type": "phi3",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "original_max_position_embeddings": 4096,
    "pad_token_id": 32000,
    "resid_pdrop": 0.0,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"type": "longrope"},
    "rope_theta": 10000.0,
    "sliding_window": 262144,
    "tie_word_embeddings": false,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.43.3",
    "use_cache": true,
    "vocab_size": 32064
  })");
  std::vector<double> short_factor, long_factor;
  for (int i = 0; i < 48; ++i) {
    short_factor.push_back(1.0 + 0.03125 * i);
    long_factor.push_back(1.5 + 0.5 * i);
  }
  cfg["rope_scaling"]["short_factor"] = short_factor;
  cfg["rope_scaling"]["long_factor"] = long_factor;
  return cfg;
}

TEST(HfConfig, Phi35Mini_Longrope) {
  const RopeSpec r = import(phi35_mini());
  EXPECT_EQ(r.head_dim, 96);  // 3072 / 32
  EXPECT_EQ(r.rotary_dim, 96);
  EXPECT_EQ(r.base, 10000.0);
  EXPECT_EQ(r.layout, RopeLayout::half_split);
  EXPECT_EQ(r.max_position_embeddings, 131072);
  EXPECT_EQ(r.scaling.type, ScalingType::longrope);
  // Top-level original_max_position_embeddings (Phi-3 keeps it there) is used.
  EXPECT_EQ(r.scaling.original_max_position_embeddings, 4096);
  // No explicit factor: derived 131072 / 4096 = 32 (not stored, so an explicit one could win: G4).
  EXPECT_FALSE(r.scaling.factor.has_value());
  EXPECT_EQ(ropecheck::effective_factor(r), 32.0);
  ASSERT_EQ(r.scaling.short_factor.size(), 48u);
  ASSERT_EQ(r.scaling.long_factor.size(), 48u);
  for (std::size_t i = 0; i < 48; ++i) {
    EXPECT_EQ(r.scaling.short_factor[i], 1.0 + 0.03125 * static_cast<double>(i));
    EXPECT_EQ(r.scaling.long_factor[i], 1.5 + 0.5 * static_cast<double>(i));
  }
  // sqrt(1 + ln 32 / ln 4096) = sqrt(17/12)
  const double att = ropecheck::longrope_attention_factor<double>(r);
  EXPECT_NEAR(att, 1.1902380714, 1e-10);
  EXPECT_NEAR(att, std::sqrt(17.0 / 12.0), 1e-15);
}

TEST(HfConfig, Phi35Mini_TopLevelOriginalMaxPositionsTakesPriority) {
  // v5 standardisation copies Phi-3's top-level value into rope_parameters, overriding it (G4).
  json cfg = phi35_mini();
  cfg["rope_scaling"]["original_max_position_embeddings"] = 8192;
  const RopeSpec r = import(cfg);
  EXPECT_EQ(r.scaling.original_max_position_embeddings, 4096);
  EXPECT_EQ(ropecheck::effective_factor(r), 32.0);
}

TEST(HfConfig, Phi35Mini_OriginalMaxPositionsInsideRopeScaling) {
  json cfg = phi35_mini();
  cfg.erase("original_max_position_embeddings");
  cfg["rope_scaling"]["original_max_position_embeddings"] = 8192;
  const RopeSpec r = import(cfg);
  EXPECT_EQ(r.scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(ropecheck::effective_factor(r), 16.0);
}

TEST(HfConfig, Longrope_ExplicitFactorWins) {
  // G4: an explicit factor wins; G2/G3 replaced it with max_position_embeddings / original.
  json cfg = phi35_mini();
  cfg["rope_scaling"]["factor"] = 8.0;
  const RopeSpec r = import(cfg);
  EXPECT_EQ(r.scaling.factor, 8.0);
  EXPECT_EQ(ropecheck::effective_factor(r), 8.0);
  EXPECT_NEAR(ropecheck::longrope_attention_factor<double>(r), std::sqrt(1.0 + std::log(8.0) / std::log(4096.0)),
              1e-15);
}

// Phi-3.5-MoE (model_type "phimoe"): as Phi-3.5-mini but head_dim 4096 / 32 = 128 and
// rope_scaling.short_mscale = long_mscale = 1.243163121016122 (its config.json on the Hub), which HF
// PhimoeRotaryEmbedding and vLLM apply instead of the derived sqrt(17/12) = 1.1902 (4.4 % lower).
json phi35_moe() {
  json cfg = phi35_mini();
  cfg["model_type"] = "phimoe";
  cfg["architectures"] = {"PhiMoEForCausalLM"};
  cfg["hidden_size"] = 4096;
  cfg["num_key_value_heads"] = 8;
  std::vector<double> short_factor, long_factor;
  for (int i = 0; i < 64; ++i) {
    short_factor.push_back(1.0 + 0.015625 * i);
    long_factor.push_back(1.25 + 0.25 * i);
  }
  cfg["rope_scaling"]["short_factor"] = short_factor;
  cfg["rope_scaling"]["long_factor"] = long_factor;
  cfg["rope_scaling"]["short_mscale"] = 1.243163121016122;
  cfg["rope_scaling"]["long_mscale"] = 1.243163121016122;
  return cfg;
}

TEST(HfConfig, Phi35MoE_MscaleIsTheAttentionFactor) {
  const RopeSpec r = import(phi35_moe());
  EXPECT_EQ(r.head_dim, 128);
  EXPECT_EQ(r.scaling.type, ScalingType::longrope);
  EXPECT_EQ(r.scaling.short_mscale, 1.243163121016122);
  EXPECT_EQ(r.scaling.long_mscale, 1.243163121016122);
  // Not the derived sqrt(17/12) = 1.19024 that ropecheck used before.
  for (const std::optional<std::int64_t> seq : {std::optional<std::int64_t>{}, std::optional<std::int64_t>{4096},
                                                std::optional<std::int64_t>{4097}, std::optional<std::int64_t>{131072}})
    EXPECT_EQ(ropecheck::rope_frequencies<double>(r, seq).attention_factor, 1.243163121016122);
}

TEST(HfConfig, Phi35MoE_MscaleIsChosenBySeqLenLikeTheFactors) {
  json cfg = phi35_moe();
  cfg["rope_scaling"]["long_mscale"] = 1.5;
  cfg["rope_scaling"]["attention_factor"] = 1.1;  // the chosen mscale wins over it
  const RopeSpec r = import(cfg);
  const auto at = [&](std::optional<std::int64_t> seq) { return ropecheck::rope_frequencies<double>(r, seq); };
  EXPECT_EQ(at(std::nullopt).attention_factor, 1.243163121016122);  // short list, short mscale
  EXPECT_FALSE(at(4096).long_factors);
  EXPECT_EQ(at(4096).attention_factor, 1.243163121016122);
  EXPECT_TRUE(at(4097).long_factors);
  EXPECT_EQ(at(4097).attention_factor, 1.5);
  // Only one given: the other list falls back to attention_factor, then to the derived value.
  cfg["rope_scaling"].erase("long_mscale");
  EXPECT_EQ(ropecheck::rope_frequencies<double>(import(cfg), 8192).attention_factor, 1.1);
  cfg["rope_scaling"].erase("attention_factor");
  EXPECT_NEAR(ropecheck::rope_frequencies<double>(import(cfg), 8192).attention_factor, std::sqrt(17.0 / 12.0), 1e-15);
}

TEST(HfConfig, Phi35MoE_MscaleRoundTripsThroughSpecJson) {
  const EncodingSpec s = ropecheck::spec_from_hf_config(phi35_moe());
  const json j = ropecheck::spec_to_json(s);
  EXPECT_EQ(j["rope"]["scaling"]["short_mscale"], 1.243163121016122);
  EXPECT_EQ(j["rope"]["scaling"]["long_mscale"], 1.243163121016122);
  const EncodingSpec back = ropecheck::spec_from_json(j);
  EXPECT_EQ(back.rope.scaling.short_mscale, 1.243163121016122);
  EXPECT_EQ(back.rope.scaling.long_mscale, 1.243163121016122);
}

TEST(HfConfig, Phi35MoE_BadMscaleIsRejected) {
  json cfg = phi35_moe();
  cfg["rope_scaling"]["short_mscale"] = "1.24";
  EXPECT_TRUE(import_fails(cfg, {"rope_scaling.short_mscale", "must be a number"}));
  cfg["rope_scaling"]["short_mscale"] = 0;
  EXPECT_TRUE(import_fails(cfg, {"short_mscale", "must be > 0"}));
  // In a spec JSON, mscales belong to longrope only.
  json spec = ropecheck::spec_to_json(ropecheck::spec_from_hf_config(phi35_moe()));
  spec["rope"]["scaling"] = {{"type", "linear"}, {"factor", 2.0}, {"long_mscale", 1.2}};
  try {
    (void)ropecheck::spec_from_json(spec);
    ADD_FAILURE() << "long_mscale accepted for linear scaling";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("long_mscale"), std::string::npos) << e.what();
  }
}

TEST(HfConfig, Longrope_LegacySuTypeAndMissingList) {
  json cfg = phi35_mini();
  cfg["rope_scaling"]["type"] = "su";  // the original Phi-3 name
  EXPECT_EQ(import(cfg).scaling.type, ScalingType::longrope);
  cfg["rope_scaling"].erase("long_factor");
  EXPECT_TRUE(import_fails(cfg, {"rope_scaling.long_factor", "missing"}));
}

TEST(HfConfig, Longrope_MissingShortFactor) {
  json cfg = phi35_mini();
  cfg["rope_scaling"].erase("short_factor");
  EXPECT_TRUE(import_fails(cfg, {"rope_scaling.short_factor", "missing"}));
}

TEST(HfConfig, Longrope_WrongListLength) {
  json cfg = phi35_mini();
  cfg["rope_scaling"]["short_factor"] = std::vector<double>(47, 1.0);
  EXPECT_TRUE(import_fails(cfg, {"short_factor", "47", "48"}));
}

TEST(HfConfig, Phi2_PartialRotaryFactor) {
  const RopeSpec r = import(json::parse(R"({
    "architectures": ["PhiForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 50256,
    "embd_pdrop": 0.0,
    "eos_token_id": 50256,
    "hidden_act": "gelu_new",
    "hidden_size": 2560,
    "initializer_range": 0.02,
    "intermediate_size": 10240,
    "layer_norm_eps": 1e-05,
    "max_position_embeddings": 2048,
    "model_type": "phi",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "partial_rotary_factor": 0.4,
    "qk_layernorm": false,
    "resid_pdrop": 0.1,
    "rope_scaling": null,
    "rope_theta": 10000.0,
    "tie_word_embeddings": false,
    "torch_dtype": "float16",
    "transformers_version": "4.37.0",
    "use_cache": true,
    "vocab_size": 51200
  })"));
  EXPECT_EQ(r.head_dim, 80);    // 2560 / 32
  EXPECT_EQ(r.rotary_dim, 32);  // int(80 * 0.4)
  EXPECT_EQ(r.base, 10000.0);
  EXPECT_EQ(r.layout, RopeLayout::half_split);
  EXPECT_EQ(r.scaling.type, ScalingType::none);
  EXPECT_EQ(r.max_position_embeddings, 2048);
  EXPECT_EQ(ropecheck::rope_pairs(r), 16);
  EXPECT_EQ(ropecheck::rope_block_channels(r), 32);
}

// ---------------------------------------------------------------------------------------------
// GPT-NeoX, GPT-J

const char* kGptNeox20B = R"({
  "architectures": ["GPTNeoXForCausalLM"],
  "bos_token_id": 0,
  "eos_token_id": 0,
  "hidden_act": "gelu_fast",
  "hidden_size": 6144,
  "initializer_range": 0.02,
  "intermediate_size": 24576,
  "layer_norm_eps": 1e-05,
  "max_position_embeddings": 2048,
  "model_type": "gpt_neox",
  "num_attention_heads": 64,
  "num_hidden_layers": 44,
  "rotary_emb_base": 10000,
  "rotary_pct": 0.25,
  "tie_word_embeddings": false,
  "torch_dtype": "float16",
  "transformers_version": "4.21.0.dev0",
  "use_cache": true,
  "use_parallel_residual": true,
  "vocab_size": 50432
})";

TEST(HfConfig, GptNeox20B_RotaryPctAndRotaryEmbBase) {
  const RopeSpec r = import(json::parse(kGptNeox20B));
  EXPECT_EQ(r.head_dim, 96);    // 6144 / 64
  EXPECT_EQ(r.rotary_dim, 24);  // int(96 * 0.25)
  EXPECT_EQ(r.base, 10000.0);
  EXPECT_EQ(r.layout, RopeLayout::half_split);
  EXPECT_EQ(r.scaling.type, ScalingType::none);
  EXPECT_EQ(r.max_position_embeddings, 2048);
}

TEST(HfConfig, GptNeox_RotaryEmbBaseIsRead) {
  // 10000 above is also the default; a different value proves the key is read.
  json cfg = json::parse(kGptNeox20B);
  cfg["rotary_emb_base"] = 25000;
  EXPECT_EQ(import(cfg).base, 25000.0);
}

TEST(HfConfig, GptJ6B_InterleavedRotaryDim) {
  const RopeSpec r = import(json::parse(R"({
    "activation_function": "gelu_new",
    "architectures": ["GPTJForCausalLM"],
    "attn_pdrop": 0.0,
    "bos_token_id": 50256,
    "embd_pdrop": 0.0,
    "eos_token_id": 50256,
    "gradient_checkpointing": false,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05,
    "model_type": "gptj",
    "n_embd": 4096,
    "n_head": 16,
    "n_inner": null,
    "n_layer": 28,
    "n_positions": 2048,
    "resid_pdrop": 0.0,
    "rotary": true,
    "rotary_dim": 64,
    "scale_attn_weights": true,
    "tie_word_embeddings": false,
    "transformers_version": "4.18.0.dev0",
    "use_cache": true,
    "vocab_size": 50400
  })"));
  EXPECT_EQ(r.head_dim, 256);  // n_embd 4096 / n_head 16
  EXPECT_EQ(r.rotary_dim, 64);
  EXPECT_EQ(r.base, 10000.0);  // hard-coded in GPT-J
  EXPECT_EQ(r.layout, RopeLayout::interleaved);
  EXPECT_EQ(r.scaling.type, ScalingType::none);
  EXPECT_EQ(r.max_position_embeddings, 2048);  // n_positions
}

// ---------------------------------------------------------------------------------------------
// Qwen multimodal

TEST(HfConfig, Qwen2VL_ChunkedMrope) {
  const RopeSpec r = import(json::parse(R"({
    "architectures": ["Qwen2VLForConditionalGeneration"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "vision_start_token_id": 151652,
    "vision_end_token_id": 151653,
    "vision_token_id": 151654,
    "image_token_id": 151655,
    "video_token_id": 151656,
    "hidden_act": "silu",
    "hidden_size": 3584,
    "initializer_range": 0.02,
    "intermediate_size": 18944,
    "max_position_embeddings": 32768,
    "max_window_layers": 28,
    "model_type": "qwen2_vl",
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "sliding_window": 32768,
    "tie_word_embeddings": false,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.41.2",
    "use_cache": true,
    "use_sliding_window": false,
    "vision_config": {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "in_chans": 3,
                      "hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14,
                      "temporal_patch_size": 2},
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "vocab_size": 152064
  })"));
  EXPECT_EQ(r.head_dim, 128);  // 3584 / 28
  EXPECT_EQ(r.rotary_dim, 128);
  EXPECT_EQ(r.base, 1000000.0);
  EXPECT_EQ(r.layout, RopeLayout::half_split);
  EXPECT_EQ(r.scaling.type, ScalingType::none);  // "mrope" does not change the frequencies
  EXPECT_FALSE(r.scaling.factor.has_value());
  EXPECT_EQ(r.mrope, MropeMode::chunked);
  EXPECT_EQ(r.mrope_section, (std::array<int, 3>{16, 24, 24}));
  EXPECT_EQ(r.max_position_embeddings, 32768);
  EXPECT_EQ(ropecheck::mrope_stream(r, 15), 0);
  EXPECT_EQ(ropecheck::mrope_stream(r, 16), 1);
  EXPECT_EQ(ropecheck::mrope_stream(r, 40), 2);
}

TEST(HfConfig, Qwen3VL_InterleavedMrope) {
  // The text part of Qwen3-VL-8B (the Hub file nests it under "text_config").
  const RopeSpec r = import(json::parse(R"({
    "attention_bias": false,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "dtype": "bfloat16",
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 12288,
    "max_position_embeddings": 262144,
    "model_type": "qwen3_vl_text",
    "num_attention_heads": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": {"mrope_interleaved": true, "mrope_section": [24, 20, 20], "rope_type": "default"},
    "rope_theta": 5000000,
    "use_cache": true,
    "vocab_size": 151936
  })"));
  EXPECT_EQ(r.head_dim, 128);
  EXPECT_EQ(r.rotary_dim, 128);
  EXPECT_EQ(r.base, 5000000.0);
  EXPECT_EQ(r.layout, RopeLayout::half_split);
  EXPECT_EQ(r.scaling.type, ScalingType::none);
  EXPECT_EQ(r.mrope, MropeMode::interleaved);
  EXPECT_EQ(r.mrope_section, (std::array<int, 3>{24, 20, 20}));
  EXPECT_EQ(r.max_position_embeddings, 262144);
  EXPECT_EQ(ropecheck::mrope_stream(r, 1), 1);
  EXPECT_EQ(ropecheck::mrope_stream(r, 2), 2);
  EXPECT_EQ(ropecheck::mrope_stream(r, 61), 0);
}

TEST(HfConfig, Mrope_SectionsMustSumToPairCount) {
  const json cfg = json::parse(R"({
    "model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28, "rope_theta": 1000000.0,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 16]}
  })");
  EXPECT_TRUE(import_fails(cfg, {"mrope.section", "[16, 24, 16]", "64"}));
}

// ---------------------------------------------------------------------------------------------
// YaRN: DeepSeek-V3, gpt-oss, the Qwen recipe

TEST(HfConfig, DeepSeekV3_YarnMscaleInterleaved) {
  // head_dim as transformers saves it (DeepseekV3Config sets head_dim = qk_rope_head_dim).
  // G4/G2+: config.head_dim wins; G1 would have used hidden_size // heads = 7168 / 128 = 56.
  const RopeSpec r = import(json::parse(R"({
    "architectures": ["DeepseekV3ForCausalLM"],
    "attention_bias": false,
    "attention_dropout": 0.0,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "first_k_dense_replace": 3,
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048,
    "n_group": 8,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_attention_heads": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-06,
    "rope_scaling": {
      "beta_fast": 32,
      "beta_slow": 1,
      "factor": 40,
      "mscale": 1.0,
      "mscale_all_dim": 1.0,
      "original_max_position_embeddings": 4096,
      "type": "yarn"
    },
    "rope_theta": 10000,
    "v_head_dim": 128,
    "vocab_size": 129280
  })"));
  EXPECT_EQ(r.head_dim, 64);
  EXPECT_EQ(r.rotary_dim, 64);
  EXPECT_EQ(r.base, 10000.0);
  EXPECT_EQ(r.layout, RopeLayout::interleaved);  // rope_interleave
  EXPECT_EQ(r.max_position_embeddings, 163840);
  EXPECT_EQ(r.scaling.type, ScalingType::yarn);
  EXPECT_EQ(r.scaling.factor, 40.0);
  EXPECT_EQ(r.scaling.original_max_position_embeddings, 4096);
  EXPECT_EQ(r.scaling.beta_fast, 32.0);
  EXPECT_EQ(r.scaling.beta_slow, 1.0);
  EXPECT_EQ(r.scaling.mscale, 1.0);
  EXPECT_EQ(r.scaling.mscale_all_dim, 1.0);
  EXPECT_TRUE(r.scaling.truncate);
  EXPECT_FALSE(r.scaling.attention_factor.has_value());
  // get_mscale(40, 1) / get_mscale(40, 1) = 1
  EXPECT_EQ(ropecheck::yarn_attention_factor<double>(r), 1.0);
}

TEST(HfConfig, DeepSeekV2_MscaleValuesAreKept) {
  const RopeSpec r = import(json::parse(R"({
    "model_type": "deepseek_v2", "head_dim": 64, "hidden_size": 5120, "num_attention_heads": 128,
    "max_position_embeddings": 163840, "rope_theta": 10000,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707, "mscale_all_dim": 0.707,
                     "original_max_position_embeddings": 4096, "type": "yarn"}
  })"));
  EXPECT_EQ(r.layout, RopeLayout::interleaved);
  EXPECT_EQ(r.scaling.mscale, 0.707);
  EXPECT_EQ(r.scaling.mscale_all_dim, 0.707);
}

TEST(HfConfig, GptOss_YarnTruncateFalse) {
  const RopeSpec r = import(json::parse(R"({
    "architectures": ["GptOssForCausalLM"],
    "attention_bias": true,
    "attention_dropout": 0.0,
    "eos_token_id": 200002,
    "experts_per_token": 4,
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 2880,
    "initial_context_length": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"],
    "max_position_embeddings": 131072,
    "model_type": "gpt_oss",
    "num_attention_heads": 64,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 24,
    "num_key_value_heads": 8,
    "num_local_experts": 32,
    "pad_token_id": 199999,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
      "beta_fast": 32.0,
      "beta_slow": 1.0,
      "factor": 32.0,
      "original_max_position_embeddings": 4096,
      "rope_type": "yarn",
      "truncate": false
    },
    "rope_theta": 150000,
    "sliding_window": 128,
    "swiglu_limit": 7.0,
    "tie_word_embeddings": false,
    "transformers_version": "4.55.0.dev0",
    "use_cache": true,
    "vocab_size": 201088
  })"));
  EXPECT_EQ(r.head_dim, 64);  // explicit (hidden_size / heads would be 45)
  EXPECT_EQ(r.rotary_dim, 64);
  EXPECT_EQ(r.base, 150000.0);
  EXPECT_EQ(r.layout, RopeLayout::half_split);
  EXPECT_EQ(r.scaling.type, ScalingType::yarn);
  EXPECT_EQ(r.scaling.factor, 32.0);
  EXPECT_EQ(r.scaling.original_max_position_embeddings, 4096);
  EXPECT_FALSE(r.scaling.truncate);
  EXPECT_FALSE(r.scaling.mscale.has_value());
  EXPECT_NEAR(ropecheck::yarn_attention_factor<double>(r), 0.1 * std::log(32.0) + 1.0, 1e-15);  // 1.346574
}

TEST(HfConfig, Yarn_ExplicitFactorWinsOverMaxPositionsRatio) {
  // Qwen2.5 long-context recipe on a config whose max_position_embeddings is still 32768.
  // G4: explicit factor 4 wins; G3 replaced it with 32768 / 32768 = 1 (transformers#38224).
  const RopeSpec r = import(json::parse(R"({
    "model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28, "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}
  })"));
  EXPECT_EQ(r.scaling.type, ScalingType::yarn);
  EXPECT_EQ(r.scaling.factor, 4.0);
  EXPECT_EQ(ropecheck::effective_factor(r), 4.0);
  EXPECT_EQ(r.scaling.original_max_position_embeddings, 32768);
}

TEST(HfConfig, Yarn_OriginalDefaultsToMaxPositions) {
  // G4 standardisation fills original_max_position_embeddings from max_position_embeddings.
  const RopeSpec r = import(json::parse(R"({
    "model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28, "max_position_embeddings": 32768,
    "rope_theta": 1000000.0, "rope_scaling": {"factor": 4.0, "type": "yarn"}
  })"));
  EXPECT_EQ(r.scaling.original_max_position_embeddings, 32768);
  EXPECT_EQ(r.scaling.factor, 4.0);
}

TEST(HfConfig, Yarn_BetaZeroMeansDefault) {
  // transformers reads `get("beta_fast") or 32`: a stored 0 is the default.
  const RopeSpec r = import(json::parse(R"({
    "model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28, "max_position_embeddings": 131072,
    "rope_theta": 1000000.0,
    "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
                     "beta_fast": 0, "beta_slow": 0}
  })"));
  EXPECT_EQ(r.scaling.beta_fast, 32.0);
  EXPECT_EQ(r.scaling.beta_slow, 1.0);
}

TEST(HfConfig, Yarn_NonDefaultBetasAndAttentionFactorAreRead) {
  const RopeSpec r = import(json::parse(R"({
    "model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28, "max_position_embeddings": 131072,
    "rope_theta": 1000000.0,
    "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
                     "beta_fast": 16, "beta_slow": 2, "attention_factor": 1.25}
  })"));
  EXPECT_EQ(r.scaling.beta_fast, 16.0);
  EXPECT_EQ(r.scaling.beta_slow, 2.0);
  EXPECT_EQ(r.scaling.attention_factor, 1.25);
  EXPECT_EQ(ropecheck::yarn_attention_factor<double>(r), 1.25);
}

// ---------------------------------------------------------------------------------------------
// transformers v5 rope_parameters

TEST(HfConfig, V5RopeParameters_ThetaInside) {
  const RopeSpec r = import(json::parse(R"({
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "max_position_embeddings": 131072,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "rope_parameters": {
      "factor": 8.0,
      "high_freq_factor": 4.0,
      "low_freq_factor": 1.0,
      "original_max_position_embeddings": 8192,
      "rope_theta": 500000.0,
      "rope_type": "llama3"
    },
    "transformers_version": "5.0.0"
  })"));
  EXPECT_EQ(r.base, 500000.0);
  EXPECT_EQ(r.head_dim, 128);
  EXPECT_EQ(r.scaling.type, ScalingType::llama3);
  EXPECT_EQ(r.scaling.factor, 8.0);
  EXPECT_EQ(r.scaling.original_max_position_embeddings, 8192);
}

TEST(HfConfig, V5RopeParameters_PartialRotaryFactorInside) {
  // v5 reads partial_rotary_factor from rope_parameters.
  const RopeSpec r = import(json::parse(R"({
    "model_type": "phi", "hidden_size": 2560, "num_attention_heads": 32, "max_position_embeddings": 2048,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}
  })"));
  EXPECT_EQ(r.head_dim, 80);
  EXPECT_EQ(r.rotary_dim, 40);
  EXPECT_EQ(r.scaling.type, ScalingType::none);
}

json gemma3_v5() {
  return json::parse(R"({
    "architectures": ["Gemma3ForCausalLM"],
    "head_dim": 256,
    "hidden_size": 2560,
    "max_position_embeddings": 131072,
    "model_type": "gemma3_text",
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "query_pre_attn_scalar": 256,
    "rope_parameters": {
      "full_attention": {"factor": 8.0, "rope_theta": 1000000.0, "rope_type": "linear"},
      "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}
    },
    "sliding_window": 1024,
    "transformers_version": "5.0.0"
  })");
}

TEST(HfConfig, Gemma3V5_NestedFullAttentionIsTheDefault) {
  const RopeSpec r = import(gemma3_v5());
  EXPECT_EQ(r.head_dim, 256);
  EXPECT_EQ(r.rotary_dim, 256);
  EXPECT_EQ(r.base, 1000000.0);
  EXPECT_EQ(r.layout, RopeLayout::half_split);
  EXPECT_EQ(r.scaling.type, ScalingType::linear);
  EXPECT_EQ(r.scaling.factor, 8.0);
}

TEST(HfConfig, Gemma3V5_NestedFullAttentionExplicit) {
  HfImportOptions opt;
  opt.layer_type = "full_attention";
  const RopeSpec r = import(gemma3_v5(), opt);
  EXPECT_EQ(r.base, 1000000.0);
  EXPECT_EQ(r.scaling.type, ScalingType::linear);
  EXPECT_EQ(r.scaling.factor, 8.0);
}

TEST(HfConfig, Gemma3V5_NestedSlidingAttention) {
  HfImportOptions opt;
  opt.layer_type = "sliding_attention";
  const RopeSpec r = import(gemma3_v5(), opt);
  EXPECT_EQ(r.head_dim, 256);
  EXPECT_EQ(r.base, 10000.0);
  EXPECT_EQ(r.scaling.type, ScalingType::none);
  EXPECT_FALSE(r.scaling.factor.has_value());
}

TEST(HfConfig, Gemma3V5_MissingLayerTypeNamesIt) {
  HfImportOptions opt;
  opt.layer_type = "chunked_attention";
  EXPECT_TRUE(import_fails(gemma3_v5(), {"rope_parameters", "chunked_attention"}, opt));
}

TEST(HfConfig, Proportional_Gemma4Like) {
  // Gemma 4 full-attention layers: p-RoPE over a 512-wide head, 1/4 of the pairs rotate.
  const RopeSpec r = import(json::parse(R"({
    "model_type": "gemma4_text",
    "head_dim": 512,
    "hidden_size": 5376,
    "num_attention_heads": 32,
    "max_position_embeddings": 131072,
    "rope_parameters": {
      "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
      "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}
    }
  })"));
  EXPECT_EQ(r.head_dim, 512);
  EXPECT_EQ(r.rotary_dim, 128);  // 2 * int(0.25 * 512 // 2)
  EXPECT_EQ(r.base, 1000000.0);
  EXPECT_EQ(r.layout, RopeLayout::half_split);
  EXPECT_EQ(r.scaling.type, ScalingType::proportional);
  EXPECT_FALSE(r.scaling.factor.has_value());
  EXPECT_EQ(ropecheck::effective_factor(r), 1.0);  // factor default 1
  EXPECT_EQ(ropecheck::rope_pairs(r), 256);         // pairs over the whole head
  EXPECT_EQ(ropecheck::rope_block_channels(r), 512);
}

TEST(HfConfig, Proportional_RopeAnglesRoundDown) {
  // rope_angles = int(0.25 * 20 // 2) = 2, so 4 channels (a prefix rule would give int(20 * 0.25) = 5).
  const RopeSpec r = import(json::parse(R"({
    "model_type": "gemma4_text", "head_dim": 20,
    "rope_parameters": {"rope_type": "proportional", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}
  })"));
  EXPECT_EQ(r.rotary_dim, 4);
  EXPECT_EQ(ropecheck::rope_pairs(r), 10);
}

TEST(HfConfig, Proportional_TopLevelPartialRotaryFactorAndFactor) {
  const RopeSpec r = import(json::parse(R"({
    "model_type": "gemma4_text", "head_dim": 512, "partial_rotary_factor": 0.25,
    "rope_parameters": {"rope_type": "proportional", "rope_theta": 1000000.0, "factor": 2.0}
  })"));
  EXPECT_EQ(r.rotary_dim, 128);
  EXPECT_EQ(r.scaling.factor, 2.0);
  EXPECT_EQ(ropecheck::effective_factor(r), 2.0);
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST(HfConfig, DynamicWithoutFactorNamesFactor) {
  const json cfg = json::parse(R"({
    "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 4096,
    "rope_theta": 10000.0, "rope_scaling": {"rope_type": "dynamic"}
  })");
  EXPECT_TRUE(import_fails(cfg, {"rope_scaling.factor", "dynamic"}));
}

TEST(HfConfig, DynamicWithFactor) {
  const RopeSpec r = import(json::parse(R"({
    "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 4096,
    "rope_theta": 10000.0, "rope_scaling": {"type": "dynamic", "factor": 2.0}
  })"));
  EXPECT_EQ(r.scaling.type, ScalingType::dynamic);
  EXPECT_EQ(r.scaling.factor, 2.0);
  EXPECT_EQ(r.max_position_embeddings, 4096);
}

TEST(HfConfig, LinearWithoutFactorNamesFactor) {
  json cfg = gemma3_v5();
  cfg["rope_parameters"]["full_attention"].erase("factor");
  EXPECT_TRUE(import_fails(cfg, {"rope_parameters.full_attention.factor", "linear"}));
}

TEST(HfConfig, Llama3WithoutLowFreqFactor) {
  json cfg = json::parse(kLlama31_8B);
  cfg["rope_scaling"].erase("low_freq_factor");
  EXPECT_TRUE(import_fails(cfg, {"rope_scaling.low_freq_factor", "missing"}));
}

TEST(HfConfig, UnknownRopeTypeNamesKeyAndValue) {
  json cfg = json::parse(kLlama31_8B);
  cfg["rope_scaling"] = {{"rope_type", "ntk-by-parts"}, {"factor", 2.0}};
  EXPECT_TRUE(import_fails(cfg, {"rope_scaling.rope_type", "ntk-by-parts"}));
}

TEST(HfConfig, UnknownLegacyTypeNamesValue) {
  json cfg = json::parse(kLlama31_8B);
  cfg["rope_scaling"] = {{"type", "xpos"}, {"factor", 2.0}};
  EXPECT_TRUE(import_fails(cfg, {"rope_scaling", "xpos"}));
}

TEST(HfConfig, MissingHeadDimAndHiddenSize) {
  const json cfg = json::parse(R"({"model_type": "llama", "num_attention_heads": 32, "rope_theta": 10000.0})");
  EXPECT_TRUE(import_fails(cfg, {"head_dim", "missing"}));
}

TEST(HfConfig, MissingHeads) {
  const json cfg = json::parse(R"({"model_type": "llama", "hidden_size": 4096, "rope_theta": 10000.0})");
  EXPECT_TRUE(import_fails(cfg, {"head_dim"}));
}

TEST(HfConfig, OddDerivedHeadDimIsRejected) {
  const json cfg = json::parse(R"({"model_type": "llama", "hidden_size": 4095, "num_attention_heads": 45})");
  EXPECT_TRUE(import_fails(cfg, {"rope.head_dim", "91"}));
}

TEST(HfConfig, StringWhereNumber) {
  json cfg = json::parse(kLlama31_8B);
  cfg["rope_theta"] = "500000";
  EXPECT_TRUE(import_fails(cfg, {"rope_theta", "number", "\"500000\""}));
}

TEST(HfConfig, BaseOneIsRejected) {
  json cfg = json::parse(kLlama31_8B);
  cfg["rope_theta"] = 1.0;
  EXPECT_TRUE(import_fails(cfg, {"rope.base", "1"}));
}

TEST(HfConfig, PartialRotaryFactorOutOfRange) {
  json cfg = json::parse(kGptNeox20B);
  cfg["rotary_pct"] = 1.5;
  EXPECT_TRUE(import_fails(cfg, {"partial_rotary_factor", "1.5"}));
}

TEST(HfConfig, NonObjectConfig) {
  EXPECT_TRUE(import_fails(json::array({1}), {"object"}));
}

// ---------------------------------------------------------------------------------------------
// Options

TEST(HfConfig, LayoutOverride) {
  HfImportOptions opt;
  opt.layout = RopeLayout::interleaved;  // e.g. Meta-format weights
  EXPECT_EQ(import(json::parse(kLlama31_8B), opt).layout, RopeLayout::interleaved);
  EXPECT_EQ(import(json::parse(kLlama31_8B)).layout, RopeLayout::half_split);

  json gptj = json::parse(R"({"model_type": "gptj", "n_embd": 4096, "n_head": 16, "rotary_dim": 64})");
  EXPECT_EQ(import(gptj).layout, RopeLayout::interleaved);
  opt.layout = RopeLayout::half_split;
  EXPECT_EQ(import(gptj, opt).layout, RopeLayout::half_split);
}

TEST(HfConfig, NameOption) {
  HfImportOptions opt;
  opt.name = "my-model";
  EXPECT_EQ(ropecheck::spec_from_hf_config(json::parse(kLlama31_8B), opt).name, "my-model");
  EXPECT_EQ(ropecheck::spec_from_hf_config(json::parse(kLlama31_8B)).name, "hf-config");
}

TEST(HfConfig, DefaultsWhenRopeKeysAbsent) {
  // No rope_theta, no rope_scaling: base 10000, no scaling, whole head rotated.
  const RopeSpec r = import(json::parse(R"({"model_type": "mistral", "hidden_size": 4096,
                                             "num_attention_heads": 32, "max_position_embeddings": 32768})"));
  EXPECT_EQ(r.base, 10000.0);
  EXPECT_EQ(r.scaling.type, ScalingType::none);
  EXPECT_EQ(r.rotary_dim, 128);
  EXPECT_EQ(r.mrope, MropeMode::none);
}

}  // namespace

// --- Fixes found by review (each test would have caught its bug) ---

namespace {

TEST(HfConfig, DeepSeekRawHubConfigUsesQkRopeHeadDim) {
  // The Hub file has no head_dim; hidden_size / heads = 56 would be silently wrong.
  const RopeSpec r = import(json::parse(R"({
    "model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
    "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "max_position_embeddings": 163840, "rope_theta": 10000,
    "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                     "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}})"));
  EXPECT_EQ(r.head_dim, 64);
  EXPECT_EQ(r.rotary_dim, 64);
  EXPECT_EQ(r.layout, RopeLayout::interleaved);
}

TEST(HfConfig, TextConfigIsUsedForMultimodalModels) {
  const RopeSpec r = import(json::parse(R"({
    "model_type": "qwen3_vl",
    "text_config": {"model_type": "qwen3_vl_text", "head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
                    "max_position_embeddings": 262144, "rope_theta": 5000000,
                    "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleaved": true}}})"));
  EXPECT_EQ(r.head_dim, 128);
  EXPECT_EQ(r.base, 5000000.0);
  EXPECT_EQ(r.mrope, MropeMode::interleaved);
  EXPECT_EQ(r.max_position_embeddings, 262144);
}

TEST(HfConfig, LegacyGemma3SlidingLayersUseLocalBase) {
  const json cfg = json::parse(R"({
    "model_type": "gemma3_text", "head_dim": 256, "hidden_size": 2560, "num_attention_heads": 8,
    "max_position_embeddings": 131072, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
    "rope_scaling": {"rope_type": "linear", "factor": 8.0}})");
  HfImportOptions sliding;
  sliding.layer_type = "sliding_attention";
  const RopeSpec local = import(cfg, sliding);
  EXPECT_EQ(local.base, 10000.0);
  EXPECT_EQ(local.scaling.type, ScalingType::none);
  const RopeSpec global = import(cfg);
  EXPECT_EQ(global.base, 1e6);
  EXPECT_EQ(global.scaling.type, ScalingType::linear);
  HfImportOptions other;
  other.layer_type = "chunked_attention";
  EXPECT_TRUE(import_fails(cfg, {"chunked_attention"}, other));
}

TEST(HfConfig, NonBooleanMropeInterleavedIsRejected) {
  EXPECT_TRUE(import_fails(json::parse(R"({"head_dim": 128, "rope_theta": 1e6,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24], "mrope_interleaved": "true"}})"),
                           {"mrope_interleaved", "\"true\""}));
}

TEST(HfConfig, UnknownLegacyTypeNamesTheKeyUsed) {
  EXPECT_TRUE(import_fails(json::parse(R"({"head_dim": 64, "rope_scaling": {"type": "weird"}})"),
                           {"rope_scaling.type", "weird"}));
}

TEST(SpecJsonFix, Llama3MissingFrequencyFactorSaysMissing) {
  const json j = json::parse(R"({"name": "x", "family": "rope", "rope": {"head_dim": 64, "base": 500000,
    "layout": "half_split", "scaling": {"type": "llama3", "factor": 8, "high_freq_factor": 4,
    "original_max_position_embeddings": 8192}}})");
  try {
    ropecheck::spec_from_json(j);
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("low_freq_factor"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Keys the importer does not use are reported, and integers never narrowed.

namespace {

std::vector<std::string> ignored_by(const json& cfg, HfImportOptions opt = {}) {
  std::vector<std::string> ignored;
  (void)ropecheck::spec_from_hf_config(cfg, opt, &ignored);
  return ignored;
}

bool names(const std::vector<std::string>& v, const std::string& key) {
  for (const std::string& s : v)
    if (s.find("'" + key + "'") != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(HfConfigIgnoredKeys, RealConfigsHaveNone) {
  EXPECT_TRUE(ignored_by(phi35_mini()).empty());
  EXPECT_TRUE(ignored_by(phi35_moe()).empty());
}

TEST(HfConfigIgnoredKeys, UnknownRopeSectionKeyIsNamedOnce) {
  json cfg = phi35_moe();
  cfg["rope_scaling"]["magic_mscale"] = 2.0;
  const std::vector<std::string> v = ignored_by(cfg);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].find("'rope_scaling.magic_mscale'"), std::string::npos) << v[0];
  EXPECT_NE(v[0].find("not understood"), std::string::npos) << v[0];
}

TEST(HfConfigIgnoredKeys, KeyOfAnotherRopeTypeIsNamed) {
  // Before the PhiMoE fix this is what short_mscale was: read by HF, silently dropped here.
  json cfg = phi35_mini();
  cfg["rope_scaling"]["low_freq_factor"] = 1.0;
  cfg["rope_scaling"]["mscale"] = 0.7;
  const std::vector<std::string> v = ignored_by(cfg);
  EXPECT_EQ(v.size(), 2u);
  EXPECT_TRUE(names(v, "rope_scaling.low_freq_factor"));
  EXPECT_TRUE(names(v, "rope_scaling.mscale"));
  for (const std::string& s : v) EXPECT_NE(s.find("not used by rope type \"longrope\""), std::string::npos) << s;
}

TEST(HfConfigIgnoredKeys, TopLevelRopeKeysAreNamed) {
  json cfg = phi35_mini();
  cfg["no_rope_layers"] = {1, 1, 0};
  cfg["rope_ratio"] = 2.0;
  cfg["num_local_experts"] = 16;  // not about RoPE: never named
  const std::vector<std::string> v = ignored_by(cfg);
  EXPECT_EQ(v.size(), 2u);
  EXPECT_TRUE(names(v, "no_rope_layers"));
  EXPECT_TRUE(names(v, "rope_ratio"));
}

TEST(HfConfigIgnoredKeys, RopeScalingBesideRopeParametersIsNamed) {
  json cfg = {{"head_dim", 64}, {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 500000.0}}},
              {"rope_scaling", {{"rope_type", "linear"}, {"factor", 4.0}}}};
  const std::vector<std::string> v = ignored_by(cfg);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].find("'rope_scaling': ignored, rope_parameters is used"), std::string::npos) << v[0];
}

TEST(HfConfigIgnoredKeys, OuterKeysBesideTextConfigAreNamed) {
  json cfg = {{"rope_theta", 1e6}, {"text_config", {{"head_dim", 64}, {"rope_theta", 10000.0}}}};
  const std::vector<std::string> v = ignored_by(cfg);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].find("'rope_theta': ignored, text_config is used"), std::string::npos) << v[0];
  EXPECT_TRUE(names(ignored_by({{"head_dim", 64}, {"text_config", {1, 2}}}), "text_config"));
}

TEST(HfConfigIgnoredKeys, TopLevelOriginalMaxPositionsOnlyForLongrope) {
  json cfg = {{"head_dim", 64}, {"original_max_position_embeddings", 4096}};
  EXPECT_TRUE(names(ignored_by(cfg), "original_max_position_embeddings"));
  EXPECT_TRUE(ignored_by(phi35_mini()).empty());  // used there
}

TEST(HfConfigIgnoredKeys, KeyNamesStayOnOneLine) {
  json cfg = phi35_mini();
  cfg["rope_scaling"]["evil\nkey\x1b[31m"] = 1;
  const std::vector<std::string> v = ignored_by(cfg);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].find("'rope_scaling.evil?key?[31m'"), std::string::npos) << v[0];
  HfImportOptions strict;
  strict.strict = true;
  EXPECT_TRUE(import_fails(cfg, {"evil?key"}, strict));  // import_fails also asserts one line
}

TEST(HfConfigIgnoredKeys, StrictMakesThemAnError) {
  json cfg = phi35_moe();
  cfg["rope_scaling"]["magic_mscale"] = 2.0;
  cfg["rope_ratio"] = 2.0;
  HfImportOptions strict;
  strict.strict = true;
  EXPECT_TRUE(import_fails(cfg, {"--strict", "'rope_ratio': not understood by ropecheck (and 1 more)"}, strict));
  EXPECT_NO_THROW((void)ropecheck::spec_from_hf_config(phi35_moe(), strict));
}

TEST(HfConfigIgnoredKeys, RopeInterleaveChoosesTheLayout) {
  json cfg = {{"model_type", "deepseek_v3"}, {"qk_rope_head_dim", 64}};
  EXPECT_EQ(import(cfg).layout, RopeLayout::interleaved);
  cfg["rope_interleave"] = false;
  EXPECT_EQ(import(cfg).layout, RopeLayout::half_split);
  EXPECT_TRUE(ignored_by(cfg).empty());
  cfg["rope_interleave"] = "yes";
  EXPECT_TRUE(import_fails(cfg, {"rope_interleave", "true or false"}));
}

TEST(HfConfigIntegers, RotaryDimBeyondIntIsRejectedNotTruncated) {
  // reliability-2 defect 9: 2^32 + 64 was read as 64.
  json cfg = {{"model_type", "gptj"}, {"n_embd", 4096}, {"n_head", 16}, {"rotary_dim", 4294967360.0}};
  EXPECT_TRUE(import_fails(cfg, {"'rotary_dim'", "out of range", "4294967360"}));
  cfg["rotary_dim"] = 64;
  EXPECT_EQ(import(cfg).rotary_dim, 64);
}

TEST(HfConfigIntegers, MropeSectionBeyondIntIsRejectedNotTruncated) {
  // reliability-2 defect 9: [2^32 + 16, 24, 24] was read as [16, 24, 24].
  json cfg = {{"head_dim", 128},
              {"rope_scaling", {{"type", "mrope"}, {"mrope_section", {4294967312.0, 24, 24}}}}};
  EXPECT_TRUE(import_fails(cfg, {"mrope_section[0]", "out of range", "4294967312"}));
}

TEST(HfConfigIntegers, HugeHeadDimSaysTheRange) {
  EXPECT_TRUE(import_fails({{"head_dim", 1048578}}, {"'head_dim'", "[1, 2^20]", "1048578"}));
}
