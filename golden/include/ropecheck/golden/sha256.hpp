// SHA-256 of byte buffers and files (OpenSSL EVP), as lowercase hex: the hashes a golden set's
// manifest records for every file and that the reader verifies.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

namespace ropecheck::golden {

// 64 lowercase hex digits.
std::string sha256_hex(std::span<const std::uint8_t> bytes);

// Streams the file (constant memory). Throws TensorError ("cannot read 'FILE'") when it cannot be
// opened or read.
std::string sha256_file(const std::filesystem::path& path);

}  // namespace ropecheck::golden
