// ropecheck::props_gtest: the environment overrides (RC_PARAMS / ROPECHECK_SEED) and test names of
// register_property_tests. The registration itself is exercised end to end by packaging_consumer.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>

#include <sys/wait.h>

#include "ropecheck/props/gtest.hpp"
#include "ropecheck/props/mutants.hpp"
#include "ropecheck/reference/presets.hpp"

namespace rp = ropecheck::props;

namespace {

// Probe tests, registered only in a child run of this binary (ROPECHECK_GTEST_PROBE set), so that
// the parent can see what a consumer's CI sees: exit status and output of RUN_ALL_TESTS.
//   decline / decline-allowed: a target that implements nothing (every case declined)
//   saturated: the hf-fp32 kernel (class fp32-angle) on Llama-3.1-8B at positions up to 2^24, where
//              the class bound of the highest-frequency pairs is at its cap
const bool probe_registered = [] {
  const char* mode_env = std::getenv("ROPECHECK_GTEST_PROBE");
  if (mode_env == nullptr) return false;
  const std::string mode = mode_env;
  rp::SuiteOptions o;
  o.cases = 5;
  o.seed = 7;
  o.only = {"relative_shift"};
  if (mode == "decline-allowed") o.allow_not_tested = {"relative_shift"};
  if (mode == "saturated") {
    o.cases = 20;  // a third of the generated positions are uniform up to 2^24: some saturate
    rp::register_builtin_targets();
    rp::register_property_tests("Probe", [] { return rp::make_target("hf-fp32"); }, o,
                                {ropecheck::load_preset("llama-3.1-8b")});
  } else {
    rp::register_property_tests("Probe", [] {
      return rp::make_function_target({.name = "declines-all", .description = "implements nothing"},
                                      [](const ropecheck::EncodingSpec&, std::span<const ropecheck::Position>, int,
                                         std::span<const double>, std::span<double>) { return false; });
    }, o);
  }
  return true;
}();

// Runs this binary's probe tests in a child; exit status and output. The child runs them all even when
// this process is one GoogleTest shard of several (the sanitizer run's ctest entries).
std::pair<int, std::string> run_probe(const std::string& mode) {
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string cmd = "env -u GTEST_TOTAL_SHARDS -u GTEST_SHARD_INDEX ROPECHECK_GTEST_PROBE=" + mode + " '" + exe +
                          "' --gtest_filter='Probe.*' 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace

// a property the target never ran used to become GTEST_SKIP, so a consumer's CI stayed green.
TEST(PropsGtest, NotTestedPropertyFailsTheTest) {
  const auto [rc, out] = run_probe("decline");
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("[  FAILED  ] Probe.relative_shift"), std::string::npos) << out;
  EXPECT_NE(out.find("was NOT TESTED for target declines-all"), std::string::npos) << out;
  EXPECT_NE(out.find("allow_not_tested"), std::string::npos) << out;
}

TEST(PropsGtest, NotTestedPropertyIsASkipOnlyWhenAllowedByName) {
  const auto [rc, out] = run_probe("decline-allowed");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("[  SKIPPED ] Probe.relative_shift"), std::string::npos) << out;
  EXPECT_NE(out.find("declined every case"), std::string::npos) << out;
}

// fp32-angle at positions up to 2^24: bounds at their cap are not a pass.
TEST(PropsGtest, SaturatedBoundsAreNotAPass) {
  const auto [rc, out] = run_probe("saturated");
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("was NOT TESTED for target hf-fp32"), std::string::npos) << out;
  EXPECT_NE(out.find("bounds saturated"), std::string::npos) << out;
  EXPECT_NE(out.find("f32-reduced, fp64-angle"), std::string::npos) << out;
}

TEST(PropsGtest, AllowNotTestedNamesMustBeKnown) {
  rp::SuiteOptions o;
  o.allow_not_tested = {"no_such_property"};
  EXPECT_THROW(rp::register_property_tests("X", [] { return rp::make_reference_target(); }, o), std::invalid_argument);
}

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
