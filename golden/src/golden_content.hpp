// The files of a golden set (or one shard of it) while they are written, and its manifest. One
// implementation serves `golden` and `merge`, so a merged set is the bytes a single run writes.
// Tensors are written piece by piece (tensor_file_writer.hpp): neither holds a whole set in memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/golden/atomic_output.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "tensor_file_writer.hpp"

namespace ropecheck::golden::detail {

// What the manifest records besides the files and tensors.
struct GoldenMeta {
  std::string positions_argument;
  std::int64_t min_pos = 0, max_pos = 0;  // over the tokens held
  std::int64_t seq_len = 0;               // RoPE: what the frequencies were resolved with
  std::string attention_factor;           // RoPE: as the manifest writes it
  std::uint64_t seed = 0;
  std::int64_t fast_values = 0, fallback_values = 0;
  nlohmann::json shard;  // null for a whole set; else {"index", "count", "first_token", "set_tokens"}
};

class GoldenFiles {
 public:
  // Creates the files in folder.tmp(): group 0 is the inputs file (positions, then q, k for RoPE),
  // group 1 + d the outputs of dtypes[d] (cos, sin, q_rot, k_rot; or pe), all with `tokens` tokens.
  // With open_writers false the files are written by the caller (layout(), path()), which hands their
  // size and hash to set_finished() before finish().
  GoldenFiles(const OutputFolder& folder, const EncodingSpec& spec, std::int64_t tokens, int heads,
              std::vector<DType> dtypes, FileFormat format, bool open_writers = true);
  const TensorFileWriter& group(std::size_t g) const { return *writers_.at(g); }
  std::size_t groups() const { return layout_.size(); }
  const std::vector<TensorInfo>& layout(std::size_t g) const { return layout_.at(g); }
  std::filesystem::path path(std::size_t g) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  void set_finished(std::size_t g, TensorFileWriter::Finished f) { finished_.at(g) = std::move(f); }
  // Completes every file, then writes manifest.json (not committed); returns the manifest.
  nlohmann::json finish(const GoldenMeta& meta);

 private:
  const OutputFolder& folder_;
  EncodingSpec spec_;
  int heads_;
  std::vector<DType> dtypes_;
  FileFormat format_;
  std::map<std::string, std::string> metadata_;
  std::vector<std::string> names_;
  std::vector<std::vector<TensorInfo>> layout_;
  std::vector<std::unique_ptr<TensorFileWriter>> writers_;
  std::vector<TensorFileWriter::Finished> finished_;
};

}  // namespace ropecheck::golden::detail
