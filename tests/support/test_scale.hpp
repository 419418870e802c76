// The test scale: how large the long sweeps, case counts and seed lists of the unit tests are.
//
// Full scale runs every test at the size its error model and statistics were written for; the small
// scale shortens the longest ones. The sanitized test executables default to small
// (tests/support/sanitizer_defaults.cpp), because they are there to find memory and undefined-behaviour
// errors on every code path, not to repeat the statistics: ten to a hundred times slower instrumented,
// the full sizes would not fit in CI. Everything else defaults to full. ROPECHECK_TEST_SCALE=full|small
// overrides the default. A test picks its two sizes with scaled(full, small), and what it asserts must
// still hold (and be able to fail) at the small size; README "Tests" ("Sanitizers") lists what each
// one shrinks.
#pragma once

#include <optional>
#include <string_view>

namespace ropecheck::test {

enum class Scale { full, small };

// "full" or "small"; anything else is nullopt.
std::optional<Scale> parse_scale(std::string_view text);

// This executable's default: small in the sanitized tests, full elsewhere.
Scale default_scale();

// This process's scale: ROPECHECK_TEST_SCALE, or the default when it is unset. An unknown value throws
// std::invalid_argument naming it, so a typo cannot quietly run the wrong size.
Scale scale();

inline bool small_scale() { return scale() == Scale::small; }

// `full` at full scale, `small` at small scale.
template <class T>
T scaled(T full, T small) {
  return small_scale() ? small : full;
}

}  // namespace ropecheck::test
