// Tests for the spec model (core/spec.hpp) and the spec JSON format (spec_json.hpp,
// core/SPEC_FORMAT.md): validation errors name the key and the value, every preset
// resolves and round-trips through JSON, and the small derived quantities (pair counts,
// effective factor, MRoPE stream selection, sinusoidal frequency count) follow the rules in
// variants.md sections 1 and 3.5. Expected values are written out by hand from those rules.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/reference/presets.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/core/spec_json.hpp"

namespace {

using nlohmann::json;
using ropecheck::EncodingSpec;
using ropecheck::Family;
using ropecheck::MropeMode;
using ropecheck::RopeLayout;
using ropecheck::RopeSpec;
using ropecheck::ScalingType;
using ropecheck::SinusoidalFrequencies;
using ropecheck::SinusoidalSpec;
using ropecheck::SpecError;

// A minimal valid rope spec; each test breaks one thing.
json valid_rope() {
  return json::parse(R"({
    "name": "t",
    "family": "rope",
    "rope": {"head_dim": 64, "base": 10000.0, "layout": "half_split"}
  })");
}

json valid_sinusoidal() {
  return json::parse(R"({
    "name": "s",
    "family": "sinusoidal",
    "sinusoidal": {"d_model": 512, "layout": "interleaved", "frequencies": "vaswani"}
  })");
}

// Runs f, which must throw SpecError whose message contains every needle.
template <class F>
::testing::AssertionResult throws_spec_error(F&& f, std::initializer_list<std::string> needles) {
  try {
    f();
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
  } catch (...) {
    return ::testing::AssertionFailure() << "threw a non-std exception";
  }
  return ::testing::AssertionFailure() << "no SpecError thrown";
}

::testing::AssertionResult rejects(const json& j, std::initializer_list<std::string> needles) {
  return throws_spec_error([&] { (void)ropecheck::spec_from_json(j); }, needles);
}

// Field-by-field equality of two specs (independent of spec_to_json, so that a field the JSON
// writer drops is caught by the round-trip tests).
void expect_same_spec(const EncodingSpec& a, const EncodingSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.family, b.family);
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.notes, b.notes);
  if (a.family == Family::rope) {
    const RopeSpec& x = a.rope;
    const RopeSpec& y = b.rope;
    EXPECT_EQ(x.head_dim, y.head_dim);
    EXPECT_EQ(x.rotary_dim, y.rotary_dim);
    EXPECT_EQ(x.rotary_offset, y.rotary_offset);
    EXPECT_EQ(x.key_layout, y.key_layout);
    EXPECT_EQ(x.base, y.base);
    EXPECT_EQ(x.layout, y.layout);
    EXPECT_EQ(x.max_position_embeddings, y.max_position_embeddings);
    EXPECT_EQ(x.mrope, y.mrope);
    EXPECT_EQ(x.mrope_section, y.mrope_section);
    const auto& s = x.scaling;
    const auto& t = y.scaling;
    EXPECT_EQ(s.type, t.type);
    EXPECT_EQ(s.factor, t.factor);
    EXPECT_EQ(s.original_max_position_embeddings, t.original_max_position_embeddings);
    EXPECT_EQ(s.attention_factor, t.attention_factor);
    EXPECT_EQ(s.beta_fast, t.beta_fast);
    EXPECT_EQ(s.beta_slow, t.beta_slow);
    EXPECT_EQ(s.mscale, t.mscale);
    EXPECT_EQ(s.mscale_all_dim, t.mscale_all_dim);
    EXPECT_EQ(s.truncate, t.truncate);
    EXPECT_EQ(s.low_freq_factor, t.low_freq_factor);
    EXPECT_EQ(s.high_freq_factor, t.high_freq_factor);
    EXPECT_EQ(s.short_factor, t.short_factor);
    EXPECT_EQ(s.long_factor, t.long_factor);
  } else {
    const SinusoidalSpec& x = a.sinusoidal;
    const SinusoidalSpec& y = b.sinusoidal;
    EXPECT_EQ(x.d_model, y.d_model);
    EXPECT_EQ(x.base, y.base);
    EXPECT_EQ(x.layout, y.layout);
    EXPECT_EQ(x.frequencies, y.frequencies);
    EXPECT_EQ(x.position_offset, y.position_offset);
  }
}

// ---------------------------------------------------------------------------------------------
// Sanity: the base documents are valid, so every rejection below is caused by the one change.

