#include "ropecheck/io/mapped_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <mutex>

#include "ropecheck/core/input_error.hpp"
#include "ropecheck/core/one_line.hpp"

namespace ropecheck::io {
namespace {

// The SIGBUS guard: the live mappings and the line each one ends the process with. A fixed table read by
// the handler without locks (a slot's range is published last, with release order); a mapping that finds
// no free slot is simply not guarded.
struct Slot {
  std::atomic<bool> used{false};
  std::atomic<std::uintptr_t> begin{0}, end{0};
  std::array<char, 480> line{};
  std::size_t length = 0;
};
std::array<Slot, 256> g_slots;
struct sigaction g_previous {};
std::once_flag g_installed;

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const auto at = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (Slot& s : g_slots) {
    const std::uintptr_t b = s.begin.load(std::memory_order_acquire), e = s.end.load(std::memory_order_acquire);
    if (b != 0 && at >= b && at < e) {
      [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, s.line.data(), s.length);
      ::_exit(2);
    }
  }
  // Not ours: the previous disposition takes the fault when the instruction runs again.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) return g_previous.sa_sigaction(sig, info, context);
  }
  ::sigaction(SIGBUS, &g_previous, nullptr);
}

void install_guard() {
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, &g_previous);
}

int guard(const std::uint8_t* data, std::uint64_t size, const std::string& what) {
  std::call_once(g_installed, install_guard);
  for (std::size_t i = 0; i < g_slots.size(); ++i) {
    bool expected = false;
    if (!g_slots[i].used.compare_exchange_strong(expected, true)) continue;
    Slot& s = g_slots[i];
    const std::string line = "ropecheck: error: " + sanitize(what, 300) +
                             ": the file shrank while it was read (another process truncated or rewrote it)\n";
    s.length = std::min(line.size(), s.line.size());
    std::memcpy(s.line.data(), line.data(), s.length);
    s.end.store(reinterpret_cast<std::uintptr_t>(data) + size, std::memory_order_release);
    s.begin.store(reinterpret_cast<std::uintptr_t>(data), std::memory_order_release);
    return static_cast<int>(i);
  }
  return -1;
}

void unguard(int slot) {
  if (slot < 0) return;
  Slot& s = g_slots[static_cast<std::size_t>(slot)];
  s.begin.store(0, std::memory_order_release);
  s.end.store(0, std::memory_order_release);
  s.used.store(false, std::memory_order_release);
}

std::uint64_t page_size() {
  static const std::uint64_t p = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return p;
}

}  // namespace

std::shared_ptr<const MappedFile> MappedFile::open(const std::filesystem::path& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(what + ": cannot read");
  struct stat st {};
  const bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->what_ = what;
  f->size_ = ok ? static_cast<std::uint64_t>(st.st_size) : 0;
  void* at = ok && f->size_ > 0 ? ::mmap(nullptr, f->size_, PROT_READ, MAP_SHARED, fd, 0) : nullptr;
  ::close(fd);  // the mapping keeps the file
  if (!ok || at == MAP_FAILED) throw InputError(what + ": cannot read");
  f->data_ = static_cast<const std::uint8_t*>(at);
  if (f->data_ != nullptr) f->slot_ = guard(f->data_, f->size_, what);
  return f;
}

MappedFile::~MappedFile() {
  if (data_ == nullptr) return;
  unguard(slot_);
  ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

void MappedFile::release(std::uint64_t offset, std::uint64_t size) const {
  if (data_ == nullptr || offset >= size_) return;
  const std::uint64_t p = page_size();
  // Outwards to whole pages: the mapping is read-only and backed by the file, so a page dropped while a
  // neighbouring range still reads it is only mapped again, never lost.
  const std::uint64_t lo = offset / p * p, hi = std::min(offset + size, size_);
  if (hi > lo) (void)::madvise(const_cast<std::uint8_t*>(data_) + lo, hi - lo, MADV_DONTNEED);
}

void MappedFile::sequential(std::uint64_t offset, std::uint64_t size) const {
  if (data_ == nullptr || offset >= size_) return;
  const std::uint64_t p = page_size();
  const std::uint64_t lo = offset / p * p, hi = std::min(offset + size, size_);
  (void)::madvise(const_cast<std::uint8_t*>(data_) + lo, hi - lo, MADV_SEQUENTIAL);
}

void MappedFile::populate(std::uint64_t offset, std::uint64_t size) const {
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
  if (data_ == nullptr || offset >= size_ || size == 0) return;
  const std::uint64_t p = page_size();
  const std::uint64_t lo = offset / p * p, hi = std::min(offset + size, size_);
  (void)::madvise(const_cast<std::uint8_t*>(data_) + lo, hi - lo, MADV_POPULATE_READ);
}

}  // namespace ropecheck::io
