// ropecheck::props_gtest: the environment overrides (RC_PARAMS / ROPECHECK_SEED) and test names of
// register_property_tests. The registration itself is exercised end to end by packaging_consumer.
#include <gtest/gtest.h>

#include "ropecheck/props/gtest.hpp"

namespace rp = ropecheck::props;

TEST(PropsGtest, ParsesSeedAndCasesFromRcParams) {
  const auto o = rp::parse_rc_params("  verbose_progress=1 seed=12345678901234567890\tmax_success=250 ");
  ASSERT_TRUE(o.seed.has_value());
  EXPECT_EQ(*o.seed, 12345678901234567890ULL);
  ASSERT_TRUE(o.cases.has_value());
  EXPECT_EQ(*o.cases, 250);
}

TEST(PropsGtest, IgnoresOtherKeysAndBadValues) {
  const auto o = rp::parse_rc_params("reproduce=BAAAAAA seed=12x max_success=-3 noise");
  EXPECT_FALSE(o.seed.has_value());
  EXPECT_FALSE(o.cases.has_value());
  EXPECT_FALSE(rp::parse_rc_params("").seed.has_value());
}

TEST(PropsGtest, OverridesApplyToOptions) {
  rp::SuiteOptions base;
  base.cases = 7;
  base.seed = 1;
  base.max_position = 99;
  const auto same = rp::apply_overrides(base, {});
  EXPECT_EQ(same.seed, 1u);
  EXPECT_EQ(same.cases, 7);
  const auto o = rp::apply_overrides(base, rp::parse_rc_params("seed=42 max_success=3"));
  EXPECT_EQ(o.seed, 42u);
  EXPECT_EQ(o.cases, 3);
  EXPECT_EQ(o.max_position, 99);
}

TEST(PropsGtest, SafeNames) {
  EXPECT_EQ(rp::gtest_safe_name("llama-3.1-8b"), "llama_3_1_8b");
  EXPECT_EQ(rp::gtest_safe_name("relative_shift"), "relative_shift");
  EXPECT_EQ(rp::gtest_safe_name("a/b:c*d"), "a_b_c_d");
  EXPECT_EQ(rp::gtest_safe_name(""), "_");
}

TEST(PropsGtest, RejectsBadArguments) {
  auto factory = [] { return rp::make_reference_target(); };
  EXPECT_THROW(rp::register_property_tests("", factory), std::invalid_argument);
  EXPECT_THROW(rp::register_property_tests("X", nullptr), std::invalid_argument);
  rp::SuiteOptions only;
  only.only = {"no_such_property"};
  EXPECT_THROW(rp::register_property_tests("X", factory, only), std::invalid_argument);
}