TEST(SpecJson, BaseDocumentsAreValid) {
  const EncodingSpec r = ropecheck::spec_from_json(valid_rope());
  EXPECT_EQ(r.name, "t");
  EXPECT_EQ(r.family, Family::rope);
  EXPECT_EQ(r.rope.head_dim, 64);
  EXPECT_EQ(r.rope.rotary_dim, 64);  // defaults to head_dim
  EXPECT_EQ(r.rope.base, 10000.0);
  EXPECT_EQ(r.rope.layout, RopeLayout::half_split);
  EXPECT_EQ(r.rope.max_position_embeddings, 0);
  EXPECT_EQ(r.rope.scaling.type, ScalingType::none);
  EXPECT_EQ(r.rope.mrope, MropeMode::none);

  const EncodingSpec s = ropecheck::spec_from_json(valid_sinusoidal());
  EXPECT_EQ(s.family, Family::sinusoidal);
  EXPECT_EQ(s.sinusoidal.d_model, 512);
  EXPECT_EQ(s.sinusoidal.base, 10000.0);
  EXPECT_EQ(s.sinusoidal.position_offset, 0);
}

// ---------------------------------------------------------------------------------------------
// Validation errors: each names the key and the value.

TEST(SpecValidation, OddHeadDim) {
  json j = valid_rope();
  j["rope"]["head_dim"] = 63;
  EXPECT_TRUE(rejects(j, {"rope.head_dim", "63"}));
}

TEST(SpecValidation, OddHeadDimWithEvenRotaryDim) {
  json j = valid_rope();
  j["rope"]["head_dim"] = 65;
  j["rope"]["rotary_dim"] = 32;
  EXPECT_TRUE(rejects(j, {"rope.head_dim", "65"}));
}

TEST(SpecValidation, ZeroHeadDim) {
  json j = valid_rope();
  j["rope"]["head_dim"] = 0;
  EXPECT_TRUE(rejects(j, {"rope.head_dim", "0"}));
}

TEST(SpecValidation, NegativeHeadDim) {
  json j = valid_rope();
  j["rope"]["head_dim"] = -64;
  EXPECT_TRUE(rejects(j, {"rope.head_dim", "-64"}));
}

TEST(SpecValidation, RotaryDimGreaterThanHeadDim) {
  json j = valid_rope();
  j["rope"]["rotary_dim"] = 128;
  EXPECT_TRUE(rejects(j, {"rope.rotary_dim", "128", "64"}));
}

TEST(SpecValidation, OddRotaryDim) {
  json j = valid_rope();
  j["rope"]["rotary_dim"] = 31;
  EXPECT_TRUE(rejects(j, {"rope.rotary_dim", "31"}));
}

TEST(SpecValidation, ZeroRotaryDim) {
  json j = valid_rope();
  j["rope"]["rotary_dim"] = 0;
  EXPECT_TRUE(rejects(j, {"rope.rotary_dim", "0"}));
}

TEST(SpecValidation, BaseEqualToOne) {
  json j = valid_rope();
  j["rope"]["base"] = 1.0;
  EXPECT_TRUE(rejects(j, {"rope.base", "1", "> 1"}));
}

TEST(SpecValidation, BaseBelowOne) {
  json j = valid_rope();
  j["rope"]["base"] = 0.5;
  EXPECT_TRUE(rejects(j, {"rope.base", "0.5"}));
}

TEST(SpecValidation, SinusoidalBaseBelowOne) {
  json j = valid_sinusoidal();
  j["sinusoidal"]["base"] = 0.5;
  EXPECT_TRUE(rejects(j, {"sinusoidal.base", "0.5"}));
}

TEST(SpecValidation, NonFiniteBaseViaValidate) {
  // JSON cannot hold NaN; the struct can.
  EncodingSpec spec = ropecheck::spec_from_json(valid_rope());
  spec.rope.base = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(throws_spec_error([&] { ropecheck::validate(spec); }, {"rope.base", "nan"}));
  spec.rope.base = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(throws_spec_error([&] { ropecheck::validate(spec); }, {"rope.base", "inf"}));

  EncodingSpec sin = ropecheck::spec_from_json(valid_sinusoidal());
  sin.sinusoidal.base = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(throws_spec_error([&] { ropecheck::validate(sin); }, {"sinusoidal.base", "nan"}));
}

TEST(SpecValidation, NonFiniteBaseViaHugeLiteral) {
  // nlohmann refuses a literal out of binary64 range (1e999) instead of parsing it to +inf ...
  const std::string text = R"({"name": "t", "family": "rope",
                               "rope": {"head_dim": 64, "base": 1e999, "layout": "half_split"}})";
  json parsed;
  EXPECT_THROW(parsed = json::parse(text), json::out_of_range);
  // ... but a json value built in C++ can hold inf, and must not be accepted.
  json j = valid_rope();
  j["rope"]["base"] = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(rejects(j, {"rope.base", "finite"}));
  j = valid_rope();
  j["rope"]["scaling"] = {{"type", "linear"}, {"factor", std::numeric_limits<double>::infinity()}};
  EXPECT_TRUE(rejects(j, {"rope.scaling.factor", "finite"}));
}

