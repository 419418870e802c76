// A tensor file read by its extension: .safetensors, .npz (every member) or .npy (one tensor named after
// the file's stem). The one reader of files a user hands in (`check --candidate`).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ropecheck/io/tensor.hpp"
#include "ropecheck/io/tensor_reader.hpp"

namespace ropecheck::io {

// InputError "OPTION PATH: ..." for a missing or irregular file, an unknown extension, or a file its
// reader refuses. `max_member_bytes`: an .npz member declaring more bytes is refused before it is inflated.
std::vector<Tensor> read_tensor_file(const std::filesystem::path& path, const std::string& option,
                                     std::uint64_t max_member_bytes = UINT64_MAX);

// The same file opened to be read in pieces (tensor_reader.hpp), with the same messages.
std::unique_ptr<TensorReader> open_tensor_file(const std::filesystem::path& path, const std::string& option,
                                               std::uint64_t max_member_bytes = UINT64_MAX);

}  // namespace ropecheck::io
