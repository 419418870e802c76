// File outputs (atomic_output.hpp): where a file destination leads, and writing it there.
#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_NOREPLACE (glibc >= 2.28)
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <mutex>

#include "atomic_internal.hpp"
#include "ropecheck/io/atomic_output.hpp"
#include "ropecheck/io/fd_io.hpp"

namespace ropecheck::io {
namespace fs = std::filesystem;
using detail::errno_text;
using detail::fail;

namespace {

// Standard output, once an option has claimed it ("-", or a path that is ropecheck's own stdout):
// the file goes to the descriptor stdout had, and fd 1 is pointed at stderr, so what ropecheck would
// print there (its summary) does not mix into the file.
std::mutex g_stdout_mutex;
int g_stdout_fd = -1;
std::string g_stdout_owner;
fs::path g_stdout_path;  // as the owner gave it: /dev/stdout leads to stderr once fd 1 is pointed there

void claim_stdout(const std::string& option, const fs::path& path) {
  std::lock_guard<std::mutex> lock(g_stdout_mutex);
  if (g_stdout_fd >= 0) {
    if (g_stdout_owner == option && g_stdout_path == path) return;
    fail(option + " " + path.string() + ": standard output already carries " + g_stdout_owner);
  }
  std::fflush(stdout);
  const int fd = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
  if (fd < 0 || ::dup2(2, 1) < 0)
    fail(option + " " + path.string() + ": cannot take over standard output (" + errno_text(errno) + ")");
  g_stdout_fd = fd;
  g_stdout_owner = option;
  g_stdout_path = path;
}

bool claimed(const std::string& option, const fs::path& path) {
  std::lock_guard<std::mutex> lock(g_stdout_mutex);
  return g_stdout_fd >= 0 && g_stdout_owner == option && g_stdout_path == path;
}

bool is_our_stdout(const struct stat& st) {
  struct stat out {};
  const int fd = g_stdout_fd >= 0 ? g_stdout_fd : 1;
  return ::fstat(fd, &out) == 0 && out.st_dev == st.st_dev && out.st_ino == st.st_ino;
}

enum class Kind { stdout_, replace, write_through };

// Where `path` leads: standard output, a regular file (or none yet) to replace atomically, or
// something to write through (a device, a FIFO; a symbolic link is followed and stays). SpecError for
// what cannot be written: a folder, a socket, a link to nothing, a missing or read-only parent folder.
Kind classify(const fs::path& path, const std::string& option, fs::path& target) {
  const std::string where = option + " " + path.string();
  target = path;
  if (path.empty()) fail(option + ": empty path");
  // The names of standard output itself: once fd 1 points at stderr they would lead there.
  if (path == "-" || path == "/dev/stdout" || path == "/dev/fd/1" || path == "/proc/self/fd/1" || claimed(option, path))
    return Kind::stdout_;
  struct stat l {}, st {};
  if (::lstat(path.c_str(), &l) != 0) {
    if (errno != ENOENT) fail(where + ": " + errno_text(errno));
    const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
    std::error_code ec;
    if (!fs::is_directory(parent, ec)) fail(where + ": no such directory " + parent.string());
    if (::access(parent.c_str(), W_OK) != 0) fail(where + ": directory not writable");
    return Kind::replace;
  }
  if (S_ISLNK(l.st_mode) && ::stat(path.c_str(), &st) != 0)
    fail(where + ": a symbolic link to " + (errno == ENOENT ? std::string("nothing") : errno_text(errno)));
  if (!S_ISLNK(l.st_mode)) st = l;
  if (S_ISDIR(st.st_mode)) fail(where + ": is a directory");
  if (S_ISSOCK(st.st_mode)) fail(where + ": is a socket");
  if (is_our_stdout(st)) return Kind::stdout_;
  if (S_ISREG(st.st_mode)) {
    std::error_code ec;
    if (S_ISLNK(l.st_mode)) target = fs::canonical(path, ec);  // the link stays; its file is replaced
    if (ec) fail(where + ": cannot follow the link (" + ec.message() + ")");
    const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
    if (::access(parent.c_str(), W_OK) != 0) fail(where + ": directory " + parent.string() + " not writable");
    return Kind::replace;
  }
  if (::access(path.c_str(), W_OK) != 0) fail(where + ": not writable (" + errno_text(errno) + ")");
  return Kind::write_through;
}

void write_through(const fs::path& path, std::string_view bytes, const std::string& where) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);  // a FIFO waits for its reader
  if (fd < 0) fail(where + ": cannot open it for writing (" + errno_text(errno) + ")");
  try {
    write_all(fd, bytes, where, path.string());
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) fail(where + ": cannot write it (" + errno_text(errno) + ")");
}

void replace_atomically(const fs::path& path, std::string_view bytes, const std::string& option, bool replace) {
  const std::string where = option + " " + path.string();
  remove_stale_temporaries(path);
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const fs::path tmp = parent / detail::temporary_name(path.filename().string(), ".tmp-");
  const int slot = detail::register_temporary(tmp);
  int fd = -1;
  try {
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) fail(where + ": cannot write '" + tmp.string() + "' (" + errno_text(errno) + ")");
    ::flock(fd, LOCK_EX | LOCK_NB);  // held until the rename: the temporary is in use
    write_all(fd, bytes, where, tmp.string());
    const int r = replace ? ::rename(tmp.c_str(), path.c_str())
                          : ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE);
    if (r != 0 && !replace && errno == EEXIST)
      fail(where + ": appeared while ropecheck was running; not replaced (use --overwrite to replace it)");
    if (r != 0) fail(where + ": cannot rename the temporary file into place (" + errno_text(errno) + ")");
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    detail::unregister_temporary(slot);
    throw;
  }
  ::close(fd);
  detail::unregister_temporary(slot);
}

}  // namespace

void check_file_destination(const fs::path& path, const std::string& option) {
  fs::path target;
  if (classify(path, option, target) == Kind::stdout_) claim_stdout(option, path);
}

void write_file_atomically(const fs::path& path, std::string_view bytes, const std::string& option, bool replace) {
  fs::path target;
  const Kind kind = classify(path, option, target);
  const std::string where = option + " " + path.string();
  switch (kind) {
    case Kind::stdout_: {
      claim_stdout(option, path);
      write_all(g_stdout_fd, bytes, where, "standard output");
      return;
    }
    case Kind::write_through: write_through(path, bytes, where); return;
    case Kind::replace: replace_atomically(target, bytes, option, replace); return;
  }
}

}  // namespace ropecheck::io