TEST(SpecFile, HugeLiteralInFileIsAOneLineSpecErrorNamingTheFile) {
  const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("ropecheck_test_huge_" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream out(p);
    out << R"({"name": "t", "family": "rope", "rope": {"head_dim": 64, "base": 1e999, "layout": "half_split"}})";
  }
  const auto r = throws_spec_error([&] { (void)ropecheck::load_spec_file(p); }, {p.string(), "1e999"});
  std::filesystem::remove(p);
  EXPECT_TRUE(r);
}

TEST(SpecFile, MissingAndMalformedFiles) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::filesystem::path missing = dir / "ropecheck_test_does_not_exist.json";
  EXPECT_TRUE(throws_spec_error([&] { (void)ropecheck::load_spec_file(missing); }, {missing.string()}));
  const std::filesystem::path p = dir / ("ropecheck_test_trunc_" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream out(p);
    out << R"({"name": "t", "family": "rope", "rope": {"head_dim": 64)";
  }
  const auto r = throws_spec_error([&] { (void)ropecheck::load_spec_file(p); }, {p.string(), "malformed JSON"});
  std::filesystem::remove(p);
  EXPECT_TRUE(r);
}

TEST(SpecValidation, FactorZero) {
  json j = valid_rope();
  j["rope"]["scaling"] = {{"type", "linear"}, {"factor", 0.0}};
  EXPECT_TRUE(rejects(j, {"rope.scaling.factor", "0", "> 0"}));
}

TEST(SpecValidation, FactorNegative) {
  json j = valid_rope();
  j["rope"]["scaling"] = {{"type", "linear"}, {"factor", -2.0}};
  EXPECT_TRUE(rejects(j, {"rope.scaling.factor", "-2"}));
}

TEST(SpecValidation, LinearFactorMissing) {
  json j = valid_rope();
  j["rope"]["scaling"] = {{"type", "linear"}};
  EXPECT_TRUE(rejects(j, {"rope.scaling.factor", "missing", "linear"}));
}

