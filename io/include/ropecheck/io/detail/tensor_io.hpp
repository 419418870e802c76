// Private helpers shared by the tensor file readers and writers (not installed, not public).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ropecheck/core/input_error.hpp"
#include "ropecheck/core/one_line.hpp"
#include "ropecheck/io/tensor.hpp"

namespace ropecheck::io::detail {

// Throws InputError("<what>: <problem>") (input_error.hpp).
[[noreturn]] void fail(std::string_view what, const std::string& problem);

std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b);

// numel * element_size of a shape, or nullopt when a dimension is negative or the product,
// taken left to right, leaves int64 at any step. The one rule of "shape overflows" used by
// validate() and by every reader, so whatever a reader accepts is a valid Tensor.
std::optional<std::uint64_t> checked_byte_size(const std::vector<std::int64_t>& shape, std::size_t element_size);

// Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF), as Rust's str::from_utf8.
bool is_valid_utf8(std::string_view s);

// Reads a whole regular file; InputError naming the file if it cannot be opened or read.
std::vector<std::uint8_t> read_file(const std::filesystem::path& p);

// Little-endian loads and stores.
inline std::uint16_t load_u16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
inline std::uint32_t load_u32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}
inline std::uint64_t load_u64(const std::uint8_t* p) {
  return static_cast<std::uint64_t>(load_u32(p)) | (static_cast<std::uint64_t>(load_u32(p + 4)) << 32);
}
inline void put_u16(std::vector<std::uint8_t>& out, std::uint16_t v) {
  out.push_back(static_cast<std::uint8_t>(v & 0xFFu));
  out.push_back(static_cast<std::uint8_t>(v >> 8));
}
inline void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>((v >> (8 * i)) & 0xFFu));
}
inline void put_u64(std::vector<std::uint8_t>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>((v >> (8 * i)) & 0xFFu));
}

// One member of a ZIP archive to write.
struct ZipMember {
  std::string name;                   // stored as is; flagged UTF-8 when not ASCII
  std::span<const std::uint8_t> data;  // stored uncompressed
};
// A ZIP archive with every member STORED, in the given order, with fixed timestamps
// (1980-01-01 00:00), so the bytes depend on the members only. Zip64 records are written where
// a size, offset or count needs them, or everywhere when `force_zip64` (for tests).
std::vector<std::uint8_t> write_zip_stored(const std::vector<ZipMember>& members, bool force_zip64 = false);

// What a tensor file's layout depends on: a tensor without its data.
struct TensorInfo {
  std::string name;
  TensorDType dtype = TensorDType::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t data_bytes() const;  // InputError when the shape overflows
};

// A tensor of a file and where its data lie: `bytes` bytes from `offset` (from the file's start; for a
// .npy inside an .npz, from the member's start).
struct TensorSpan {
  TensorInfo info;
  std::uint64_t offset = 0, bytes = 0;
};

// The tensors of a safetensors file, validated as parse_safetensors validates them (the same
// InputErrors), in file order; only the header is read from `bytes` (the whole file).
std::vector<TensorSpan> safetensors_layout(std::span<const std::uint8_t> bytes, std::string_view what,
                                           std::map<std::string, std::string>* metadata = nullptr);

// A .npy's dtype, shape and data, validated as parse_npy validates them: `bytes` holds at least the first
// min(size, kNpyHeadBytes) bytes of the `size`-byte file (all its header), so a .npy can be validated from
// its first bytes before the rest is read.
inline constexpr std::size_t kNpyHeadBytes = 12 + 10000;
struct NpyLayout {
  TensorDType dtype = TensorDType::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0, bytes = 0;  // the data
};
NpyLayout npy_layout(std::span<const std::uint8_t> bytes, std::uint64_t size, std::string_view what, bool u2_is_bf16);

// The safetensors header (8-byte length, JSON, padding) for these tensors, and the order their data
// follow it in (indices into `tensors`). Validates names and metadata as serialize_safetensors does.
struct SafetensorsHeader {
  std::vector<std::uint8_t> bytes;
  std::vector<std::size_t> order;
};
SafetensorsHeader safetensors_header(const std::vector<TensorInfo>& tensors,
                                     const std::map<std::string, std::string>& metadata);

// The .npy (version 1.0) header of a tensor: magic to the closing '\n'; the data follow it.
std::vector<std::uint8_t> npy_header(const TensorInfo& t);

// One STORED member's local header (with its zip64 extra field when needed), and the central
// directory + end records of an archive, as write_zip_stored writes them.
struct ZipRecord {
  std::string name;
  std::uint64_t size = 0;    // member bytes
  std::uint64_t offset = 0;  // of its local header
  std::uint32_t crc = 0;
};
bool zip_member_needs_zip64(std::uint64_t size, std::uint64_t offset, bool force_zip64);
std::vector<std::uint8_t> zip_local_header(const ZipRecord& r, bool force_zip64);
std::vector<std::uint8_t> zip_central_directory(const std::vector<ZipRecord>& records, std::uint64_t cd_offset,
                                                bool force_zip64);

}  // namespace ropecheck::io::detail
