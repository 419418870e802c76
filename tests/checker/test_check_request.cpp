// Tests for the check request's parsers (run_check.hpp): the criterion from its options, validated in
// this one place for the CLI and Python, and --map's items as the name map. Pure parsing: no error model.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "ropecheck/checker/run_check.hpp"

namespace ropecheck::checker {
namespace {

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CheckRequest, CriterionDefaultsToTheDefaultClass) {
  const Criterion c = parse_criterion(std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  EXPECT_EQ(c.kind, Criterion::Kind::accuracy_class);
  EXPECT_EQ(c.accuracy_class, accuracy::kDefaultAccuracyClass);
}

TEST(CheckRequest, CriterionOfEachKind) {
  EXPECT_EQ(parse_criterion(std::string("bf16-table"), std::nullopt, std::nullopt, std::nullopt).accuracy_class,
            accuracy::AccuracyClass::bf16_table);
  const Criterion u = parse_criterion(std::nullopt, 2.5, std::nullopt, std::nullopt);
  EXPECT_EQ(u.kind, Criterion::Kind::max_ulp);
  EXPECT_EQ(u.max_ulp, 2.5);
  const Criterion t = parse_criterion(std::nullopt, std::nullopt, 1e-3, 1e-2);
  EXPECT_EQ(t.kind, Criterion::Kind::tolerance);
  EXPECT_EQ(t.atol, 1e-3);
  EXPECT_EQ(t.rtol, 1e-2);
}

TEST(CheckRequest, CriterionRefusalsNameTheOptionAsEachFrontSpellsIt) {
  EXPECT_EQ(error_of([] { parse_criterion(std::string("fp32-angle"), 1.0, std::nullopt, std::nullopt); }),
            "give one criterion: --class, --max-ulp, or --atol with --rtol");
  EXPECT_EQ(error_of([] { parse_criterion(std::string("fp32-angle"), 1.0, std::nullopt, std::nullopt, true); }),
            "give one criterion: cls, max_ulp, or atol with rtol");
  EXPECT_EQ(error_of([] { parse_criterion(std::nullopt, std::nullopt, 1e-3, std::nullopt); }), "--atol and --rtol go together");
  EXPECT_EQ(error_of([] { parse_criterion(std::nullopt, -1.0, std::nullopt, std::nullopt, true); }).rfind("max_ulp: ", 0), 0u);
  EXPECT_EQ(error_of([] { parse_criterion(std::nullopt, -1.0, std::nullopt, std::nullopt); }).rfind("--max-ulp: ", 0), 0u);
  EXPECT_NE(error_of([] { parse_criterion(std::string("fp33-angle"), std::nullopt, std::nullopt, std::nullopt); })
                .find("unknown class 'fp33-angle'"),
            std::string::npos);
}

TEST(CheckRequest, NameMapFromGoldenEqualsCandidateItems) {
  const std::map<std::string, std::string> m = parse_name_map({"q_rot.bf16=query_out", "k_rot.bf16=a=b"});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m.at("q_rot.bf16"), "query_out");
  EXPECT_EQ(m.at("k_rot.bf16"), "a=b");  // the first '=' splits
  EXPECT_TRUE(parse_name_map({}).empty());
}

TEST(CheckRequest, NameMapRefusesHalfItemsAndTwiceMappedOutputs) {
  for (const char* bad : {"q_rot.bf16", "=query_out", "q_rot.bf16="})
    EXPECT_EQ(error_of([&] { parse_name_map({bad}); }),
              "--map '" + std::string(bad) + "': expected GOLDEN_NAME=CANDIDATE_NAME (e.g. q_rot.bf16=query_out)");
  EXPECT_EQ(error_of([] { parse_name_map({"q_rot.f32=a", "q_rot.f32=b"}); }), "--map: golden output 'q_rot.f32' is mapped twice");
}

}  // namespace
}  // namespace ropecheck::checker