TEST(SpecValidation, DynamicNeedsMaxPositionEmbeddings) {
  json j = valid_rope();
  j["rope"]["scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
  EXPECT_TRUE(rejects(j, {"rope.max_position_embeddings", "0"}));
}

json longrope_spec(std::size_t short_len, std::size_t long_len) {
  json j = valid_rope();  // head_dim 64 -> 32 pairs
  j["rope"]["max_position_embeddings"] = 131072;
  j["rope"]["scaling"] = {{"type", "longrope"},
                          {"original_max_position_embeddings", 4096},
                          {"short_factor", std::vector<double>(short_len, 1.0)},
                          {"long_factor", std::vector<double>(long_len, 2.0)}};
  return j;
}

TEST(SpecValidation, LongropeListsOfTheRightLengthAreAccepted) {
  const EncodingSpec s = ropecheck::spec_from_json(longrope_spec(32, 32));
  EXPECT_EQ(s.rope.scaling.short_factor.size(), 32u);
  EXPECT_EQ(s.rope.scaling.long_factor.size(), 32u);
}

TEST(SpecValidation, LongropeShortListWrongLength) {
  EXPECT_TRUE(rejects(longrope_spec(31, 32), {"rope.scaling.short_factor", "31", "32"}));
}

TEST(SpecValidation, LongropeLongListWrongLength) {
  EXPECT_TRUE(rejects(longrope_spec(32, 48), {"rope.scaling.long_factor", "48", "32"}));
}

TEST(SpecValidation, LongropeNonPositiveEntry) {
  json j = longrope_spec(32, 32);
  j["rope"]["scaling"]["long_factor"][5] = 0.0;
  EXPECT_TRUE(rejects(j, {"rope.scaling.long_factor[5]", "0"}));
}

TEST(SpecValidation, MropeSectionsWrongSum) {
  json j = valid_rope();
  j["rope"]["head_dim"] = 128;  // 64 pairs
  j["rope"]["mrope"] = {{"section", {16, 24, 23}}};
  EXPECT_TRUE(rejects(j, {"rope.mrope.section", "[16, 24, 23]", "64", "63"}));
}

TEST(SpecValidation, MropeSectionsRightSumAccepted) {
  json j = valid_rope();
  j["rope"]["head_dim"] = 128;
  j["rope"]["mrope"] = {{"section", {16, 24, 24}}};
  const EncodingSpec s = ropecheck::spec_from_json(j);
  EXPECT_EQ(s.rope.mrope, MropeMode::chunked);
  EXPECT_EQ(s.rope.mrope_section, (std::array<int, 3>{16, 24, 24}));
}

TEST(SpecValidation, MropeSectionNotThreeEntries) {
  json j = valid_rope();
  j["rope"]["mrope"] = {{"section", {16, 16}}};
  EXPECT_TRUE(rejects(j, {"rope.mrope.section", "[16,16]"}));
}

TEST(SpecValidation, UnknownRopeType) {
  json j = valid_rope();
  j["rope"]["scaling"] = {{"type", "ntk-by-parts"}, {"factor", 2.0}};
  EXPECT_TRUE(rejects(j, {"rope.scaling.type", "ntk-by-parts"}));
}

TEST(SpecValidation, UnknownLayout) {
  json j = valid_rope();
  j["rope"]["layout"] = "rotate_half";
  EXPECT_TRUE(rejects(j, {"rope.layout", "rotate_half"}));
}

TEST(SpecValidation, UnknownFamily) {
  json j = valid_rope();
  j["family"] = "alibi";
  EXPECT_TRUE(rejects(j, {"family", "alibi"}));
}

// Missing required keys: the message names the key and says it is missing.

TEST(SpecValidation, MissingHeadDim) {
  json j = valid_rope();
  j["rope"].erase("head_dim");
  EXPECT_TRUE(rejects(j, {"rope.head_dim", "missing"}));
}

TEST(SpecValidation, MissingBase) {
  json j = valid_rope();
  j["rope"].erase("base");
  EXPECT_TRUE(rejects(j, {"rope.base", "missing"}));
}

TEST(SpecValidation, MissingLayout) {
  json j = valid_rope();
  j["rope"].erase("layout");
  EXPECT_TRUE(rejects(j, {"rope.layout", "missing"}));
}

TEST(SpecValidation, MissingFamily) {
  json j = valid_rope();
  j.erase("family");
  EXPECT_TRUE(rejects(j, {"family", "missing"}));
}

TEST(SpecValidation, MissingName) {
  json j = valid_rope();
  j.erase("name");
  EXPECT_TRUE(rejects(j, {"name", "missing"}));
}

TEST(SpecValidation, MissingRopeObject) {
  json j = valid_rope();
  j.erase("rope");
  EXPECT_TRUE(rejects(j, {"rope", "missing"}));
}

TEST(SpecValidation, MissingScalingType) {
  json j = valid_rope();
  j["rope"]["scaling"] = {{"factor", 2.0}};
  EXPECT_TRUE(rejects(j, {"rope.scaling.type", "missing"}));
}

TEST(SpecValidation, NullRequiredKeyCountsAsMissing) {
  json j = valid_rope();
  j["rope"]["base"] = nullptr;
  EXPECT_TRUE(rejects(j, {"rope.base", "missing"}));
}

json llama3_spec() {
  json j = valid_rope();
  j["rope"]["head_dim"] = 128;
  j["rope"]["base"] = 500000.0;
  j["rope"]["max_position_embeddings"] = 131072;
  j["rope"]["scaling"] = {{"type", "llama3"},
                          {"factor", 8.0},
                          {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0},
                          {"original_max_position_embeddings", 8192}};
  return j;
}

TEST(SpecValidation, Llama3CompleteIsAccepted) {
  const EncodingSpec s = ropecheck::spec_from_json(llama3_spec());
  EXPECT_EQ(s.rope.scaling.type, ScalingType::llama3);
  EXPECT_EQ(s.rope.scaling.low_freq_factor, 1.0);
  EXPECT_EQ(s.rope.scaling.high_freq_factor, 4.0);
}

TEST(SpecValidation, Llama3MissingLowFreqFactor) {
  json j = llama3_spec();
  j["rope"]["scaling"].erase("low_freq_factor");
  // The parser keeps 0 for an absent low_freq_factor, so the message reports "= 0" (not "missing").
  EXPECT_TRUE(rejects(j, {"rope.scaling.low_freq_factor"}));
}

TEST(SpecValidation, Llama3MissingHighFreqFactor) {
  json j = llama3_spec();
  j["rope"]["scaling"].erase("high_freq_factor");
  EXPECT_TRUE(rejects(j, {"rope.scaling.high_freq_factor"}));
}

TEST(SpecValidation, Llama3MissingFactor) {
  json j = llama3_spec();
  j["rope"]["scaling"].erase("factor");
  EXPECT_TRUE(rejects(j, {"rope.scaling.factor", "missing", "llama3"}));
}

TEST(SpecValidation, Llama3MissingOriginalMaxPositions) {
  json j = llama3_spec();
  j["rope"]["scaling"].erase("original_max_position_embeddings");
  EXPECT_TRUE(rejects(j, {"rope.scaling.original_max_position_embeddings", "missing"}));
}

TEST(SpecValidation, Llama3HighBelowLow) {
  json j = llama3_spec();
  j["rope"]["scaling"]["high_freq_factor"] = 0.5;
  EXPECT_TRUE(rejects(j, {"rope.scaling.high_freq_factor", "0.5"}));
}

TEST(SpecValidation, YarnWithoutFactorOrPositions) {
  json j = valid_rope();
  j["rope"]["scaling"] = {{"type", "yarn"}};
  EXPECT_TRUE(rejects(j, {"rope.scaling.original_max_position_embeddings", "missing"}));
}

TEST(SpecValidation, SinusoidalMissingDModel) {
  json j = valid_sinusoidal();
  j["sinusoidal"].erase("d_model");
  EXPECT_TRUE(rejects(j, {"sinusoidal.d_model", "missing"}));
}

TEST(SpecValidation, SinusoidalMissingFrequencies) {
  json j = valid_sinusoidal();
  j["sinusoidal"].erase("frequencies");
  EXPECT_TRUE(rejects(j, {"sinusoidal.frequencies", "missing"}));
}

TEST(SpecValidation, SinusoidalDModelTooSmall) {
  json j = valid_sinusoidal();
  j["sinusoidal"]["d_model"] = 1;
  EXPECT_TRUE(rejects(j, {"sinusoidal.d_model", "1"}));
}

// Unknown keys (typos) are rejected at every level.

TEST(SpecValidation, UnknownTopLevelKey) {
  json j = valid_rope();
  j["nmae"] = "x";
  EXPECT_TRUE(rejects(j, {"nmae", "unknown key"}));
}

TEST(SpecValidation, UnknownRopeKey) {
  json j = valid_rope();
  j["rope"]["rope_theta"] = 500000.0;
  EXPECT_TRUE(rejects(j, {"rope.rope_theta", "unknown key"}));
}

TEST(SpecValidation, UnknownScalingKey) {
  json j = valid_rope();
  j["rope"]["scaling"] = {{"type", "linear"}, {"factor", 2.0}, {"factr", 4.0}};
  EXPECT_TRUE(rejects(j, {"rope.scaling.factr", "unknown key"}));
}

TEST(SpecValidation, UnknownMropeKey) {
  json j = valid_rope();
  j["rope"]["mrope"] = {{"section", {8, 12, 12}}, {"interleave", true}};
  EXPECT_TRUE(rejects(j, {"rope.mrope.interleave", "unknown key"}));
}

TEST(SpecValidation, UnknownSinusoidalKey) {
  json j = valid_sinusoidal();
  j["sinusoidal"]["offset"] = 2;
  EXPECT_TRUE(rejects(j, {"sinusoidal.offset", "unknown key"}));
}

TEST(SpecValidation, WrongFamilyObject) {
  json j = valid_rope();
  j["sinusoidal"] = valid_sinusoidal()["sinusoidal"];
  EXPECT_TRUE(rejects(j, {"sinusoidal", "rope"}));
}

// Wrong JSON types.

TEST(SpecValidation, StringWhereNumber) {
  json j = valid_rope();
  j["rope"]["base"] = "10000";
  EXPECT_TRUE(rejects(j, {"rope.base", "number", "\"10000\""}));
}

TEST(SpecValidation, StringWhereInteger) {
  json j = valid_rope();
  j["rope"]["head_dim"] = "64";
  EXPECT_TRUE(rejects(j, {"rope.head_dim", "integer", "\"64\""}));
}

TEST(SpecValidation, FractionWhereInteger) {
  json j = valid_rope();
  j["rope"]["head_dim"] = 64.5;
  EXPECT_TRUE(rejects(j, {"rope.head_dim", "integer", "64.5"}));
}

TEST(SpecValidation, IntegralFloatAcceptedAsInteger) {
  json j = valid_rope();
  j["rope"]["head_dim"] = 64.0;
  EXPECT_EQ(ropecheck::spec_from_json(j).rope.head_dim, 64);
}

TEST(SpecValidation, NumberWhereString) {
  json j = valid_rope();
  j["rope"]["layout"] = 1;
  EXPECT_TRUE(rejects(j, {"rope.layout", "string", "1"}));
}

TEST(SpecValidation, StringWhereBool) {
  json j = valid_rope();
  j["rope"]["mrope"] = {{"section", {8, 12, 12}}, {"interleaved", "yes"}};
  EXPECT_TRUE(rejects(j, {"rope.mrope.interleaved", "\"yes\""}));
}

TEST(SpecValidation, StringInNumberList) {
  json j = longrope_spec(32, 32);
  j["rope"]["scaling"]["short_factor"][3] = "1.0";
  EXPECT_TRUE(rejects(j, {"rope.scaling.short_factor[3]", "\"1.0\""}));
}

TEST(SpecValidation, NonObjectDocument) {
  EXPECT_TRUE(rejects(json::array({1, 2}), {"(spec)", "object"}));
}

TEST(SpecValidation, NonObjectRope) {
  json j = valid_rope();
  j["rope"] = 64;
  EXPECT_TRUE(rejects(j, {"rope", "object", "64"}));
}

// ---------------------------------------------------------------------------------------------
// Presets: all resolve, and spec_to_json / spec_from_json round-trip.

TEST(Presets, TwentyTwoPresetsSorted) {
  const std::vector<std::string> names = ropecheck::preset_names();
  EXPECT_EQ(names.size(), 22u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const char* expected : {"llama-3.1-8b", "phi-3.5-mini", "deepseek-v3", "deepseek-v3-mla", "qwen3-8b", "qwen3-vl-8b",
                               "transformer-base"})
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
}

TEST(Presets, EveryPresetResolves) {
  for (const std::string& name : ropecheck::preset_names()) {
    SCOPED_TRACE(name);
    EncodingSpec s;
    ASSERT_NO_THROW(s = ropecheck::load_preset(name));
    EXPECT_EQ(s.name, name);
    EXPECT_FALSE(s.source.empty()) << "presets must name their source";
    EXPECT_NO_THROW(ropecheck::validate(s));
  }
}

TEST(Presets, UnknownPresetThrowsNamingIt) {
  EXPECT_TRUE(throws_spec_error([] { (void)ropecheck::load_preset("llama-9"); }, {"llama-9", "llama-3.1-8b"}));
}

TEST(Presets, JsonRoundTrip) {
  for (const std::string& name : ropecheck::preset_names()) {
    SCOPED_TRACE(name);
    const EncodingSpec s = ropecheck::load_preset(name);
    const json once = ropecheck::spec_to_json(s);
    const EncodingSpec again = ropecheck::spec_from_json(once);
    const json twice = ropecheck::spec_to_json(again);
    EXPECT_EQ(once, twice) << once.dump() << "\nvs\n" << twice.dump();
    // The shipped text parses to the same spec as load_preset.
    const json shipped = json::parse(ropecheck::preset_json_text(name));
    EXPECT_EQ(ropecheck::spec_to_json(ropecheck::spec_from_json(shipped)), once);
    // And every field survives the trip (not only what spec_to_json writes).
    expect_same_spec(again, s);
  }
}

TEST(Presets, SelectedPresetValues) {
  const RopeSpec l31 = ropecheck::load_preset("llama-3.1-8b").rope;
  EXPECT_EQ(l31.head_dim, 128);
  EXPECT_EQ(l31.base, 500000.0);
  EXPECT_EQ(l31.scaling.type, ScalingType::llama3);
  EXPECT_EQ(l31.scaling.factor, 8.0);
  EXPECT_EQ(l31.scaling.original_max_position_embeddings, 8192);

  const RopeSpec phi2 = ropecheck::load_preset("phi-2").rope;
  EXPECT_EQ(phi2.head_dim, 80);
  EXPECT_EQ(phi2.rotary_dim, 32);

  const RopeSpec gptj = ropecheck::load_preset("gpt-j-6b").rope;
  EXPECT_EQ(gptj.layout, RopeLayout::interleaved);
  EXPECT_EQ(gptj.rotary_dim, 64);
  EXPECT_EQ(gptj.head_dim, 256);

  const RopeSpec q3 = ropecheck::load_preset("qwen3-vl-8b").rope;
  EXPECT_EQ(q3.mrope, MropeMode::interleaved);
  EXPECT_EQ(q3.mrope_section, (std::array<int, 3>{24, 20, 20}));

  const EncodingSpec tb = ropecheck::load_preset("transformer-base");
  EXPECT_EQ(tb.family, Family::sinusoidal);
  EXPECT_EQ(tb.sinusoidal.d_model, 512);
}

TEST(SpecJson, RoundTripOfHandWrittenSpecs) {
  json y = valid_rope();
  y["rope"]["max_position_embeddings"] = 163840;
  y["rope"]["layout"] = "interleaved";
  y["rope"]["scaling"] = {{"type", "yarn"}, {"factor", 40.0}, {"original_max_position_embeddings", 4096},
                          {"mscale", 1.0}, {"mscale_all_dim", 0.707}, {"truncate", false}, {"beta_fast", 16.0}};
  json sin = valid_sinusoidal();
  sin["sinusoidal"] = {{"d_model", 63}, {"base", 5000.0}, {"layout", "concatenated"},
                       {"frequencies", "half_dim_minus_one"}, {"position_offset", 2}};
  json lr = longrope_spec(32, 32);
  lr["rope"]["scaling"]["attention_factor"] = 1.5;
  lr["rope"]["scaling"]["factor"] = 16.0;
  lr["rope"]["scaling"]["short_factor"][7] = 3.25;
  json mr = valid_rope();
  mr["rope"]["head_dim"] = 128;
  mr["rope"]["rotary_dim"] = 64;
  mr["rope"]["mrope"] = {{"section", {8, 12, 12}}, {"interleaved", true}};
  for (const json& j : {y, llama3_spec(), lr, mr, sin}) {
    SCOPED_TRACE(j.dump());
    const EncodingSpec first = ropecheck::spec_from_json(j);
    const json a = ropecheck::spec_to_json(first);
    const EncodingSpec second = ropecheck::spec_from_json(a);
    expect_same_spec(second, first);
    EXPECT_EQ(ropecheck::spec_to_json(second), a);
  }
  const EncodingSpec s = ropecheck::spec_from_json(y);
  EXPECT_EQ(s.rope.scaling.beta_fast, 16.0);
  EXPECT_EQ(s.rope.scaling.beta_slow, 1.0);
  EXPECT_EQ(s.rope.scaling.mscale_all_dim, 0.707);
  EXPECT_FALSE(s.rope.scaling.truncate);
  EXPECT_EQ(s.rope.layout, RopeLayout::interleaved);
}

// ---------------------------------------------------------------------------------------------
// Derived quantities.

RopeSpec rope(int head_dim, int rotary_dim, ScalingType type = ScalingType::none) {
  RopeSpec r;
  r.head_dim = head_dim;
  r.rotary_dim = rotary_dim;
  r.scaling.type = type;
  return r;
}

TEST(SpecDerived, RopePairsAndBlockChannels) {
  EXPECT_EQ(ropecheck::rope_pairs(rope(128, 128)), 64);
  EXPECT_EQ(ropecheck::rope_block_channels(rope(128, 128)), 128);
  // Prefix partial rotary (Phi-2: 32 of 80 channels): the block is the rotated prefix.
  EXPECT_EQ(ropecheck::rope_pairs(rope(80, 32)), 16);
  EXPECT_EQ(ropecheck::rope_block_channels(rope(80, 32)), 32);
  EXPECT_EQ(ropecheck::rope_pairs(rope(256, 64)), 32);
  // Proportional (Gemma 4): pairs over the whole head, rotary_dim/2 of them non-zero.
  EXPECT_EQ(ropecheck::rope_pairs(rope(512, 128, ScalingType::proportional)), 256);
  EXPECT_EQ(ropecheck::rope_block_channels(rope(512, 128, ScalingType::proportional)), 512);
}

TEST(SpecDerived, EffectiveFactor) {
  RopeSpec r = rope(64, 64, ScalingType::yarn);
  r.max_position_embeddings = 131072;
  r.scaling.original_max_position_embeddings = 4096;
  EXPECT_EQ(ropecheck::effective_factor(r), 32.0);  // derived: 131072 / 4096
  EXPECT_EQ(ropecheck::effective_original_max_positions(r), 4096);
  r.scaling.factor = 4.0;
  EXPECT_EQ(ropecheck::effective_factor(r), 4.0);  // explicit wins (G4; G3 overrode it with max/orig)

  RopeSpec q = rope(128, 128, ScalingType::yarn);  // orig absent: defaults to max_position_embeddings
  q.max_position_embeddings = 32768;
  EXPECT_EQ(ropecheck::effective_original_max_positions(q), 32768);
  EXPECT_EQ(ropecheck::effective_factor(q), 1.0);

  RopeSpec lr = rope(96, 96, ScalingType::longrope);
  lr.max_position_embeddings = 131072;
  lr.scaling.original_max_position_embeddings = 4096;
  EXPECT_EQ(ropecheck::effective_factor(lr), 32.0);
  lr.max_position_embeddings = 65536;
  EXPECT_EQ(ropecheck::effective_factor(lr), 16.0);

  RopeSpec lin = rope(64, 64, ScalingType::linear);
  lin.scaling.factor = 8.0;
  lin.max_position_embeddings = 131072;
  EXPECT_EQ(ropecheck::effective_factor(lin), 8.0);

  EXPECT_EQ(ropecheck::effective_factor(rope(64, 64)), 1.0);
  EXPECT_EQ(ropecheck::effective_factor(rope(512, 128, ScalingType::proportional)), 1.0);  // default 1
  RopeSpec prop = rope(512, 128, ScalingType::proportional);
  prop.scaling.factor = 2.0;
  EXPECT_EQ(ropecheck::effective_factor(prop), 2.0);
}

TEST(SpecDerived, MropeStreamNone) {
  const RopeSpec r = rope(128, 128);
  for (int f : {0, 15, 16, 40, 63}) EXPECT_EQ(ropecheck::mrope_stream(r, f), 0) << f;
}

TEST(SpecDerived, MropeStreamChunked) {
  RopeSpec r = rope(128, 128);
  r.mrope = MropeMode::chunked;
  r.mrope_section = {16, 24, 24};
  EXPECT_EQ(ropecheck::mrope_stream(r, 0), 0);
  EXPECT_EQ(ropecheck::mrope_stream(r, 15), 0);
  EXPECT_EQ(ropecheck::mrope_stream(r, 16), 1);
  EXPECT_EQ(ropecheck::mrope_stream(r, 39), 1);
  EXPECT_EQ(ropecheck::mrope_stream(r, 40), 2);
  EXPECT_EQ(ropecheck::mrope_stream(r, 63), 2);
  std::array<int, 3> count{0, 0, 0};
  for (int f = 0; f < 64; ++f) ++count[static_cast<std::size_t>(ropecheck::mrope_stream(r, f))];
  EXPECT_EQ(count, (std::array<int, 3>{16, 24, 24}));
}

TEST(SpecDerived, MropeStreamInterleaved) {
  RopeSpec r = rope(128, 128);
  r.mrope = MropeMode::interleaved;
  r.mrope_section = {24, 20, 20};
  // Rule (variants.md 3.5): h if f % 3 == 1 and f < 60, w if f % 3 == 2 and f < 60, else t.
  EXPECT_EQ(ropecheck::mrope_stream(r, 0), 0);
  EXPECT_EQ(ropecheck::mrope_stream(r, 1), 1);
  EXPECT_EQ(ropecheck::mrope_stream(r, 2), 2);
  EXPECT_EQ(ropecheck::mrope_stream(r, 3), 0);
  EXPECT_EQ(ropecheck::mrope_stream(r, 4), 1);
  EXPECT_EQ(ropecheck::mrope_stream(r, 57), 0);
  EXPECT_EQ(ropecheck::mrope_stream(r, 58), 1);
  EXPECT_EQ(ropecheck::mrope_stream(r, 59), 2);
  EXPECT_EQ(ropecheck::mrope_stream(r, 60), 0);
  EXPECT_EQ(ropecheck::mrope_stream(r, 61), 0);
  EXPECT_EQ(ropecheck::mrope_stream(r, 62), 0);
  EXPECT_EQ(ropecheck::mrope_stream(r, 63), 0);
  std::array<int, 3> count{0, 0, 0};
  for (int f = 0; f < 64; ++f) ++count[static_cast<std::size_t>(ropecheck::mrope_stream(r, f))];
  EXPECT_EQ(count, (std::array<int, 3>{24, 20, 20}));
}

TEST(SpecDerived, MropeStreamInterleavedUnequalSections) {
  // h and w sections differ: h limited by 3*sec[1], w by 3*sec[2].
  RopeSpec r = rope(64, 64);
  r.mrope = MropeMode::interleaved;
  r.mrope_section = {12, 12, 8};  // 32 pairs
  EXPECT_EQ(ropecheck::mrope_stream(r, 22), 1);  // 22 % 3 == 1, < 36
  EXPECT_EQ(ropecheck::mrope_stream(r, 23), 2);  // 23 % 3 == 2, < 24
  EXPECT_EQ(ropecheck::mrope_stream(r, 26), 0);  // 26 % 3 == 2 but not < 24
  EXPECT_EQ(ropecheck::mrope_stream(r, 25), 1);  // 25 % 3 == 1, < 36
  EXPECT_EQ(ropecheck::mrope_stream(r, 31), 1);  // 31 % 3 == 1, < 36
}

TEST(SpecDerived, SinusoidalFrequencyCount) {
  SinusoidalSpec s;
  s.frequencies = SinusoidalFrequencies::vaswani;
  s.d_model = 512;
  EXPECT_EQ(ropecheck::sinusoidal_frequency_count(s), 256);
  s.d_model = 7;  // odd Vaswani: one more sine than cosine
  EXPECT_EQ(ropecheck::sinusoidal_frequency_count(s), 4);
  s.d_model = 2;
  EXPECT_EQ(ropecheck::sinusoidal_frequency_count(s), 1);
  s.frequencies = SinusoidalFrequencies::half_dim_minus_one;
  s.d_model = 512;
  EXPECT_EQ(ropecheck::sinusoidal_frequency_count(s), 256);
  s.d_model = 7;  // tensor2tensor / fairseq: floor(d/2), a zero column is appended
  EXPECT_EQ(ropecheck::sinusoidal_frequency_count(s), 3);
}

TEST(SpecDerived, ToStringNames) {
  EXPECT_EQ(ropecheck::to_string(ScalingType::longrope), "longrope");
  EXPECT_EQ(ropecheck::to_string(ScalingType::none), "none");
  EXPECT_EQ(ropecheck::to_string(RopeLayout::half_split), "half_split");
  EXPECT_EQ(ropecheck::to_string(RopeLayout::interleaved), "interleaved");
  EXPECT_EQ(ropecheck::to_string(MropeMode::interleaved), "interleaved");
  EXPECT_EQ(ropecheck::to_string(SinusoidalFrequencies::half_dim_minus_one), "half_dim_minus_one");
}

}  // namespace
