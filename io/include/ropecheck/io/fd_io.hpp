// Whole writes and reads on a file descriptor: a write or read may stop short of what was asked, or be
// interrupted by a signal (EINTR), so each is a loop; these are the loops every writer and reader of
// raw bytes uses (the atomic outputs, `merge` streaming a golden set's files).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace ropecheck::io {

// Writes all of `bytes` to `fd`. SpecError "WHAT: cannot write 'SHOWN' (reason)"; a write that takes
// nothing reads as a full disk (ENOSPC).
void write_all(int fd, std::string_view bytes, const std::string& what, const std::string& shown);
inline void write_all(int fd, std::span<const std::uint8_t> bytes, const std::string& what, const std::string& shown) {
  write_all(fd, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), what, shown);
}

// Reads exactly bytes.size() bytes at offset `at` of `fd` (pread: the file offset is not moved).
// InputError "WHAT: cannot read 'SHOWN' (reason)"; the end of the file before them reads as EIO.
void read_exact_at(int fd, std::span<std::uint8_t> bytes, std::uint64_t at, const std::string& what,
                   const std::string& shown);

}  // namespace ropecheck::io
