// The shared memory a kernel's inputs and outputs live in (client.cpp), and how one call is placed in
// it. Private to the plugin client.
//
// Each writable buffer (an output, the message) sits between guard pages, which the host protects for
// the call (PROT_NONE):
//
//   [guard page][64 guard bytes][buffer][guard bytes up to the page end][guard page][64 guard bytes]...
//
// so a write just before a buffer lands in its guard bytes or the guard page, and a write anywhere
// past its end lands in the padding (filled with the guard byte and checked whole) or in the next
// guard page (SIGSEGV). Consecutive buffers share the guard page between them. Inputs come first,
// packed (64-byte aligned); offset 0 is never used (NULL).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ropecheck::plugin::detail {

inline constexpr std::size_t kGuardBytes = 64;
inline constexpr std::uint8_t kGuardByte = 0xA5;
inline constexpr std::uint8_t kNanByte = 0xFF;  // 0xFF... is a NaN in all four formats

std::size_t page_size();
std::size_t align_up(std::size_t n, std::size_t a);
// A file descriptor moved to 10 or above (the host expects 3, 4 and 5 free), close-on-exec.
int high_fd(int fd);

// A memfd sealed against shrinking (F_SEAL_SHRINK, F_SEAL_SEAL): a kernel that truncates it (its fd 4)
// gets EPERM instead of turning every later access of ropecheck's mapping into SIGBUS.
class Arena {
 public:
  Arena() = default;
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  void open();                 // InputError when the memfd cannot be made
  void reserve(std::size_t n);  // grows (never shrinks) and maps at least n bytes
  int fd() const { return fd_; }
  std::uint8_t* base() const { return base_; }
  std::size_t size() const { return size_; }

 private:
  int fd_ = -1;
  std::uint8_t* base_ = nullptr;
  std::size_t size_ = 0;
};

struct Layout {
  struct Input {
    const void* data;
    std::size_t bytes, offset;
  };
  struct Writable {
    std::string name;
    std::size_t bytes, offset;
    std::size_t start, end;  // the page-aligned region: guard bytes, the buffer, guard bytes
    bool message;
    // Elements still holding the NaN prefill after an ok call count as unwritten. Not for quantized
    // codes (0xFF is a code) nor a KV cache (0xFF is its sentinel: an unwritten slot is the checker's).
    bool prefill_checked = true;
  };
  std::size_t cursor = page_size();
  std::vector<Input> inputs;
  std::vector<Writable> writable;
  std::vector<std::size_t> guard_pages;  // protected during the call

  std::size_t input(const void* data, std::size_t bytes);  // 0 for an empty input
  std::size_t output(std::string name, std::size_t bytes, bool message = false, bool prefill_checked = true);
  // Copies the inputs, fills the outputs with NaN (the message with zeros) and the guards with the guard byte.
  void fill(std::uint8_t* base) const;
  enum class Smash { none, before, after };
  static Smash smashed(const std::uint8_t* base, const Writable& w);
};

// What the kernel did to the guards around its buffers: "" or the failure ("ENTRY wrote past the end of
// its output out", "... past message_capacity (N bytes)", "... before the start of its ...").
std::string guard_failure(const std::uint8_t* base, const Layout& layout, const char* entry, std::uint32_t message_capacity);
// After the host died: " (after writing past the end of its out)" when a guard was hit first (the
// likely cause), else "".
std::string smashed_note(const std::uint8_t* base, const Layout& layout);

// Elements of `e` bytes still holding the NaN prefill pattern.
std::size_t count_prefill(const std::uint8_t* p, std::size_t bytes, std::size_t e);

// The outputs of the last call that returned, as they were then: a later difference is a write the
// kernel made after returning (a thread it left running, a destructor).
class OutputSnapshot {
 public:
  void take(const std::uint8_t* base, const Layout& layout, std::string entry, std::string what);
  void clear() { taken_ = false; }
  bool empty() const { return !taken_; }
  // The name of the first output that differs now, or "".
  std::string changed(const std::uint8_t* base) const;
  const std::string& entry() const { return entry_; }
  const std::string& what() const { return what_; }

 private:
  struct Output {
    std::string name;
    std::size_t offset;
    std::vector<std::uint8_t> bytes;
  };
  std::vector<Output> outputs_;
  std::string entry_, what_;
  bool taken_ = false;
};

}  // namespace ropecheck::plugin::detail
