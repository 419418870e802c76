#include "test_scale.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

// Defined by the sanitized test executables only (support/sanitizer_defaults.cpp): their default scale.
// A weak reference, not an environment variable set by a static initializer, so that a test file's own
// static initializers see the same scale as its tests.
extern "C" __attribute__((weak)) const char* ropecheck_test_default_scale();

namespace ropecheck::test {

std::optional<Scale> parse_scale(std::string_view text) {
  if (text == "full") return Scale::full;
  if (text == "small") return Scale::small;
  if (text == "tiny") return Scale::tiny;
  return std::nullopt;
}

Scale default_scale() {
  if (ropecheck_test_default_scale == nullptr) return Scale::full;
  const std::optional<Scale> s = parse_scale(ropecheck_test_default_scale());
  if (!s) throw std::logic_error("ropecheck_test_default_scale() names no scale");
  return *s;
}

Scale scale() {
  const char* v = std::getenv("ROPECHECK_TEST_SCALE");
  if (v == nullptr) return default_scale();
  const std::optional<Scale> s = parse_scale(v);
  if (!s) {
    throw std::invalid_argument("ROPECHECK_TEST_SCALE must be 'full', 'small' or 'tiny', not '" + std::string(v) + "'");
  }
  return *s;
}

}  // namespace ropecheck::test
