// Shards that write into one shared golden set, for shards that share a filesystem (GNU parallel,
// a Slurm array on a shared filesystem, a Kubernetes Job with a shared volume):
// `golden --shard I/N --shared-out DIR` writes its tokens straight into the set's files in the staging
// folder DIR.staging/ (golden/GOLDEN_FORMAT.md, "Shared shards"), and `merge --shared DIR` checks that
// every shard finished, hashes the files and moves them to DIR. Nothing is copied: the merge reads the
// set once. The result is byte for byte what one run writes.
//
// DIR.staging/ holds run.json (the run's identity, published by the first shard; a shard of another
// run refuses the folder before it computes anything), set/ (the set's files at full size; every
// shard writes the same headers and its own ranges at their final offsets) and one completion record
// shard-I-of-N.json per shard, written once its bytes are on the disk (fdatasync).
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

#include "ropecheck/core/shard.hpp"

namespace ropecheck::golden {

// DIR.staging, absolute. SpecError naming `option` when `out` names no folder of its own ("/", ".").
std::filesystem::path shared_staging_folder(const std::filesystem::path& out, const std::string& option);

// For shard `shard` of the run `identity` (detail::run_identity): refuses an existing `out` unless
// `overwrite`, creates the staging folder or joins it (SpecError naming the first difference when it
// belongs to another run), and removes this shard's old completion record. Returns the folder of the
// set's files. A shard that creates set/ removes completion records left from an earlier set.
std::filesystem::path join_shared_staging(const std::filesystem::path& out, const nlohmann::json& identity,
                                          const Shard& shard, bool overwrite);

// Writes shard `shard`'s completion record durably (temporary file, fsync, rename, fsync of the folder).
void write_shard_record(const std::filesystem::path& out, const Shard& shard, const nlohmann::json& record);

// The completion record's file name: shard-I-of-N.json.
std::string shard_record_name(const Shard& shard);

struct SharedMergeOptions {
  std::filesystem::path out;  // DIR: the staging folder is DIR.staging
  bool overwrite = false;     // replace an existing DIR (one atomic exchange)
};

// `merge --shared DIR`: refuses (SpecError, one line, nothing changed) an existing DIR without
// overwrite, a missing staging folder, missing shards (no record: not run, still running or killed),
// a record of another run, a shard recorded twice; else hashes the set's files (in parallel), writes
// the manifest, moves set/ to DIR and removes the staging folder. Returns the manifest.
nlohmann::json finalize_shared_golden_set(const SharedMergeOptions& options);

}  // namespace ropecheck::golden
