// libFuzzer target: parse_npy on arbitrary bytes. Any outcome other than a InputError or success
// is a bug. What parses must round-trip through serialize_npy(), whose data starts at a multiple
// of 64.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "ropecheck/io/npy.hpp"

using namespace ropecheck;
using namespace ropecheck::io;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Tensor t;
  try {
    t = parse_npy(std::span<const std::uint8_t>(data, size), "t", "fuzz.npy");
  } catch (const InputError&) {
    return 0;
  }
  validate(t);
  if (t.numel() > 0) (void)t.value(t.numel() - 1);
  const std::vector<std::uint8_t> bytes = serialize_npy(t);
  const std::size_t header_len = bytes[8] | (bytes[9] << 8);
  if ((10 + header_len) % 64 != 0 || bytes.size() != 10 + header_len + t.data.size()) std::abort();
  if (parse_npy(bytes, "t", "roundtrip.npy") != t) std::abort();
  return 0;
}
