// The one error type for input ropecheck cannot use: a malformed spec or option, a tensor file that
// is truncated or lies about its shape, a golden set that fails its hashes, a candidate of the wrong
// shape. The message is one line naming the input and the problem; the CLI prints it as
// "ropecheck: error: ..." with exit code 2, the Python package raises ropecheck.InputError.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace ropecheck {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws InputError("<what>: <problem>"), `what` with its control bytes escaped (one_line.hpp: sanitize).
[[noreturn]] void input_error(std::string_view what, const std::string& problem);

}  // namespace ropecheck
