#include "ropecheck/kut/kernel_under_test.hpp"

#include <algorithm>

namespace ropecheck::kut {

bool Capabilities::supports(DType d) const {
  return std::find(output_dtypes.begin(), output_dtypes.end(), d) != output_dtypes.end();
}

std::size_t ConstStorage::count() const { return bytes.size() / static_cast<std::size_t>(format_info(dtype).storage_bits / 8); }
std::size_t Storage::count() const { return bytes.size() / static_cast<std::size_t>(format_info(dtype).storage_bits / 8); }

}  // namespace ropecheck::kut
