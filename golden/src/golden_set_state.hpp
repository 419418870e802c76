// What a loaded golden set holds (golden_set.hpp): shared by the reader of the manifest
// (golden_set_reader.cpp) and the readers of its data in pieces (golden_set_rows.cpp). Private to golden/.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/io/tensor_reader.hpp"

namespace ropecheck::golden {

namespace detail {
// What a manifest declares, read and validated phase by phase (golden_set_reader.cpp's ManifestReader).
struct ManifestContents {
  std::filesystem::path dir;
  nlohmann::json manifest;
  EncodingSpec spec;
  std::optional<std::int64_t> seq_len;
  double attention_factor = 1;
  std::string attention_factor_text = "1";
  std::int64_t tokens = 0;
  std::optional<GoldenShardInfo> shard;
  int streams = 1;
  int heads = 0;
  std::vector<std::string> dtypes;
  std::vector<ManifestFile> files;
  std::vector<ManifestTensor> tensors;
  std::map<std::string, std::size_t, std::less<>> by_name;  // index into tensors

  const ManifestTensor* find(std::string_view name) const {  // nullptr when not listed
    const auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : &tensors[it->second];
  }
};
}  // namespace detail

struct GoldenSet::State : detail::ManifestContents {
  std::mutex mutex;  // guards everything below
  std::set<std::string> loaded_files;
  std::map<std::string, io::Tensor, std::less<>> loaded;
  std::optional<std::vector<Position>> positions;

  std::mutex reader_mutex;  // guards readers
  std::map<std::string, std::unique_ptr<io::TensorReader>, std::less<>> readers;  // by file name
  std::set<std::string, std::less<>> viewed;  // files whose hashes tensor_bytes checked through their mapping
};

}  // namespace ropecheck::golden
