// The files of a golden set (or one shard of it) while they are written, and its manifest. One
// implementation serves `golden` and `merge`, so a merged set is the bytes a single run writes.
// Tensors are written piece by piece (tensor_file_writer.hpp): neither holds a whole set in memory.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/io/atomic_output.hpp"
#include "ropecheck/io/described_file.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/io/tensor_file_writer.hpp"

namespace ropecheck::golden::detail {
using namespace ropecheck::io;  // tensors and files are this module's material
using namespace ropecheck::io::detail;  // the tensor files\' layout and writer

// What the manifest records besides the files and tensors.
struct GoldenMeta {
  std::string positions_argument;
  std::int64_t min_pos = 0, max_pos = 0;  // over the tokens held
  std::int64_t seq_len = 0;               // RoPE: what the frequencies were resolved with
  std::string attention_factor;           // RoPE: as the manifest writes it
  std::uint64_t seed = 0;
  std::int64_t fast_values = 0, fallback_values = 0;
  nlohmann::json shard;  // null for a whole set; else {"index", "count", "first_token", "set_tokens"}
  nlohmann::json attached = nlohmann::json::object();  // key: an attached file's record (--scores, --attention)
};

// How GoldenFiles opens its files.
enum class FilesMode {
  create,         // new files, written by this process (TensorFileWriter::Mode::create)
  caller_writes,  // none opened: the caller writes them (layout(), path()) and calls set_finished()
  shared_write,   // the full set's files, shared by the shards that write into them
  shared_finish,  // the full set's files, all written: finish() completes and hashes them
};

class GoldenFiles {
 public:
  // The files in folder `dir`: group 0 is the inputs file (positions, then q, k for RoPE), group 1 + d
  // the outputs of dtypes[d] (cos, sin, q_rot, k_rot; or pe), all with `tokens` tokens; then group
  // 1 + dtypes.size() + f the attached file f (--scores, --attention: computed by attention/, not per
  // token). `context` starts error messages ("--out DIR").
  GoldenFiles(std::filesystem::path dir, std::string context, const EncodingSpec& spec, std::int64_t tokens, int heads,
              std::vector<DType> dtypes, FileFormat format, FilesMode mode = FilesMode::create,
              std::span<const DescribedFile> attached = {});
  const TensorFileWriter& group(std::size_t g) const { return *writers_.at(g); }
  TensorFileWriter& group(std::size_t g) { return *writers_.at(g); }
  const std::string& file_name(std::size_t g) const { return names_.at(g); }
  std::size_t groups() const { return layout_.size(); }
  const std::vector<TensorInfo>& layout(std::size_t g) const { return layout_.at(g); }
  std::filesystem::path path(std::size_t g) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  void set_finished(std::size_t g, TensorFileWriter::Finished f) { finished_.at(g) = std::move(f); }
  // Writes the attached files' tensors (those given to the constructor).
  void write_attached(std::span<const DescribedFile> attached);
  // Completes every file (hashing them in parallel) and returns the manifest; the caller writes it.
  nlohmann::json finish(const GoldenMeta& meta);
  // The manifest of these files with `files` as its file list.
  nlohmann::json manifest(const GoldenMeta& meta, nlohmann::json files) const;

 private:
  std::filesystem::path dir_;
  EncodingSpec spec_;
  int heads_;
  std::vector<DType> dtypes_;
  struct Attached {
    std::string role;
    std::vector<std::string> meanings;  // per tensor
  };
  std::vector<Attached> attached_;  // the last groups
  FileFormat format_;
  std::map<std::string, std::string> metadata_;
  std::vector<std::string> names_;
  std::vector<std::vector<TensorInfo>> layout_;
  std::vector<std::unique_ptr<TensorFileWriter>> writers_;
  std::vector<TensorFileWriter::Finished> finished_;
};

// What every shard of one run shares: its manifest without what differs between shards (the files,
// the tokens held and the counts of the rounding paths), with N and the file format.
nlohmann::json run_identity(nlohmann::json manifest, int shard_count, const std::string& file_format);

// The first key in which two run identities differ, the run's definition before its consequences.
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b);
// That key quoted, with both values when they are plain ("'seq_len' (8 vs 16)"), for messages.
std::string quoted_difference(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace ropecheck::golden::detail
