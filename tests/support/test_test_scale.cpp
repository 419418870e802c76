// The test scale (tests/support/test_scale.hpp): its spelling, and that the sanitized tests run tiny.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "test_scale.hpp"

namespace ropecheck::test {
namespace {

TEST(TestScale, ParsesItsThreeNames) {
  EXPECT_EQ(parse_scale("full"), Scale::full);
  EXPECT_EQ(parse_scale("small"), Scale::small);
  EXPECT_EQ(parse_scale("tiny"), Scale::tiny);
  EXPECT_FALSE(parse_scale(""));
  EXPECT_FALSE(parse_scale("Small"));
  EXPECT_FALSE(parse_scale("sanitizer"));
  EXPECT_FALSE(parse_scale("0.1"));
}

TEST(TestScale, ScaledPicksTheSizeOfThisRun) {
  const char* env = std::getenv("ROPECHECK_TEST_SCALE");
  const Scale want = env == nullptr ? default_scale() : *parse_scale(env);
  EXPECT_EQ(scale(), want);
  EXPECT_EQ(scaled(80, 4), want == Scale::full ? 80 : 4);  // tiny takes the small size unless it names one
  EXPECT_EQ(scaled(80, 4, 1), want == Scale::full ? 80 : want == Scale::small ? 4 : 1);
  EXPECT_EQ(small_scale(), want != Scale::full);
  EXPECT_EQ(tiny_scale(), want == Scale::tiny);
}

// The sanitized build (GCC: __SANITIZE_ADDRESS__; clang: __has_feature) defaults to the tiny scale
// (tests/support/sanitizer_defaults.cpp), everything else to full.
#if defined(__SANITIZE_ADDRESS__)
#define ROPECHECK_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ROPECHECK_TEST_UNDER_ASAN 1
#endif
#endif
TEST(TestScale, SanitizedTestsDefaultToTiny) {
#ifdef ROPECHECK_TEST_UNDER_ASAN
  EXPECT_EQ(default_scale(), Scale::tiny);
#else
  EXPECT_EQ(default_scale(), Scale::full);
#endif
}

}  // namespace
}  // namespace ropecheck::test
