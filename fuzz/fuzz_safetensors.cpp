// libFuzzer target: parse_safetensors on arbitrary bytes. Any outcome other than a InputError
// or success is a bug (sanitizers catch memory and UB errors). What parses must survive a round
// trip: serialize_safetensors() of it must not throw and must parse back to the same tensors and
// metadata.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "ropecheck/io/safetensors.hpp"

using namespace ropecheck;
using namespace ropecheck::io;

namespace {
void sort_by_name(std::vector<Tensor>& ts) {
  std::sort(ts.begin(), ts.end(), [](const Tensor& a, const Tensor& b) { return a.name < b.name; });
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::map<std::string, std::string> metadata;
  std::vector<Tensor> tensors;
  try {
    tensors = parse_safetensors(std::span<const std::uint8_t>(data, size), "fuzz.safetensors", &metadata);
  } catch (const InputError&) {
    return 0;
  }
  for (const Tensor& t : tensors) {
    validate(t);  // throws (and so aborts here) if the reader let an inconsistent tensor through
    if (t.numel() > 0) (void)t.value(t.numel() - 1);
  }
  const std::vector<std::uint8_t> bytes = serialize_safetensors(tensors, metadata);
  std::map<std::string, std::string> metadata2;
  std::vector<Tensor> back = parse_safetensors(bytes, "roundtrip.safetensors", &metadata2);
  sort_by_name(tensors);
  sort_by_name(back);
  if (back != tensors || metadata2 != metadata) std::abort();
  if (serialize_safetensors(back, metadata2) != bytes) std::abort();  // deterministic
  return 0;
}
