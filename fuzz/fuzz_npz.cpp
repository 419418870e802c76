// libFuzzer target: parse_npz on arbitrary bytes (libzip underneath). Any outcome other than a
// InputError or success is a bug. What parses must round-trip through serialize_npz().
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "ropecheck/io/npy.hpp"

using namespace ropecheck;
using namespace ropecheck::io;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<Tensor> tensors;
  try {
    tensors = parse_npz(std::span<const std::uint8_t>(data, size), "fuzz.npz");
  } catch (const InputError&) {
    return 0;
  }
  for (const Tensor& t : tensors) validate(t);
  const std::vector<std::uint8_t> bytes = serialize_npz(tensors);
  std::vector<Tensor> back = parse_npz(bytes, "roundtrip.npz");
  std::sort(tensors.begin(), tensors.end(), [](const Tensor& a, const Tensor& b) { return a.name < b.name; });
  if (back != tensors) std::abort();  // serialize_npz writes members sorted by name
  if (serialize_npz(back) != bytes) std::abort();
  return 0;
}
