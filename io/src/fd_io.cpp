#include "ropecheck/io/fd_io.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ropecheck/core/spec.hpp"  // SpecError, InputError

namespace ropecheck::io {

void write_all(int fd, std::string_view bytes, const std::string& what, const std::string& shown) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, std::min<std::size_t>(bytes.size() - done, std::size_t{1} << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw SpecError(what + ": cannot write '" + shown + "' (" + std::strerror(n < 0 ? errno : ENOSPC) + ")");
    done += static_cast<std::size_t>(n);
  }
}

void read_exact_at(int fd, std::span<std::uint8_t> bytes, std::uint64_t at, const std::string& what,
                   const std::string& shown) {
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t r = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(at + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw InputError(what + ": cannot read '" + shown + "' (" + std::strerror(r < 0 ? errno : EIO) + ")");
    done += static_cast<std::size_t>(r);
  }
}

}  // namespace ropecheck::io
