// Uses the leaf libraries through add_subdirectory: the default accuracy class and a bf16 decode.
#include <cstdio>

#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/core/dtype.hpp"

int main() {
  const auto name = ropecheck::accuracy::to_string(ropecheck::accuracy::kDefaultAccuracyClass);
  const double one = ropecheck::bits_to_double(0x3F80, ropecheck::DType::bf16);
  std::printf("%.*s %g\n", static_cast<int>(name.size()), name.data(), one);
  return name == "fp32-angle" && one == 1.0 ? 0 : 1;
}
