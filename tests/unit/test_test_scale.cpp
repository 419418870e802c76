// The test scale (tests/support/test_scale.hpp): its spelling, and that the sanitized tests run small.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "test_scale.hpp"

namespace ropecheck::test {
namespace {

TEST(TestScale, ParsesItsTwoNames) {
  EXPECT_EQ(parse_scale("full"), Scale::full);
  EXPECT_EQ(parse_scale("small"), Scale::small);
  EXPECT_FALSE(parse_scale(""));
  EXPECT_FALSE(parse_scale("Small"));
  EXPECT_FALSE(parse_scale("0.1"));
}

TEST(TestScale, ScaledPicksTheSizeOfThisRun) {
  const char* env = std::getenv("ROPECHECK_TEST_SCALE");
  const Scale want = env == nullptr ? default_scale() : *parse_scale(env);
  EXPECT_EQ(scale(), want);
  EXPECT_EQ(scaled(80, 4), want == Scale::small ? 4 : 80);
}

// The sanitized build (GCC: __SANITIZE_ADDRESS__; clang: __has_feature) defaults to the small scale
// (tests/support/sanitizer_defaults.cpp), everything else to full.
#if defined(__SANITIZE_ADDRESS__)
#define ROPECHECK_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ROPECHECK_TEST_UNDER_ASAN 1
#endif
#endif
TEST(TestScale, SanitizedTestsDefaultToSmall) {
#ifdef ROPECHECK_TEST_UNDER_ASAN
  EXPECT_EQ(default_scale(), Scale::small);
#else
  EXPECT_EQ(default_scale(), Scale::full);
#endif
}

}  // namespace
}  // namespace ropecheck::test
