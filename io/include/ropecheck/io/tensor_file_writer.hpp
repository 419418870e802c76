// Writes one tensor file (safetensors or a STORED .npz) piece by piece, without holding its data:
// the layout follows from the tensors' names, dtypes and shapes (tensor_io_detail.hpp), every piece
// goes to its offset, and finish() completes the file (.npz: CRC-32s, local headers, central
// directory) and hashes it. The bytes equal serialize_safetensors / serialize_npz of the same tensors.
// Several processes may write one file together (`golden --shard I/N --shared-out`): each opens it in
// Mode::shared_write, writes the same header bytes and its own ranges, and keeps the CRC-32 of what it
// wrote (.npz local headers need the members' CRCs); `merge --shared` opens it in Mode::shared_finish,
// hands in the members' CRCs combined from the shards' records, and finish() completes and hashes it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "ropecheck/io/detail/tensor_io.hpp"

namespace ropecheck::io::detail {

// CRC-32 (zlib) of bytes [offset, offset + bytes) of one tensor's data.
struct CrcRange {
  std::uint64_t offset = 0, bytes = 0;
  std::uint32_t crc = 0;
  friend bool operator==(const CrcRange&, const CrcRange&) = default;
};

// The CRC-32 of a tensor's whole data from ranges that tile [0, data_bytes) (in any order); nullopt
// when they do not tile it exactly.
std::optional<std::uint32_t> combine_crc_ranges(std::vector<CrcRange> ranges, std::uint64_t data_bytes);

class TensorFileWriter {
 public:
  enum class Mode {
    create,         // a new file (truncated), written by this writer alone
    shared_write,   // created at its full size if absent (idempotent), else opened; this writer writes some ranges
    shared_finish,  // an existing full-size file whose data are written: finish() completes it
  };
  // Opens `path` as `mode` says. `error_context` starts every error message (e.g. "--out DIR").
  TensorFileWriter(std::filesystem::path path, std::vector<TensorInfo> tensors, FileFormat format,
                   const std::map<std::string, std::string>& metadata, std::string error_context,
                   Mode mode = Mode::create);
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

  // shared_write, .npz: the CRC-32 of the ranges written, per tensor (adjacent writes joined).
  std::vector<std::vector<CrcRange>> written_crcs() const;
  // shared_write: flushes this writer's bytes to the disk (fdatasync) before its shard is recorded.
  void sync() const;
  // shared_finish, .npz: the CRC-32 of tensor i's whole data, for its member's local header.
  void set_data_crc(std::size_t tensor, std::uint32_t crc) { data_crc_.at(tensor) = crc; }

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
  Mode mode_;
  mutable std::mutex crc_mutex_;
  mutable std::vector<std::vector<CrcRange>> crcs_;  // shared_write, .npz: per tensor
  std::vector<std::optional<std::uint32_t>> data_crc_;  // shared_finish, .npz: per tensor
};

// finish() of every writer (golden's files of a set), one file per thread on up to hardware-concurrency
// threads, the largest file first; the results in the writers' order. The first exception a writer
// threw is rethrown once every thread has stopped.
std::vector<TensorFileWriter::Finished> finish_in_parallel(const std::vector<TensorFileWriter*>& writers);

}  // namespace ropecheck::io::detail
