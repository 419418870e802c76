// Reading a golden set (golden/GOLDEN_FORMAT.md): the manifest, verified against every file's
// SHA-256 and size, and the tensors it describes, loaded on first use.
//
// load_golden_set() rejects, with one-line InputError messages naming the folder / file / tensor:
//   - a folder without manifest.json ("no manifest.json: not a golden set, or an interrupted write");
//   - a shard of a set (format "ropecheck-golden-shard") unless options.allow_shard;
//   - a manifest that is not JSON, not format "ropecheck-golden" version 1, or misses / mistypes a key
//     (files, tensors, spec, dtypes, positions, attention_factor ...), or whose spec is invalid;
//   - file names that are not plain names inside the folder (no '/', '\\', leading '.');
//   - a listed file that is missing, whose size differs from "bytes", or whose SHA-256 differs
//     ("manifest hash mismatch for FILE");
//   - a tensor entry naming a file that is not listed, an unknown dtype, a bad shape, a duplicate
//     name, or a missing required tensor (positions, q, k, and cos / sin / q_rot / k_rot for RoPE, pe
//     for sinusoidal specs, for f64 and every listed dtype), or shapes that disagree with the spec;
//   - a manifest whose spec (or attention_factor) does not reproduce a small fixed sample of the stored
//     f64 values, recomputed with the exact reference (an edited manifest.json; sample_check.hpp);
// and, when a file is first read: a file whose bytes no longer hash to the manifest's value, a
// tensor the manifest lists but the file lacks, a tensor whose dtype or shape differs from the
// manifest, or a tensor the file has but the manifest does not list.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/io/tensor.hpp"
#include "ropecheck/io/tensor_reader.hpp"
#include "ropecheck/core/shard.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::golden {

struct ManifestFile {
  std::string file;  // plain name inside the folder
  std::uint64_t bytes = 0;
  std::string sha256;  // 64 lowercase hex digits
};

struct ManifestTensor {
  std::string name;
  std::string file;
  io::TensorDType dtype = io::TensorDType::f32;
  std::vector<std::int64_t> shape;
  std::string role;     // "input", "output", "score" or "attention" (--scores / --attention files, not per token)
  std::string meaning;  // free text
  bool attention_factor_folded = false;
};

// A shard of a set (`golden --shard I/N`): tokens [first_token, first_token + tokens()) of set_tokens.
struct GoldenShardInfo {
  Shard shard;
  std::int64_t first_token = 0;
  std::int64_t set_tokens = 0;
};

struct GoldenLoadOptions {
  bool allow_shard = false;  // `merge` reads shards; everything else refuses them (they hold part of a set)
  // false: check the manifest and the files' sizes only, not their hashes nor the spec's sample (`merge`
  // hashes the parts while it copies them).
  bool verify_data = true;
  // false (with verify_data): leave the files' hashes to whoever reads the data, who hashes the files it
  // reads while it reads them (GoldenSet::verify_files) and waits for the hashes before it reports
  // anything, so that each byte is read once (the streaming check). The sample check still runs; when it
  // fails, the hashes of the files it read are checked first, so a changed file is named as such.
  bool hash_files = true;
};

class GoldenSet;

// Hashes of data files being computed (GoldenSet::verify_files).
class PendingHashes {
 public:
  PendingHashes();
  ~PendingHashes();  // waits for the hashers (a check that threw does not leave them running)
  PendingHashes(PendingHashes&&) noexcept;
  PendingHashes& operator=(PendingHashes&&) noexcept;
  // InputError "manifest hash mismatch for PATH" for the first file (in the order given) whose bytes do
  // not hash to the manifest's value. Call once.
  void wait();
  const std::vector<std::string>& files() const;  // what is hashed

 private:
  friend class GoldenSet;
  struct State;
  std::unique_ptr<State> s_;
};

