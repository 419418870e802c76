// What the plugin client (client.cpp, host_process.cpp) and the kernel host process (host_main.cpp) share:
// the one place a kernel library is opened and its entry points resolved, and the messages they
// exchange over a socket. Internal; the host is built from this header and kernel_abi.h only.
//
// Protocol (all messages fixed-size structs, native layout: both ends are the same build):
//   host -> client  Progress  "started" first (the host's protocol version and message sizes, so that a
//                             host of another build is told apart from a kernel that failed), then
//                             one per load step ("configure", "query"), then "loaded"
//   host -> client  Hello   once, after loading the library (or why it could not be loaded)
//   client -> host  Request one call: which entry point, the arena's size, the problem with every
//                           pointer replaced by its byte offset in the arena (0 = NULL)
//   host -> client  Reply   the entry point's return code
// The arena is a memfd shared by both; the host maps it, turns the offsets into pointers, protects
// the guard pages the request lists (PROT_NONE; they stay protected until a later request's layout
// needs those pages, so repeated layouts cost no mprotect), calls, and answers. EOF on the socket
// ends the host.
//
// Beside the socket the host gets a pipe (fd 5) on which it writes a Notice when a termination signal
// reaches it, before it dies of it: who sent it, so that a signal from another process (a terminal,
// a `kill`) is not counted as the kernel's failure while one the kernel raised is.
#pragma once

#include <dlfcn.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "ropecheck/kernel_abi.h"

