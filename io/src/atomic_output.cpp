#include "ropecheck/io/atomic_output.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>  // renameat2, RENAME_NOREPLACE, RENAME_EXCHANGE (glibc >= 2.28)
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <mutex>

#include "atomic_internal.hpp"
#include "ropecheck/io/fd_io.hpp"
#include "ropecheck/core/spec.hpp"  // SpecError

namespace ropecheck::io {
namespace fs = std::filesystem;
using detail::errno_text;
using detail::fail;
using detail::register_temporary;
using detail::temporary_name;
using detail::unregister_temporary;

namespace {

// ---- Removal on SIGINT / SIGTERM / SIGHUP -------------------------------------------------------
// The handler may only use async-signal-safe calls, so the temporaries are kept as fixed C strings
// and removed with open / getdents64 / unlinkat / rmdir (they are flat: files directly inside).

constexpr int kSlots = 16;
constexpr std::size_t kPathBytes = 4096;
struct Slot {
  std::atomic<int> used{0};
  char path[kPathBytes];
};
Slot g_slots[kSlots];

// The fixed head of a linux_dirent64 record; the NUL-terminated name follows it.
struct LinuxDirent64Head {
  ino64_t d_ino;
  off64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
};
constexpr std::size_t kDirentNameOffset = offsetof(LinuxDirent64Head, d_type) + 1;

// Async-signal-safe: unlinks `path`, or every entry of the folder `path` and then the folder.
void remove_flat(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    ::unlink(path);
    return;
  }
  alignas(8) char buf[8192];
  for (int pass = 0; pass < 4; ++pass) {  // again from the start: unlinking while reading may skip names
    ::lseek(fd, 0, SEEK_SET);
    bool removed = false;
    for (;;) {
      const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
      if (n <= 0) break;
      for (long off = 0; off < n;) {
        const auto* d = reinterpret_cast<const LinuxDirent64Head*>(buf + off);
        const char* name = buf + off + kDirentNameOffset;
        if (!(name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0)))) {
          if (::unlinkat(fd, name, 0) == 0) removed = true;
        }
        off += d->d_reclen;
      }
    }
    if (!removed) break;
  }
  ::close(fd);
  ::rmdir(path);
}

extern "C" void ropecheck_cleanup_on_signal(int sig) {
  const int saved = errno;
  for (Slot& s : g_slots)
    if (s.used.load() == 1) remove_flat(s.path);
  errno = saved;
  ::signal(sig, SIG_DFL);  // die of the signal as if it were not handled (exit status 128 + sig)
  ::raise(sig);
}

void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;  // ignored (nohup) or taken
      struct sigaction sa {};
      sa.sa_handler = ropecheck_cleanup_on_signal;
      sigemptyset(&sa.sa_mask);
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

// Registers a temporary for removal on a signal; returns its slot (-1 when the path is too long or
// every slot is taken: the temporary is then only removed by normal unwinding or a later run).
int register_slot(const fs::path& p) {
  install_handlers();
  const std::string& s = p.native();
  if (s.size() + 1 > kPathBytes) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (g_slots[i].used.compare_exchange_strong(expected, 2)) {  // 2: being filled, ignored by the handler
      std::memcpy(g_slots[i].path, s.c_str(), s.size() + 1);
      g_slots[i].used.store(1);
      return i;
    }
  }
  return -1;
}

// ---- Names -------------------------------------------------------------------------------------

bool process_is_gone(long pid) {
  if (pid <= 0) return false;
  if (pid == ::getpid()) return false;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// `name` = PREFIX + digits; returns the number, or -1.
long pid_after(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  long v = 0;
  for (std::size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || v > 100'000'000) return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

// Writes all of `bytes` to a new file `p`, flushed to the disk (fsync) when `durable`; throws naming
// `what` and the system's reason.
void write_whole_file(const fs::path& p, std::string_view bytes, const std::string& what, bool durable = false) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) fail(what + ": cannot write '" + p.string() + "' (" + errno_text(errno) + ")");
  try {
    write_all(fd, bytes, what, p.string());
  } catch (...) {
    ::close(fd);
    throw;
  }
  const int synced = durable ? ::fsync(fd) : 0, sync_errno = errno;
  if (::close(fd) != 0 || synced != 0)
    fail(what + ": cannot write '" + p.string() + "' (" + errno_text(synced != 0 ? sync_errno : errno) + ")");
}

