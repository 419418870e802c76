// NumPy .npy and .npz files, read and written in memory.
//
// Writing (.npy): format version 1.0 with the header np.save writes, byte for byte:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// then the spaces np.save adds (room to grow the first axis), padded with spaces and a final
// '\n' so the data starts at a multiple of 64. descr: f64 '<f8', f32 '<f4', f16 '<f2', i64 '<i8',
// i32 '<i4', u32 '<u4', u8 '|u1', bf16 as '<u2' bit patterns (NumPy has no bfloat16; view them with
// ml_dtypes.bfloat16), and e4m3fn / e5m2 as '|u1' bit patterns (np.save writes ml_dtypes' FP8 arrays
// as '<V1'; the golden manifest names the type; they read back as u8).
//
// Writing (.npz): a ZIP archive of STORED members "<name>.npy", sorted by member name, with
// fixed timestamps (1980-01-01 00:00) and fixed attributes: the bytes depend on the tensors only.
// Zip64 records are used only where a size or offset needs them (members of 4 GiB and more).
//
// Reading (.npy) accepts versions 1.0, 2.0 and 3.0 and rejects with InputError
// ("<file>: <problem>", one line): a bad magic; another version; a header longer than 10,000
// bytes (NumPy's own limit) or running past the end; a header that is not exactly a Python dict
// literal with the keys 'descr', 'fortran_order' and 'shape' (each once; ASCII; no other keys;
// shape a tuple of non-negative decimal integers); fortran_order True; a big-endian ('>') or
// otherwise unsupported descr (accepted: '<f8', '<f4', '<f2', '<i8', '<i4', '|u1', '<u4', and '<u2', which
// is read as bf16 bit patterns when `u2_is_bf16`, else rejected); a shape whose size overflows;
// data shorter than prod(shape) * itemsize, or trailing bytes after it.
//
// Reading (.npz) uses libzip (strict consistency checks, CRC-32 verified) and rejects: anything
// libzip rejects; encrypted members; compression other than STORED or DEFLATE; a member name not
// ending in ".npy"; two members with the same name; declared sizes that cannot fit in the archive
// (checked before any allocation: STORED size == compressed size, compressed sizes summed over
// all members <= archive size, DEFLATE size <= 1032 x compressed size); data that does not match
// its declared size; and any member .npy error above. Tensors come back in archive order, named
// by the member name without ".npy".
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ropecheck/io/tensor.hpp"

namespace ropecheck::io {

// `name` becomes Tensor::name; `what` names the source in messages. `u2_is_bf16`: read '<u2'
// data as TensorDType::bf16 bit patterns (how this library writes bf16); when false, '<u2' is
// rejected as unsupported (TensorDType has no uint16).
Tensor parse_npy(std::span<const std::uint8_t> bytes, std::string name, std::string_view what,
                 bool u2_is_bf16 = true);
// The tensor is named after the file stem ("q_rot.bf16.npy" -> "q_rot.bf16").
Tensor read_npy(const std::filesystem::path& path, bool u2_is_bf16 = true);
// Throws InputError for an inconsistent tensor (validate()). Tensor::name is not stored.
std::vector<std::uint8_t> serialize_npy(const Tensor& t);

// max_member_bytes: a member declaring more (uncompressed) bytes is refused before it is inflated
// (`check` passes what the golden set allows, so a 3 MB file cannot inflate to gigabytes).
std::vector<Tensor> parse_npz(std::span<const std::uint8_t> bytes, std::string_view what, bool u2_is_bf16 = true,
                              std::uint64_t max_member_bytes = UINT64_MAX);
std::vector<Tensor> read_npz(const std::filesystem::path& path, bool u2_is_bf16 = true,
                             std::uint64_t max_member_bytes = UINT64_MAX);
// Throws InputError for an inconsistent tensor or duplicate names.
std::vector<std::uint8_t> serialize_npz(const std::vector<Tensor>& tensors);

}  // namespace ropecheck::io
