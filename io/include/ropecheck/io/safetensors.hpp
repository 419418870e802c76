// safetensors files (https://github.com/huggingface/safetensors), read and written in memory.
//
// Reading follows the reference reader (the Rust crate's read_metadata / Metadata::validate) and
// is hardened against hostile input: every length and offset is checked (with checked
// multiplication) before it is used, nothing is read out of bounds and nothing is allocated from a
// declared size before that size is checked against the file. A file is rejected with
// InputError ("<file>: <problem>", one line) when:
//   - it is shorter than 8 bytes; the header length is above 100,000,000 or runs past the end;
//   - the header is not UTF-8, starts with a byte-order mark, is not JSON, is not a JSON object,
//     has a key twice (a duplicate tensor name, or a duplicate key anywhere else), or has a wrong
//     type (a tensor entry not an object; dtype not a string; shape not an array of non-negative
//     integers; data_offsets not two non-negative integers; __metadata__ not string -> string);
//   - a dtype is unknown, or known to safetensors but not one of TensorDType ("unsupported dtype");
//   - after sorting by data_offsets, the first tensor does not begin at 0, a tensor does not begin
//     where the previous one ended (gap or overlap), or END < BEGIN;
//   - the shape overflows 64 bits, or END - BEGIN != numel * dtype size;
//   - the data section is shorter (out of bounds) or longer (trailing bytes) than the last END.
// Unknown keys inside a tensor entry are ignored, as the reference reader does. Tensors come back
// in file order (ascending data_offsets).
//
// Writing copies the reference writer's layout: tensors sorted by descending dtype alignment
// (I64, F64, F32, I32, BF16, F16: the crate's Dtype order) then by name (bytewise), laid out back
// to back so that every tensor is naturally aligned; header JSON compact, "__metadata__" first
// (omitted when empty) with its keys sorted, then the tensors in layout order, each as
// {"dtype":..,"shape":[..],"data_offsets":[b,e]}; padded with spaces to a multiple of 8. The
// bytes equal those of safetensors' own serialize() whenever the metadata has at most one key
// (the crate writes metadata in HashMap order).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ropecheck/io/tensor.hpp"

namespace ropecheck::io {

// `what` names the source (a file name) in messages. When `metadata` is given it receives the
// header's __metadata__ (cleared first; empty when there is none; untouched beyond the clearing
// when the file is rejected).
std::vector<Tensor> parse_safetensors(std::span<const std::uint8_t> bytes, std::string_view what,
                                      std::map<std::string, std::string>* metadata = nullptr);
std::vector<Tensor> read_safetensors(const std::filesystem::path& path,
                                     std::map<std::string, std::string>* metadata = nullptr);

// Throws InputError for an inconsistent tensor (validate()), a duplicate name, the name
// "__metadata__", or a name / metadata string that is not valid UTF-8.
std::vector<std::uint8_t> serialize_safetensors(const std::vector<Tensor>& tensors,
                                                const std::map<std::string, std::string>& metadata);

}  // namespace ropecheck::io
