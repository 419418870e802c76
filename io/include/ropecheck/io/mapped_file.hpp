// A file mapped read-only, so that readers see its bytes without copying them out of the page cache, and
// drop what they are done with from the process (release), which keeps the resident set at the pages in
// use however large the file is: mapped pages count in RSS, and a batch scheduler counts RSS.
//
// A mapped file that another process truncates would end the reading process with SIGBUS at the first
// access past the new end. While any MappedFile lives, a SIGBUS inside one of them ends the process
// instead with exit 2 and one line, "ropecheck: error: FILE: the file shrank while it was read (another
// process truncated or rewrote it)", as any unusable input ends it; a SIGBUS elsewhere keeps its default
// action.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

namespace ropecheck::io {

class MappedFile {
 public:
  // InputError "WHAT: cannot read" when the file cannot be opened, is not a regular file or cannot be
  // mapped; `what` names it in messages (a path as the user gave it).
  static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path, const std::string& what);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::uint8_t> bytes() const { return {data_, size_}; }
  std::uint64_t size() const { return size_; }
  const std::string& what() const { return what_; }
  // Drops the pages of [offset, offset + size) from this process (MADV_DONTNEED: the page cache keeps
  // them; a later access, also of a neighbouring range sharing a page, maps them again).
  void release(std::uint64_t offset, std::uint64_t size) const;
  // Tells the kernel the range is read once from start to end (MADV_SEQUENTIAL: read further ahead).
  void sequential(std::uint64_t offset, std::uint64_t size) const;
  // Maps the range's pages into the process at once (MADV_POPULATE_READ, Linux 5.14; a no-op before),
  // instead of one page fault per 16 pages as they are read: about a fifth of a cached check's time.
  void populate(std::uint64_t offset, std::uint64_t size) const;

 private:
  MappedFile() = default;
  const std::uint8_t* data_ = nullptr;
  std::uint64_t size_ = 0;
  std::string what_;
  int slot_ = -1;  // in the SIGBUS guard's table
};

}  // namespace ropecheck::io
