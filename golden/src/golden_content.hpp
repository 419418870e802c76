// What a golden set (or one shard of it) holds before it is written: the tensors and the facts its
// manifest records. One writer for it (write_golden_content) serves `golden` and `merge`, so a merged
// set is the bytes a single run writes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/golden/atomic_output.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/golden/tensor.hpp"

namespace ropecheck::golden::detail {

struct GoldenContent {
  EncodingSpec spec;
  std::string positions_argument;
  std::int64_t min_pos = 0, max_pos = 0;  // over the tokens held
  std::int64_t seq_len = 0;               // RoPE: what the frequencies were resolved with
  std::string attention_factor;           // RoPE: as the manifest writes it
  std::uint64_t seed = 0;
  int heads = 0;                          // 0 for sinusoidal sets
  std::vector<DType> dtypes;              // f64 first
  std::vector<Tensor> inputs;             // positions (+ q, k)
  std::vector<std::vector<Tensor>> outputs;  // per dtype: cos, sin, q_rot, k_rot, or pe
  std::int64_t fast_values = 0, fallback_values = 0;
  nlohmann::json shard;                   // null for a whole set; else {"index", "count", "first_token", "set_tokens"}
};

// Writes the files and manifest.json into folder.tmp() (not committed); returns the manifest.
nlohmann::json write_golden_content(const OutputFolder& folder, const GoldenContent& c, FileFormat format);

}  // namespace ropecheck::golden::detail
