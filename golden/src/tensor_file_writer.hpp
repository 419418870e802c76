// Writes one tensor file (safetensors or a STORED .npz) piece by piece, without holding its data:
// the layout follows from the tensors' names, dtypes and shapes (tensor_io_detail.hpp), every piece
// goes to its offset, and finish() completes the file (.npz: CRC-32s, local headers, central
// directory) and hashes it. The bytes equal serialize_safetensors / serialize_npz of the same tensors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "ropecheck/golden/golden_writer.hpp"
#include "tensor_io_detail.hpp"

namespace ropecheck::golden::detail {

class TensorFileWriter {
 public:
  // Creates `path` (truncating it). `error_context` starts every error message (e.g. "--out DIR").
  TensorFileWriter(std::filesystem::path path, std::vector<TensorInfo> tensors, FileFormat format,
                   const std::map<std::string, std::string>& metadata, std::string error_context);
  ~TensorFileWriter();
  TensorFileWriter(const TensorFileWriter&) = delete;
  TensorFileWriter& operator=(const TensorFileWriter&) = delete;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // Writes bytes [at, at + size) of tensor i's data. Thread-safe for disjoint ranges.
  void write(std::size_t tensor, std::uint64_t at, std::span<const std::uint8_t> bytes) const;

  struct Finished {
    std::uint64_t bytes = 0;
    std::string sha256;
  };
  // Completes and closes the file; SpecError when a tensor was not written in full.
  Finished finish();

 private:
  void pwrite_all(std::uint64_t offset, std::span<const std::uint8_t> bytes) const;
  std::filesystem::path path_;
  std::vector<TensorInfo> tensors_;
  FileFormat format_;
  std::string context_;
  int fd_ = -1;
  std::vector<std::uint64_t> data_offset_;  // per tensor: where its data start in the file
  std::uint64_t end_ = 0;                   // end of the data (npz: where the central directory goes)
  std::vector<ZipRecord> zip_;              // npz: members in file order, CRCs filled by finish()
  std::vector<std::size_t> zip_tensor_;     // npz: the tensor of each member
  std::vector<std::uint64_t> npy_header_bytes_;
  mutable std::vector<std::uint64_t> written_;  // bytes written per tensor
};

}  // namespace ropecheck::golden::detail