// Flushes the folder's entries (a file renamed or linked into it) to the disk; best effort.
void sync_folder(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// What marks a folder as ropecheck's own output (a golden set or shard, a drift folder): only such a
// folder, or an empty one, is replaced by --overwrite.
bool is_ropecheck_output(const fs::path& dir) {
  for (const char* marker : {"manifest.json", "drift.json", "compare.json", "stores.json"})
    if (std::error_code ec; fs::is_regular_file(dir / marker, ec)) return true;
  std::error_code ec;
  return fs::is_empty(dir, ec) && !ec;
}

// --overwrite replaces a folder ropecheck wrote (or an empty one), never anything else that stands there.
void refuse_foreign(const fs::path& out, const std::string& shown, const std::string& opt) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(out, ec);
  if (!fs::exists(st)) return;
  if (fs::is_symlink(st)) fail(opt + ": '" + shown + "' is a symbolic link; not replaced (give the folder itself)");
  if (!fs::is_directory(st)) fail(opt + ": '" + shown + "' is not a folder; not replaced");
  if (!is_ropecheck_output(out))
    fail(opt + ": '" + shown + "' is not empty and holds no ropecheck output (no manifest.json, drift.json, stores.json or " +
         "compare.json); not replaced");
}

}  // namespace

namespace detail {

[[noreturn]] void fail(const std::string& message) { throw SpecError(message); }

std::string errno_text(int e) { return std::strerror(e); }

int register_temporary(const fs::path& p) { return register_slot(p); }

void unregister_temporary(int slot) {
  if (slot >= 0) g_slots[slot].used.store(0);
}

// ".NAME" + kind + PID, appended piecewise (GCC 12 warns falsely on `"." + s + ...`, bug 105329).
std::string temporary_name(const std::string& name, const char* kind) {
  std::string s(".");
  s += name;
  s += kind;
  s += std::to_string(::getpid());
  return s;
}

int lock_temporary(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -1;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace detail

int remove_stale_temporaries(const fs::path& out) {
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  const std::string name = out.filename().string();
  if (name.empty()) return 0;
  int removed = 0;
  std::error_code ec;
  fs::directory_iterator it(parent, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string entry = it->path().filename().string();
    long pid = -1;
    for (const char* kind : {".partial-", ".old-", ".tmp-"})
      if (pid < 0) pid = pid_after(entry, std::string(".").append(name).append(kind));
    const bool legacy = pid < 0;
    if (legacy) pid = pid_after(entry, name + ".tmp.");  // the report temporaries of ropecheck <= 0.1 (no lock)
    if (pid < 0 || (legacy && !process_is_gone(pid))) continue;
    // Live when its owner holds the lock, whatever its PID says (another PID namespace); removed while
    // this process holds the lock, so that two runs cleaning up do not race.
    const int lock = detail::lock_temporary(it->path());
    if (lock < 0) continue;
    std::error_code rec;
    if (fs::remove_all(it->path(), rec) > 0 && !rec) ++removed;
    ::close(lock);
  }
  return removed;
}

bool write_file_durably(const fs::path& path, std::string_view bytes, const std::string& option, bool replace) {
  // Unique among the hosts that share the folder (PIDs alone may repeat): ".NAME.tmp-HOST-PID".
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  const std::string kind = std::string(".tmp-") + host + "-";
  const fs::path tmp = path.parent_path() / temporary_name(path.filename().string(), kind.c_str());
  write_whole_file(tmp, bytes, option, /*durable=*/true);
  const bool published = (replace ? ::rename(tmp.c_str(), path.c_str()) : ::link(tmp.c_str(), path.c_str())) == 0;
  const int e = errno;
  if (!published || !replace) ::unlink(tmp.c_str());
  if (!published && (replace || e != EEXIST)) fail(option + ": cannot write '" + path.string() + "' (" + errno_text(e) + ")");
  if (published) sync_folder(path.parent_path());
  return published;
}

// ---- Folders -----------------------------------------------------------------------------------

fs::path output_folder_path(const fs::path& out, const std::string& option) {
  std::string given = out.string();
  if (given.empty()) fail(option + ": missing output folder");
  while (given.size() > 1 && given.back() == '/') given.pop_back();  // `--out DIR/` is DIR
  const fs::path trimmed(given);
  const std::string last = trimmed.filename().string();
  if (given == "/" || last == "." || last == "..")
    fail(option + ": '" + out.string() + "' names no folder of its own; give the name of the folder to write");
  std::error_code ec;
  fs::path abs = fs::absolute(trimmed, ec);
  if (ec) fail(option + ": '" + out.string() + "': " + ec.message());
  return abs;
}

OutputFolder::OutputFolder(const fs::path& out, Options options) : OutputFolder(out, std::move(options), {}) {}

OutputFolder::OutputFolder(const fs::path& out, Options options, fs::path adopt)
    : options_(std::move(options)), adopt_(std::move(adopt)) {
  const std::string& opt = options_.option;
  out_ = output_folder_path(out, opt);
  std::error_code ec;
  if (fs::exists(fs::symlink_status(out_, ec)) && !options_.overwrite)
    fail(opt + ": '" + out.string() + "' already exists (use --overwrite to replace it)");
  refuse_foreign(out_, out.string(), opt);
  const fs::path parent = out_.parent_path();
  if (!fs::is_directory(parent, ec)) {
    if (!options_.create_parents) fail(opt + ": the parent folder '" + parent.string() + "' does not exist");
    fs::create_directories(parent, ec);
    if (ec) fail(opt + ": cannot create the parent folder '" + parent.string() + "' (" + ec.message() + ")");
  }
  remove_stale_temporaries(out_);
  if (!adopt_.empty()) {
    if (!fs::is_directory(adopt_, ec)) fail(opt + ": '" + adopt_.string() + "' is not a folder");
    tmp_ = adopt_;
    return;
  }
  tmp_ = parent / temporary_name(out_.filename().string(), ".partial-");
  fs::remove_all(tmp_, ec);
  if (::mkdir(tmp_.c_str(), 0777) != 0)
    fail(opt + ": cannot write in '" + parent.string() + "' (" + errno_text(errno) + ")");
  lock_ = detail::lock_temporary(tmp_);
  slot_ = register_temporary(tmp_);
}

OutputFolder::~OutputFolder() {
  if (!committed_ && !tmp_.empty() && adopt_.empty()) {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  unregister_temporary(slot_);
  if (lock_ >= 0) ::close(lock_);
}

void OutputFolder::write(const std::string& name, std::string_view bytes) const {
  write_whole_file(tmp_ / name, bytes, options_.option);
}

void OutputFolder::commit() {
  const std::string& opt = options_.option;
  const std::string shown = out_.string();
  const std::string who = options_.command.empty() ? "ropecheck" : options_.command;
  for (int attempt = 0; attempt < 8; ++attempt) {
    // New folder: never replaces one that appeared while we were running.
    if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, out_.c_str(), RENAME_NOREPLACE) == 0) {
      committed_ = true;
      return;
    }
    int e = errno;
    if (e == EINVAL || e == ENOSYS) break;  // a filesystem without renameat2 flags: the fallback below
    if (e != EEXIST && e != ENOTEMPTY)
      fail(opt + ": cannot move the output into '" + shown + "' (" + errno_text(e) + ")");
    if (!options_.overwrite)
      fail(opt + ": '" + shown + "' appeared while " + who + " was running; not replaced (use --overwrite to replace it)");
    refuse_foreign(out_, shown, opt);  // again: it may have been put there while we ran
    // Replace: one atomic exchange, then the old content (now at tmp_) is removed.
    if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, out_.c_str(), RENAME_EXCHANGE) == 0) {
      committed_ = true;
      std::error_code ec;
      fs::remove_all(tmp_, ec);
      return;
    }
    e = errno;
    if (e == EINVAL || e == ENOSYS) break;
    if (e != ENOENT) fail(opt + ": cannot replace '" + shown + "' (" + errno_text(e) + ")");
    // ENOENT: `out` vanished between the two calls; try again.
  }
  // Fallback for filesystems that do not support the flags: check, then rename (not race-free).
  std::error_code ec;
  fs::path old;
  if (fs::exists(fs::symlink_status(out_, ec))) {
    if (!options_.overwrite)
      fail(opt + ": '" + shown + "' appeared while " + who + " was running; not replaced (use --overwrite to replace it)");
    old = out_.parent_path() / temporary_name(out_.filename().string(), ".old-");
    fs::remove_all(old, ec);
    fs::rename(out_, old, ec);
    if (ec) fail(opt + ": cannot move the existing '" + shown + "' aside (" + ec.message() + ")");
  }
  fs::rename(tmp_, out_, ec);
  if (ec) fail(opt + ": cannot move the output into '" + shown + "' (" + ec.message() + ")");
  committed_ = true;
  if (!old.empty()) fs::remove_all(old, ec);
}

}  // namespace ropecheck::io
