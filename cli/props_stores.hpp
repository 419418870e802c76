// `ropecheck props --stores LIST`: the storage properties (props/PROPERTIES.md, "Storage properties") of
// ropecheck's own fused recipes, rotate -> quantize into each store of LIST (golden --stores' items) and
// Q/K RMSNorm -> rotate (norm_invariance), instead of the suite.
#pragma once

#include <cstdint>
#include <string>

#include "spec_source.hpp"

namespace ropecheck::cli {

struct PropsStoresArgs {
  std::string stores, kernel, target, only, report;
  int cases = 100;
  std::uint64_t seed = 0;
  std::int64_t max_pos = 0;     // 0: 2^20
  std::string incompatible;     // the first suite-only option given ("" when none): refused
  const SpecSource* source = nullptr;
};

// Runs them; exit 0 / 1 / 3 on the combined verdict; SpecError (exit 2) for unusable input, before any run.
int run_props_stores(const PropsStoresArgs& a);

}  // namespace ropecheck::cli
