// A small golden set's options for the golden tests (test_golden_shard, test_golden_shared): one
// dtype (bf16), 2 heads, seed 3, one thread, so that a sharded run and one run of the same options
// can be compared byte for byte in a few seconds.
#pragma once

#include <filesystem>
#include <string>

#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/reference/presets.hpp"

namespace ropecheck::testing_support {

inline golden::GoldenOptions small_golden_options(const std::string& preset, const std::string& positions,
                                                  const std::filesystem::path& out) {
  golden::GoldenOptions o;
  o.spec = load_preset(preset);
  o.positions = parse_positions(positions);
  o.out = out;
  o.dtypes = {DType::bf16};
  o.heads = 2;
  o.seed = 3;
  o.threads = 1;
  return o;
}

}  // namespace ropecheck::testing_support
