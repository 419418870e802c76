// A tensor file read in pieces, so that a check holds no whole tensor: its tensors' names, dtypes and
// shapes, validated when it is opened as the whole-file readers (safetensors.hpp, npy.hpp) validate them,
// with the same one-line InputErrors; then the bytes of any range of a tensor's elements on demand.
//
// Safetensors and .npy files are mapped (mapped_file.hpp): a range is a view into the mapping, read
// from any thread in any order, and release() drops its pages from the process afterwards. An .npz's
// members go through libzip into the caller's buffer (a member may be compressed); its CRC-32 is checked
// when a member is read to its end, as parse_npz checks it; ranges of one .npz are read one at a time
// (a lock), cheapest in increasing order (a stored member seeks, a compressed one inflates from its start
// when asked for an earlier range).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ropecheck/io/mapped_file.hpp"
#include "ropecheck/io/tensor.hpp"

namespace ropecheck::io {

struct TensorReaderOptions {
  bool u2_is_bf16 = true;                        // npy.hpp
  std::uint64_t max_member_bytes = UINT64_MAX;  // .npz members declaring more are refused (npy.hpp)
};

class TensorReader {
 public:
  struct Entry {
    std::string name;
    TensorDType dtype = TensorDType::f32;
    std::vector<std::int64_t> shape;
    std::int64_t numel = 1;
  };

  // By the extension, as read_tensor_file: .safetensors, .npz, or .npy (one tensor named after the file's
  // stem). `what` names the file in messages (read_tensor_file's messages name it by its path).
  // InputError for a file that cannot be read or whose layout its reader refuses.
  static std::unique_ptr<TensorReader> open(const std::filesystem::path& path, const std::string& what,
                                            const TensorReaderOptions& options = {});
  ~TensorReader();

  const std::vector<Entry>& tensors() const;  // file order (as the whole-file readers return them)
  std::optional<std::size_t> find(std::string_view name) const;
  bool mapped() const;  // ranges are views into the mapped file (else: read into the caller's buffer)

  // The bytes of elements [e0, e1) of tensor i (flat, row-major): a view into the mapping (its pages
  // mapped at once: populate()), or `buffer` filled. InputError for a member whose data libzip refuses (a bad CRC, truncated deflate data).
  std::span<const std::uint8_t> elements(std::size_t i, std::int64_t e0, std::int64_t e1,
                                         std::vector<std::uint8_t>& buffer) const;
  // Maps the pages of elements [e0, e1) of tensor i at once (MappedFile::populate; nothing for an .npz).
  void populate(std::size_t i, std::int64_t e0, std::int64_t e1) const;
  // Drops the mapped pages of elements [e0, e1) of tensor i from the process (nothing for an .npz).
  void release(std::size_t i, std::int64_t e0, std::int64_t e1) const;
  // The file's bytes, mapped (what a hash of the whole file reads).
  const MappedFile& file() const;

 private:
  TensorReader();
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace ropecheck::io
