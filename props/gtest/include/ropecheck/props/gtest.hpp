// GoogleTest registration of the property suite: another project runs every property against its
// own kernel from its own test binary in a few lines.
//
//   #include <gtest/gtest.h>
//   #include <ropecheck/props/gtest.hpp>
//
//   int main(int argc, char** argv) {
//     testing::InitGoogleTest(&argc, argv);
//     ropecheck::props::register_property_tests("MyRope", [] {
//       return ropecheck::props::make_function_target({.name = "my-rope"}, my_rope);
//     });
//     return RUN_ALL_TESTS();
//   }
//
// Link `ropecheck::props_gtest` (find_package(ropecheck)); it brings GTest::gtest. The `ropecheck::props`
// library itself does not depend on GoogleTest.
//
// Test names: one test per property, `<suite_name>.<property>`; with specs, one per property and
// spec, `<suite_name>.<property>/<spec name>`. Characters other than letters, digits and '_' in
// a name become '_' (GoogleTest filters treat '.', '/', '-', ':' and '*' specially).
//
// Seeds. Each test runs the suite with `options` restricted to its one property. The environment
// overrides two fields, so a failure seen in CI reproduces with the line the failure prints:
//   RC_PARAMS="seed=S max_success=N"   seed -> options.seed, max_success -> options.cases
//   ROPECHECK_SEED=S                   seed (RC_PARAMS's seed= wins when both are set)
// Other RC_PARAMS keys (RapidCheck's own: verbose_progress, reproduce, ...) are ignored here.
// (RapidCheck itself may print "Using configuration: seed=..." with a random seed when RC_PARAMS is
// not set: that is its default for other RapidCheck tests; the suite runs with options.seed.)
// A failing test reports the property's statement, the counterexample, the failing position, the
// suite's own reproduce string and an `RC_PARAMS="seed=..." <binary> --gtest_filter=...` line.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ropecheck/props/registry.hpp"  // TargetFactory
#include "ropecheck/props/suite.hpp"
#include "ropecheck/props/target.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::props {

// Registers one GoogleTest test per property (and per spec when `specs` is not empty; with no
// specs the suite generates them: presets and odd-but-valid configurations). `make_target` makes a
// fresh target for each test (targets may hold state; tests may run in any order or be filtered).
// A property that is not tested (its every case declined by the target, rope_apply / sinusoidal
// returning false, or only saturated class bounds seen: core/verdict.hpp) FAILS its test, so a
// consumer's CI is never green for something that did not run, unless the consumer names the
// property in `options.allow_not_tested` (then it is reported as skipped, with the reason).
// `options.only` restricts the registered properties.
// Call it after testing::InitGoogleTest and before RUN_ALL_TESTS (or from a static initializer).
// Returns the number of tests registered.
// Throws std::invalid_argument for an empty suite name, an empty factory or an unknown name in
// options.only or options.allow_not_tested.
std::size_t register_property_tests(std::string suite_name, TargetFactory make_target,
                                    SuiteOptions options = {}, std::vector<EncodingSpec> specs = {});

// The environment overrides applied by register_property_tests (exposed for tests and for
// callers that run run_suite themselves).
struct EnvironmentOverrides {
  std::optional<std::uint64_t> seed;  // RC_PARAMS seed=, else ROPECHECK_SEED
  std::optional<int> cases;           // RC_PARAMS max_success=
};
// Parses an RC_PARAMS value ("seed=1 max_success=200 verbose_progress=1"); keys it does not use,
// and values that are not numbers, are ignored.
EnvironmentOverrides parse_rc_params(std::string_view rc_params);
// Reads RC_PARAMS and ROPECHECK_SEED from the environment.
EnvironmentOverrides environment_overrides();
// `options` with the overrides applied.
SuiteOptions apply_overrides(SuiteOptions options, const EnvironmentOverrides& overrides);

// A name usable as a GoogleTest suite or test name: letters, digits and '_', others -> '_'.
std::string gtest_safe_name(std::string_view name);

}  // namespace ropecheck::props
