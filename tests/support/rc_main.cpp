// main() for property tests: fixes RapidCheck's seed unless the user set RC_PARAMS, so CI
// runs are deterministic while `RC_PARAMS="seed=..."` or `RC_PARAMS="reproduce=..."` still work.
#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

namespace {
constexpr const char* kDefaultParams = "seed=20261121 max_success=100";
}

int main(int argc, char** argv) {
  if (std::getenv("RC_PARAMS") == nullptr) {
    setenv("RC_PARAMS", kDefaultParams, 0);
    std::fprintf(stderr, "rapidcheck: RC_PARAMS not set, using \"%s\" (set RC_PARAMS to override)\n", kDefaultParams);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
