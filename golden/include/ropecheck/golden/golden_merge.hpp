// Joining the shards of a golden set (`golden --shard I/N`, `ropecheck merge`): the shards'
// tensors are concatenated along the token axis and written by the same code as a single run, so
// the merged folder is byte for byte what `golden` without --shard writes (manifest included).
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

namespace ropecheck::golden {

struct GoldenMergeOptions {
  std::vector<std::filesystem::path> parts;  // shard folders, any order
  std::filesystem::path out;
  bool overwrite = false;
  std::uint64_t max_memory = 0;  // 0: the machine's
};

// Returns the merged manifest. Every part is read with the golden-set reader's checks (hashes,
// the spec's sample). SpecError / InputError (one line, naming the parts) before anything is
// written when a part is not a shard, the parts come from different runs (spec, positions,
// generator, dtypes, file format, ropecheck version, N), a shard is given twice or is missing.
nlohmann::json merge_golden_shards(const GoldenMergeOptions& options);

}  // namespace ropecheck::golden
