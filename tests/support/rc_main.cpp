// main() for property tests: fixes RapidCheck's seed unless the user set RC_PARAMS, so CI
// runs are deterministic while `RC_PARAMS="seed=..."` or `RC_PARAMS="reproduce=..."` still work.
// At the small and tiny test scales (test_scale.hpp) each RapidCheck property runs fewer cases.
#include <cstdio>
#include <cstdlib>
#include <exception>

#include <gtest/gtest.h>

#include "test_scale.hpp"

namespace {
constexpr const char* kDefaultParams = "seed=20261121 max_success=100";
constexpr const char* kSmallParams = "seed=20261121 max_success=20";
constexpr const char* kTinyParams = "seed=20261121 max_success=5";
}

int main(int argc, char** argv) {
  bool small = false;
  try {
    small = ropecheck::test::small_scale();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  if (small) {
    std::fprintf(stderr, "test scale: %s (shortened sweeps; ROPECHECK_TEST_SCALE=full for the release sizes)\n",
                 ropecheck::test::tiny_scale() ? "tiny" : "small");
  }
  if (std::getenv("RC_PARAMS") == nullptr) {
    const char* params = ropecheck::test::tiny_scale() ? kTinyParams : small ? kSmallParams : kDefaultParams;
    setenv("RC_PARAMS", params, 0);
    std::fprintf(stderr, "rapidcheck: RC_PARAMS not set, using \"%s\" (set RC_PARAMS to override)\n", params);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
