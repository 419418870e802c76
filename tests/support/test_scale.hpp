// The test scale: how large the long sweeps, case counts and seed lists of the unit tests are.
//
// Full scale runs every test at the size its error model and statistics were written for; the small
// scale shortens the longest ones; the tiny scale shortens the slowest further, to the least work that
// still runs every code path and every assertion. The sanitized test executables default to tiny
// (tests/support/sanitizer_defaults.cpp), because they are there to find memory and undefined-behaviour
// errors on every code path, not to repeat the statistics: ten to a hundred times slower instrumented,
// the full sizes would not fit in CI. Everything else defaults to full. ROPECHECK_TEST_SCALE=full|small|tiny
// overrides the default. A test picks its sizes with scaled(full, small) or scaled(full, small, tiny)
// (tiny takes the small size where a test names none), and what it asserts must still hold (and be able
// to fail) at every size; docs/development/sanitizers.md lists what each one shrinks.
#pragma once

#include <optional>
#include <string_view>

namespace ropecheck::test {

enum class Scale { full, small, tiny };

// "full", "small" or "tiny"; anything else is nullopt.
std::optional<Scale> parse_scale(std::string_view text);

// This executable's default: tiny in the sanitized tests, full elsewhere.
Scale default_scale();

// This process's scale: ROPECHECK_TEST_SCALE, or the default when it is unset. An unknown value throws
// std::invalid_argument naming it, so a typo cannot quietly run the wrong size.
Scale scale();

// Smaller than full: small or tiny.
inline bool small_scale() { return scale() != Scale::full; }
inline bool tiny_scale() { return scale() == Scale::tiny; }

// `full` at full scale, `small` at the small and tiny scales.
template <class T>
T scaled(T full, T small) {
  return small_scale() ? small : full;
}

// `full`, `small` or `tiny` at that scale.
template <class T>
T scaled(T full, T small, T tiny) {
  return tiny_scale() ? tiny : small_scale() ? small : full;
}

}  // namespace ropecheck::test
