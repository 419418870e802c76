// SHA-256 of byte buffers and files (OpenSSL EVP), as lowercase hex: the hashes a golden set's
// manifest records for every file and that the reader verifies.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ropecheck::io {

// Incremental SHA-256: update() with consecutive pieces, then hex() once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  void update(std::span<const std::uint8_t> bytes);
  std::string hex();  // 64 lowercase hex digits; the object is spent

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// 64 lowercase hex digits.
std::string sha256_hex(std::span<const std::uint8_t> bytes);

// Streams the file (constant memory). Throws InputError ("cannot read 'FILE'") when it cannot be
// opened or read.
std::string sha256_file(const std::filesystem::path& path);

// The same hash for a file ropecheck wrote and that nothing changes while it is hashed (a golden
// set's files before they are published, by one run or by `merge --shared` after its shards): the
// file is mapped, not copied, which is faster on files of gigabytes. A file that another process
// truncates meanwhile would end the process with SIGBUS, which is why files from elsewhere go
// through sha256_file.
std::string sha256_own_file(const std::filesystem::path& path);

class MappedFile;

// The hash of a mapped file (mapped_file.hpp), read from the mapping in pieces whose pages are dropped
// from the process once hashed: constant memory, no copy out of the page cache.
std::string sha256_mapped(const MappedFile& file);

// SHA-256 of mapped files on worker threads, started at once and collected by wait(), so that a reader
// of the same files (the check) and their hashes share one read of each byte. Largest file first, one
// thread per file at a time, up to `threads` threads (0: hardware concurrency).
class BackgroundHashes {
 public:
  BackgroundHashes(std::vector<std::shared_ptr<const MappedFile>> files, int threads);
  ~BackgroundHashes();  // waits for the hashers
  BackgroundHashes(const BackgroundHashes&) = delete;
  BackgroundHashes& operator=(const BackgroundHashes&) = delete;
  // The hex digests in the order of `files`; rethrows the first exception a hasher threw.
  std::vector<std::string> wait();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace ropecheck::io
