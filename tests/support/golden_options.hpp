// A small golden set's options for the golden tests (test_golden_shard, test_golden_shared): one
// dtype (bf16), 2 heads, seed 3, one thread, so that a sharded run and one run of the same options
// can be compared byte for byte in a few seconds.
#pragma once

#include <filesystem>
#include <string>

#include "ropecheck/golden/golden_set.hpp"
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

// A small llama-3.1-8b set with quantized stores (golden --stores `stores`), f32, 2 heads, written under
// `out` and loaded: the store tests' fixture. block_tokens 0: the writer's default.
inline golden::GoldenSet store_golden_set(const std::string& positions, std::uint64_t seed, const std::string& stores,
                                          const std::filesystem::path& out, std::int64_t block_tokens = 0) {
  golden::GoldenOptions o = small_golden_options("llama-3.1-8b", positions, out);
  o.dtypes = {DType::f32};
  o.seed = seed;
  o.threads = 2;
  o.stores = stores;
  o.block_tokens = block_tokens;
  golden::write_golden_set(o);
  return golden::load_golden_set(out);
}

}  // namespace ropecheck::testing_support