class GoldenSet;
GoldenSet load_golden_set(const std::filesystem::path& dir, const GoldenLoadOptions& options = {});

class GoldenSet {
 public:
  GoldenSet();
  ~GoldenSet();
  GoldenSet(GoldenSet&&) noexcept;
  GoldenSet& operator=(GoldenSet&&) noexcept;
  GoldenSet(const GoldenSet&) = delete;
  GoldenSet& operator=(const GoldenSet&) = delete;

  const std::filesystem::path& dir() const;
  const nlohmann::json& manifest() const;
  const EncodingSpec& spec() const;
  bool is_rope() const { return spec().family == Family::rope; }
  // The sequence length the frequencies were resolved with (RoPE; nullopt for sinusoidal sets).
  std::optional<std::int64_t> seq_len() const;
  // The manifest's attention factor, nearest binary64 (1 for sinusoidal sets), and as written.
  double attention_factor() const;
  const std::string& attention_factor_text() const;
  std::int64_t tokens() const;  // tokens held (a shard's own)
  const std::optional<GoldenShardInfo>& shard() const;  // nullopt for a whole set
  int heads() const;  // q / k heads (0 for sinusoidal sets)
  // The dtypes the outputs are written in ("f64" first).
  const std::vector<std::string>& dtypes() const;
  const std::vector<ManifestFile>& files() const;
  const std::vector<ManifestTensor>& tensors() const;  // manifest order
  const ManifestTensor* find(std::string_view name) const;  // nullptr when not listed
  std::vector<std::string> output_names() const;           // role "output", manifest order

  // Every token's position (all three streams; equal streams for non-multimodal sets).
  const std::vector<Position>& positions() const;

  // The tensor (loading its file on first use through locate(), then checking the hash of what was
  // read; thread-safe). InputError when the manifest does not list it or its file fails the checks
  // above. The reference stays valid while the set lives.
  const io::Tensor& tensor(std::string_view name) const;

  // Reading in pieces (golden_set_rows.cpp), for the streaming check and anything that must not hold a
  // whole tensor. The file holding tensor `name`, opened once (thread-safe) for reading by ranges of
  // elements (io/tensor_reader.hpp: mapped for safetensors), with its tensors checked against the
  // manifest (the checks tensor() makes); not its hash: that is verify_files' (and tensor()'s).
  // InputError as tensor().
  struct TensorRef {
    const io::TensorReader* reader = nullptr;
    std::size_t index = 0;  // in reader->tensors()
    const ManifestFile* file = nullptr;
  };
  TensorRef locate(std::string_view name) const;
  // Element `index` of tensor `name` as a double (i64 / i32 exactly up to 2^53), read through locate().
  double value(std::string_view name, std::int64_t index) const;
  // The positions of tokens [t0, t1), read through locate("positions") (InputError past 2^53, as positions()).
  std::vector<Position> positions(std::int64_t t0, std::int64_t t1) const;
  // Tensor `name`'s bytes for a reader that keeps the set alive (Python's arrays): a view into its mapped
  // file where the format allows (safetensors), no copy, the file's hash checked through the mapping on
  // first use as tensor() checks it; otherwise tensor(name)'s data. InputError as tensor().
  std::span<const std::uint8_t> tensor_bytes(std::string_view name) const;
  // Starts hashing the data files `files` (manifest names, each once) through their mappings on up to
  // `threads` threads (0: hardware concurrency) while the caller reads them; wait() on the result.
  PendingHashes verify_files(const std::vector<std::string>& files, int threads) const;

 private:
  friend GoldenSet load_golden_set(const std::filesystem::path& dir, const GoldenLoadOptions& options);
  struct State;
  std::unique_ptr<State> s_;
};

// SHA-256 over the manifest's file names and hashes (sorted by name): the same for the same data files
// wherever the set lies, different when any input or output differs.
std::string golden_fingerprint(const GoldenSet& g);

}  // namespace ropecheck::golden
