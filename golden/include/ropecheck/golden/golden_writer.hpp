// Writes a golden set (golden/GOLDEN_FORMAT.md): inputs from the portable generator, outputs
// correctly rounded once from the exact reference to each dtype, a manifest with hashes, all
// written under a temporary name and renamed into place.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/core/positions.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/kv_cache.hpp"
#include "ropecheck/core/shard.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/io/tensor.hpp"

namespace ropecheck::golden {


struct GoldenOptions {
  EncodingSpec spec;
  PositionSet positions;
  std::vector<DType> dtypes = {DType::f32, DType::f16, DType::bf16};  // f64 is always added
  int heads = 1;
  std::uint64_t seed = 0;
  io::FileFormat format = io::FileFormat::safetensors;
  std::filesystem::path out;
  std::optional<std::int64_t> seq_len;  // default: max position + 1
  int threads = 0;                      // 0: hardware concurrency
  bool overwrite = false;               // replace an existing OUT
  // Tokens computed and written at a time (0: about 32 MiB of output); the bytes are the same for any value.
  std::int64_t block_tokens = 0;
  std::optional<Shard> shard;           // write only this shard (format "ropecheck-golden-shard"; `merge` joins them)
  // With shard: write its tokens straight into the set at `out`, shared with the other shards
  // (golden_shared.hpp); `merge --shared` finishes it.
  bool shared_out = false;
  std::uint64_t max_memory = 0;         // refuse requests estimated above this (0: the machine's memory)
  // RoPE, whole sets only: also write the correctly rounded attention scores of these (query, key) pairs
  // (attention/pairs.hpp's grammar) for one head group: the query heads of token 0's q and head 0 of its
  // k (GOLDEN_FORMAT.md, "Attention scores"). Empty: none, and the set is byte-identical to one without.
  std::string scores;
  // RoPE, whole sets only: also write the correctly rounded attention outputs of this block of tokens
  // (attention/pairs.hpp's parse_block: causal:S:N[:W] or full:S:N) for the same head group, its values
  // from the generator's stream v (GOLDEN_FORMAT.md, "Attention blocks"). Empty: none.
  std::string attention;
  std::optional<double> softcap;  // --scores / --attention: Gemma 2's logit soft-cap
  bool sinks = false;             // --attention: one sink logit per query head, from the generator (gpt-oss)
  // RoPE, whole sets only: the set's tokens are this batch's appended tokens (positions must be
  // kv::positions of it), and a file "kv_cache" carries the cache's metadata and the values v appended
  // (GOLDEN_FORMAT.md, "KV-cache writes"). nullopt: none, and the set is byte-identical to one without.
  std::optional<kv::CacheSpec> kv_cache;
  // RoPE, whole sets only: also write these quantized stores of q_rot and k_rot, comma-separated
  // (core/quantized_store_spec.hpp's parse_store; GOLDEN_FORMAT.md, "Quantized stores"). Empty: none.
  std::string stores;
  // Called now and then from the calling thread with (tokens done, tokens total).
  std::function<void(std::int64_t, std::int64_t)> progress;
};

struct GoldenSummary {
  nlohmann::json manifest;  // with shared_out: the shard's completion record

  std::int64_t fast_values = 0;
  std::int64_t fallback_values = 0;
  double compute_seconds = 0;
  double write_seconds = 0;
};

// Throws SpecError / InputError (unusable input, OUT exists without overwrite) before writing
// anything, and cleans up its temporary folder on any failure.
GoldenSummary write_golden_set(const GoldenOptions& options);


}  // namespace ropecheck::golden
