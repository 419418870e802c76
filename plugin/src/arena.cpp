#include "arena.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ropecheck/core/input_error.hpp"

namespace ropecheck::plugin::detail {

std::size_t page_size() {
  static const std::size_t p = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return p;
}

std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

int high_fd(int fd) {
  const int h = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  ::close(fd);
  return h;
}

void Arena::open() {
  int fd = ::memfd_create("ropecheck-kernel-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) throw InputError(std::string("cannot create the kernel's shared memory (memfd_create): ") + std::strerror(errno));
  fd_ = high_fd(fd);
  // Best effort: a kernel without sealing (before Linux 3.17) leaves the arena unsealed.
  (void)::fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL);
}

void Arena::reserve(std::size_t n) {
  if (n <= size_) return;
  const std::size_t want = align_up(std::max(n, size_ + size_ / 2), page_size());
  if (::ftruncate(fd_, static_cast<off_t>(want)) != 0)
    throw InputError("cannot size the kernel's shared memory to " + std::to_string(want) + " bytes: " + std::strerror(errno));
  if (base_) ::munmap(base_, size_);
  void* m = ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (m == MAP_FAILED) {
    base_ = nullptr;
    size_ = 0;
    throw InputError("cannot map the kernel's shared memory (" + std::to_string(want) + " bytes): " + std::strerror(errno));
  }
  base_ = static_cast<std::uint8_t*>(m);
  size_ = want;
}

Arena::~Arena() {
  if (base_) ::munmap(base_, size_);
  if (fd_ >= 0) ::close(fd_);
}

std::size_t Layout::input(const void* data, std::size_t bytes) {
  if (bytes == 0) return 0;
  cursor = align_up(cursor, 64);
  inputs.push_back({data, bytes, cursor});
  cursor += bytes;
  return inputs.back().offset;
}

std::size_t Layout::output(std::string name, std::size_t bytes, bool message, bool prefill_checked) {
  const std::size_t page = page_size();
  if (guard_pages.empty() || cursor != guard_pages.back() + page) {  // no guard page right before: one
    cursor = align_up(cursor, page);
    guard_pages.push_back(cursor);
    cursor += page;
  }
  const std::size_t start = cursor, offset = start + kGuardBytes;
  const std::size_t end = align_up(offset + bytes + kGuardBytes, page);
  writable.push_back({std::move(name), bytes, offset, start, end, message, prefill_checked});
  guard_pages.push_back(end);
  cursor = end + page;
  return offset;
}

void Layout::fill(std::uint8_t* base) const {
  for (const Input& i : inputs) std::memcpy(base + i.offset, i.data, i.bytes);
  for (const Writable& w : writable) {
    std::memset(base + w.start, kGuardByte, w.offset - w.start);
    std::memset(base + w.offset, w.message ? 0 : kNanByte, w.bytes);
    std::memset(base + w.offset + w.bytes, kGuardByte, w.end - w.offset - w.bytes);
  }
}

namespace {

bool all_guard(const std::uint8_t* p, std::size_t n) {
  static const std::vector<std::uint8_t> guard(4096, kGuardByte);
  for (std::size_t done = 0; done < n;) {
    const std::size_t k = std::min(n - done, guard.size());
    if (std::memcmp(p + done, guard.data(), k) != 0) return false;
    done += k;
  }
  return true;
}

template <class U>
std::size_t count_all_ones(const std::uint8_t* p, std::size_t n) {
  std::size_t c = 0;
  for (std::size_t i = 0; i < n; ++i) {
    U v;
    std::memcpy(&v, p + i * sizeof(U), sizeof(U));
    c += v == static_cast<U>(~U{0});
  }
  return c;
}

}  // namespace

Layout::Smash Layout::smashed(const std::uint8_t* base, const Writable& w) {
  if (!all_guard(base + w.offset + w.bytes, w.end - w.offset - w.bytes)) return Smash::after;
  if (!all_guard(base + w.start, w.offset - w.start)) return Smash::before;
  return Smash::none;
}

std::string guard_failure(const std::uint8_t* base, const Layout& layout, const char* entry, std::uint32_t message_capacity) {
  for (const Layout::Writable& w : layout.writable) {
    const Layout::Smash s = Layout::smashed(base, w);
    if (s == Layout::Smash::after)
      return std::string(entry) + (w.message ? " wrote past message_capacity (" + std::to_string(message_capacity) + " bytes)"
                                             : " wrote past the end of its output " + w.name);
    if (s == Layout::Smash::before)
      return std::string(entry) + " wrote before the start of its " + (w.message ? std::string("message") : "output " + w.name);
  }
  return "";
}

std::string smashed_note(const std::uint8_t* base, const Layout& layout) {
  for (const Layout::Writable& w : layout.writable) {
    const Layout::Smash s = Layout::smashed(base, w);
    if (s == Layout::Smash::after) return " (after writing past the end of its " + w.name + ")";
    if (s == Layout::Smash::before) return " (after writing before the start of its " + w.name + ")";
  }
  return "";
}

std::size_t count_prefill(const std::uint8_t* p, std::size_t bytes, std::size_t e) {
  if (e == 8) return count_all_ones<std::uint64_t>(p, bytes / 8);
  if (e == 4) return count_all_ones<std::uint32_t>(p, bytes / 4);
  return count_all_ones<std::uint16_t>(p, bytes / 2);
}

void OutputSnapshot::take(const std::uint8_t* base, const Layout& layout, std::string entry, std::string what) {
  std::size_t n = 0;  // the buffers are reused: check's outputs can be gigabytes, props makes thousands of calls
  for (const Layout::Writable& w : layout.writable) {
    if (w.message) continue;
    if (n == outputs_.size()) outputs_.emplace_back();
    Output& o = outputs_[n++];
    o.name = w.name;
    o.offset = w.offset;
    o.bytes.assign(base + w.offset, base + w.offset + w.bytes);
  }
  outputs_.resize(n);
  entry_ = std::move(entry);
  what_ = std::move(what);
  taken_ = true;
}

std::string OutputSnapshot::changed(const std::uint8_t* base) const {
  if (!taken_) return "";
  for (const Output& o : outputs_)
    if (std::memcmp(base + o.offset, o.bytes.data(), o.bytes.size()) != 0) return o.name;
  return "";
}

}  // namespace ropecheck::plugin::detail