namespace ropecheck::plugin::plugin_protocol {

enum class Entry : std::uint32_t { rope_apply = 1, rope_cos_sin = 2, sinusoidal = 3, rope_attention = 4, rope_quantize = 5, rope_append_kv = 6 };

inline const char* entry_name(Entry e) {
  switch (e) {
    case Entry::rope_apply: return "ropecheck_rope_apply";
    case Entry::rope_cos_sin: return "ropecheck_rope_cos_sin";
    case Entry::sinusoidal: return "ropecheck_sinusoidal";
    case Entry::rope_attention: return "ropecheck_rope_attention";
    case Entry::rope_quantize: return "ropecheck_rope_quantize";
    case Entry::rope_append_kv: return "ropecheck_rope_append_kv";
  }
  return "?";
}

// The load steps the host reports (Progress), so that a death or a hang names the step it happened in.
enum class LoadStep : std::uint32_t { started = 1, constructors = 2, configure = 3, query = 4, loaded = 5 };

// The library's entry points, resolved.
struct Symbols {
  void* handle = nullptr;
  std::uint32_t abi_version = 0;
  std::string name;  // raw, as the kernel returned it (the client sanitises)
  std::uint64_t capabilities = 0;
  bool has_capabilities = false;
  ropecheck_rope_apply_fn rope_apply = nullptr;
  ropecheck_rope_cos_sin_fn rope_cos_sin = nullptr;
  ropecheck_sinusoidal_fn sinusoidal = nullptr;
  ropecheck_rope_attention_fn rope_attention = nullptr;  // revision 2, optional
  ropecheck_rope_quantize_fn rope_quantize = nullptr;    // revision 3, optional
  ropecheck_rope_append_kv_fn rope_append_kv = nullptr;  // revision 3, optional
};

// The only dlopen of a kernel in ropecheck: opens `absolute_path` (absolute, so the loader never
// searches LD_LIBRARY_PATH or system folders), resolves the ABI and hands `options` ("" = none) to
// ropecheck_kernel_configure, when exported, before asking the name. Returns "" on success, else the
// problem in words (for "kernel library PATH: <problem>"); `dl` gets dlerror's text when dlopen
// itself failed. Runs the library's constructors: call it where a misbehaving one cannot hurt.
// `step` (may be null) is told each step before it runs.
inline std::string open_kernel_library(const char* absolute_path, const std::string& options, Symbols& s,
                                       std::string& dl, void (*step)(LoadStep) = nullptr) {
  if (step) step(LoadStep::constructors);
  ::dlerror();
  s.handle = ::dlopen(absolute_path, RTLD_NOW | RTLD_LOCAL);
  if (!s.handle) {
    const char* e = ::dlerror();
    dl = e ? e : "unknown dlopen error";
    return "cannot load it as a shared library: ";
  }
  auto symbol = [&](const char* name) -> void* {
    ::dlerror();
    void* p = ::dlsym(s.handle, name);
    return ::dlerror() ? nullptr : p;
  };
  void* version = symbol("ropecheck_kernel_abi_version");
  if (!version) return "not a ropecheck kernel: it does not export ropecheck_kernel_abi_version (see abi/KERNEL_ABI.md)";
  void* name = symbol("ropecheck_kernel_name");
  if (!name) return "not a ropecheck kernel: it does not export ropecheck_kernel_name (see abi/KERNEL_ABI.md)";
  s.abi_version = reinterpret_cast<ropecheck_kernel_abi_version_fn>(version)();
  if (s.abi_version != ROPECHECK_KERNEL_ABI_VERSION)
    return "kernel ABI version " + std::to_string(s.abi_version) + ", but this ropecheck speaks version " +
           std::to_string(ROPECHECK_KERNEL_ABI_VERSION) + " only (rebuild the kernel against this kernel_abi.h)";
  // Called without options too (""): a library already loaded in this process (--in-process, twice)
  // must not keep an earlier configuration.
  if (void* configure = symbol("ropecheck_kernel_configure")) {
    if (step) step(LoadStep::configure);
    char message[512] = {};
    const int rc = reinterpret_cast<ropecheck_kernel_configure_fn>(configure)(options.c_str(), message, sizeof message);
    message[sizeof message - 1] = '\0';
    if (rc != ROPECHECK_OK)
      return "ropecheck_kernel_configure rejected the options ':" + options + "' (returned " + std::to_string(rc) +
             (message[0] ? std::string(": ") + message : std::string()) + ")";
  } else if (!options.empty()) {
    return "options ':" + options + "' given, but the kernel takes none (it does not export ropecheck_kernel_configure)";
  }
  if (step) step(LoadStep::query);
  const char* n = reinterpret_cast<ropecheck_kernel_name_fn>(name)();
  if (!n) return "ropecheck_kernel_name() returned NULL";
  s.name.assign(n, ::strnlen(n, 256));
  s.rope_apply = reinterpret_cast<ropecheck_rope_apply_fn>(symbol("ropecheck_rope_apply"));
  s.rope_cos_sin = reinterpret_cast<ropecheck_rope_cos_sin_fn>(symbol("ropecheck_rope_cos_sin"));
  s.sinusoidal = reinterpret_cast<ropecheck_sinusoidal_fn>(symbol("ropecheck_sinusoidal"));
  s.rope_attention = reinterpret_cast<ropecheck_rope_attention_fn>(symbol("ropecheck_rope_attention"));
  s.rope_quantize = reinterpret_cast<ropecheck_rope_quantize_fn>(symbol("ropecheck_rope_quantize"));
  s.rope_append_kv = reinterpret_cast<ropecheck_rope_append_kv_fn>(symbol("ropecheck_rope_append_kv"));
  if (!s.rope_apply && !s.rope_cos_sin && !s.sinusoidal && !s.rope_attention && !s.rope_quantize && !s.rope_append_kv)
    return "not a ropecheck kernel: it exports none of ropecheck_rope_apply, ropecheck_rope_cos_sin, "
           "ropecheck_sinusoidal, ropecheck_rope_attention, ropecheck_rope_quantize, ropecheck_rope_append_kv "
           "(see abi/KERNEL_ABI.md)";
  if (void* caps = symbol("ropecheck_kernel_capabilities")) {
    s.capabilities = reinterpret_cast<ropecheck_kernel_capabilities_fn>(caps)();
    s.has_capabilities = true;
  }
  return "";
}

constexpr std::uint32_t kHelloMagic = 0x52435048;  // "RCPH"
constexpr std::uint32_t kProgressMagic = 0x52435050;  // "RCPP"
constexpr std::uint32_t kNoticeMagic = 0x5243504E;  // "RCPN"
// Changed with any message layout; a host of another build says so in its first message.
constexpr std::uint32_t kProtocolVersion = 4;

struct Progress {
  std::uint32_t magic = kProgressMagic;
  LoadStep step = LoadStep::started;
  std::uint32_t protocol = kProtocolVersion;
  std::uint32_t sizes = 0;  // sizeof Hello + Request + Reply: a host of another build differs here
};

struct Hello {
  std::uint32_t magic = kHelloMagic;
  std::uint32_t ok = 0;
  std::uint32_t abi_version = 0;
  std::uint32_t has_rope_apply = 0, has_rope_cos_sin = 0, has_sinusoidal = 0, has_capabilities = 0, has_rope_attention = 0;
  std::uint32_t has_rope_quantize = 0, has_rope_append_kv = 0, reserved = 0;
  std::uint64_t capabilities = 0;
  char name[257] = {};
  char problem[600] = {};  // !ok: open_kernel_library's problem
  char dl[600] = {};       // !ok: dlerror's text, if dlopen failed
};

// A termination signal that reached the host (fd 5). from_self: raised by the host itself (the
// kernel: raise, kill(getpid()), kill(0) in its own process group, a write to a closed pipe).
struct Notice {
  std::uint32_t magic = kNoticeMagic;
  std::int32_t signal = 0;
  std::int32_t code = 0;  // siginfo si_code
  std::int32_t sender = 0;  // si_pid
  std::uint32_t from_self = 0, reserved = 0;
};

// Guard pages around every writable buffer: one before the first, one after each (cos, sin and the
// message take four; out, scores and the message too).
constexpr std::size_t kMaxGuardPages = 8;

struct Request {
  Entry entry = Entry::rope_apply;
  std::uint32_t reserved = 0;
  std::uint64_t arena_bytes = 0;
  std::uint64_t guard_pages[kMaxGuardPages] = {};  // arena offsets of pages to protect during the call; 0 = none
  union {
    ropecheck_rope_problem rope;
    ropecheck_table_problem table;
    ropecheck_sinusoidal_problem sinusoidal;
    ropecheck_rope_attention_problem attention;
    ropecheck_rope_quantize_problem quantize;
    ropecheck_rope_append_kv_problem append;
  } p{};
};

struct Reply {
  std::int32_t rc = 0;
  std::uint32_t reserved = 0;
};

// An arena offset as a pointer into the arena mapped at `base` (offset 0 stays NULL).
template <class T>
T* at(char* base, T* offset) {
  const auto o = reinterpret_cast<std::uintptr_t>(offset);
  return o == 0 ? nullptr : reinterpret_cast<T*>(base + o);
}

// The pointers every problem has: spec JSON, positions, message.
template <class Problem>
void rebase(char* base, Problem& p) {
  p.spec_json = at(base, p.spec_json);
  p.positions = at(base, p.positions);
  p.message = at(base, p.message);
}

inline void rebase(char* base, ropecheck_rope_params& r) {
  r.longrope_ext = at(base, r.longrope_ext);
  r.inv_freq = at(base, r.inv_freq);
}

// Calls the request's entry point, its offsets turned into pointers into the arena mapped at `base`
// (the kernel host, and the client with --in-process); -1 when the library lacks that entry point.
inline int call_entry(const Symbols& s, Request& q, char* base) {
  switch (q.entry) {
    case Entry::rope_apply: {
      ropecheck_rope_problem& p = q.p.rope;
      rebase(base, p);
      rebase(base, p.rope);
      p.input_name = at(base, p.input_name);
      p.x = at(base, p.x);
      p.out = at(base, static_cast<char*>(p.out));
      return s.rope_apply ? s.rope_apply(&p) : -1;
    }
    case Entry::rope_cos_sin: {
      ropecheck_table_problem& p = q.p.table;
      rebase(base, p);
      rebase(base, p.rope);
      p.cos = at(base, static_cast<char*>(p.cos));
      p.sin = at(base, static_cast<char*>(p.sin));
      return s.rope_cos_sin ? s.rope_cos_sin(&p) : -1;
    }
    case Entry::sinusoidal: {
      ropecheck_sinusoidal_problem& p = q.p.sinusoidal;
      rebase(base, p);
      p.out = at(base, static_cast<char*>(p.out));
      return s.sinusoidal ? s.sinusoidal(&p) : -1;
    }
    case Entry::rope_attention: {
      ropecheck_rope_attention_problem& p = q.p.attention;
      rebase(base, p);
      rebase(base, p.rope);
      p.attention.sinks = at(base, p.attention.sinks);
      p.q = at(base, p.q);
      p.k = at(base, p.k);
      p.v = at(base, p.v);
      p.out = at(base, static_cast<char*>(p.out));
      p.scores = at(base, static_cast<char*>(p.scores));
      return s.rope_attention ? s.rope_attention(&p) : -1;
    }
    case Entry::rope_quantize: {
      ropecheck_rope_quantize_problem& p = q.p.quantize;
      rebase(base, p);
      rebase(base, p.rope);
      p.input_name = at(base, p.input_name);
      p.x = at(base, p.x);
      p.codes = at(base, static_cast<char*>(p.codes));
      p.scales = at(base, static_cast<char*>(p.scales));
      p.biases = at(base, static_cast<char*>(p.biases));
      return s.rope_quantize ? s.rope_quantize(&p) : -1;
    }
    case Entry::rope_append_kv: {
      ropecheck_rope_append_kv_problem& p = q.p.append;
      rebase(base, p);
      rebase(base, p.rope);
      p.k = at(base, p.k);
      p.v = at(base, p.v);
      ropecheck_kv_cache_params& c = p.cache;
      c.append_indptr = at(base, c.append_indptr);
      c.seq_lens = at(base, c.seq_lens);
      c.kv_indptr = at(base, c.kv_indptr);
      c.kv_indices = at(base, c.kv_indices);
      c.kv_last_page_len = at(base, c.kv_last_page_len);
      c.slot_mapping = at(base, c.slot_mapping);
      p.k_cache = at(base, static_cast<char*>(p.k_cache));
      p.v_cache = at(base, static_cast<char*>(p.v_cache));
      return s.rope_append_kv ? s.rope_append_kv(&p) : -1;
    }
  }
  return -1;
}

// Writes all n bytes to the socket (EINTR retried, no SIGPIPE); false when the peer is gone.
inline bool send_all(int fd, const void* p, std::size_t n) {
  const auto* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t r = ::send(fd, c, n, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace ropecheck::plugin::plugin_protocol

namespace ropecheck::plugin::plugin_protocol {
inline std::uint32_t message_sizes() { return static_cast<std::uint32_t>(sizeof(Hello) + sizeof(Request) + sizeof(Reply)); }
}  // namespace ropecheck::plugin::plugin_protocol
