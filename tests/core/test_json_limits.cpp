// Hostile JSON: every JSON input is parsed with a depth limit, and error messages show
// a bounded excerpt of the offending value, never a recursive dump of it. 200,000 nested `[` used to
// crash `spec`, `golden --hf-config` and `check` (reliability-2 defect 4) in the message builder.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "ropecheck/core/spec.hpp"
#include "ropecheck/core/spec_json.hpp"

namespace {

using nlohmann::json;

std::string nested(int depth, const std::string& inner = "1") {
  return std::string(static_cast<std::size_t>(depth), '[') + inner + std::string(static_cast<std::size_t>(depth), ']');
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ropecheck::SpecError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JsonLimits, DeepValueRefusedWhileParsing) {
  const std::string text = R"({"name": "x", "family": "rope", "rope": {"head_dim": 64, "layout": "half_split", "base": )" +
                           nested(200000) + "}}";
  const std::string msg = error_of([&] { (void)ropecheck::parse_json_text(text, "deep.json"); });
  EXPECT_NE(msg.find("malformed JSON in 'deep.json': nests deeper than 64 levels"), std::string::npos) << msg;
}

TEST(JsonLimits, LimitIsExactlyKMaxJsonDepth) {
  // 64 nested containers parse; the 65th is refused.
  EXPECT_NO_THROW((void)ropecheck::parse_json_text(nested(ropecheck::kMaxJsonDepth), "ok"));
  EXPECT_THROW((void)ropecheck::parse_json_text(nested(ropecheck::kMaxJsonDepth + 1), "deep"), ropecheck::SpecError);
  // Objects count as levels too.
  std::string obj;
  for (int i = 0; i <= ropecheck::kMaxJsonDepth; ++i) obj += R"({"a":)";
  obj += "1" + std::string(static_cast<std::size_t>(ropecheck::kMaxJsonDepth) + 1, '}');
  EXPECT_THROW((void)ropecheck::parse_json_text(obj, "deep"), ropecheck::SpecError);
}

TEST(JsonLimits, MalformedJsonMessageIsOneLine) {
  const std::string msg = error_of([] { (void)ropecheck::parse_json_text("{\"a\": [1, 2", "t.json"); });
  EXPECT_EQ(msg.rfind("malformed JSON in 't.json': ", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  const std::string big = error_of([] { (void)ropecheck::parse_json_text("{\"a\": 1e400}", "n.json"); });
  EXPECT_NE(big.find("number overflow"), std::string::npos) << big;
}

TEST(JsonLimits, ExcerptOfAValueBuiltDeepInCodeIsBoundedAndShallow) {
  // A value built in C++ (not through the parser) may be arbitrarily deep: the excerpt must not recurse.
  json root = json::array();
  json* cur = &root;
  for (int i = 0; i < 100000; ++i) {
    cur->push_back(json::array());
    cur = &cur->back();
  }
  const std::string s = ropecheck::json_excerpt(root);
  EXPECT_LE(s.size(), 60u);
  EXPECT_EQ(s, "[[[[...]]]]");
  // The spec reader names the key and shows the excerpt instead of dumping the value.
  json spec = json::parse(R"({"name": "x", "family": "rope", "rope": {"head_dim": 64, "layout": "half_split"}})");
  spec["rope"]["base"] = std::move(root);
  const std::string msg = error_of([&] { (void)ropecheck::spec_from_json(spec); });
  EXPECT_NE(msg.find("'rope.base': must be a number, got [[[[...]]]]"), std::string::npos) << msg;
}

TEST(JsonLimits, ExcerptTruncatesLongStringsAndEscapesControlCharacters) {
  const std::string s = ropecheck::json_excerpt(json(std::string(10'000'000, 'w')));
  EXPECT_EQ(s.size(), 60u);
  EXPECT_EQ(s.substr(57), "...");
  const std::string c = ropecheck::json_excerpt(json("warp\n\x1b[31m"));
  EXPECT_EQ(c, R"("warp\n\u001b[31m")");
  EXPECT_EQ(ropecheck::json_excerpt(json::parse("[1, [2, [3, [4, [5]]]]]")), "[1,[2,[3,[...]]]]");
  EXPECT_EQ(ropecheck::json_excerpt(json(std::string("\xff\xfe"))), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");
}

TEST(JsonLimits, HfConfigDeepValuesAreOneLineErrors) {
  for (const char* key : {"rope_theta", "head_dim", "rope_scaling"}) {
    const std::string text = R"({"hidden_size": 4096, "num_attention_heads": 32, ")" + std::string(key) +
                             "\": " + nested(200000) + "}";
    const std::string msg = error_of([&] { (void)ropecheck::parse_json_text(text, "d.json"); });
    EXPECT_NE(msg.find("nests deeper"), std::string::npos) << key << ": " << msg;
  }
  // Shallow but wrong-typed values: the message shows a short excerpt.
  json cfg = json::parse(R"({"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": [[[[[[1]]]]]]})");
  const std::string msg = error_of([&] { (void)ropecheck::spec_from_hf_config(cfg); });
  EXPECT_NE(msg.find("'rope_theta': must be a number, got [[[[...]]]]"), std::string::npos) << msg;
  cfg = json::parse(R"({"hidden_size": 4096, "num_attention_heads": 32, "rope_scaling": {"rope_type": [[[[[1]]]]]}})");
  const std::string t = error_of([&] { (void)ropecheck::spec_from_hf_config(cfg); });
  EXPECT_NE(t.find("unknown rope type \"[[[[...]]]]\""), std::string::npos) << t;
}

}  // namespace
