#include "ropecheck/plugin/client.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include <fmt/core.h>

#include "protocol.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"

extern char** environ;

namespace ropecheck::plugin {

namespace pp = plugin_protocol;

namespace {

// The ABI's fixed layouts (x86-64 / AArch64 LP64): a change here is an ABI change.
static_assert(sizeof(void*) != 8 || sizeof(ropecheck_rope_params) == 152, "kernel ABI v1: ropecheck_rope_params layout changed");
static_assert(sizeof(void*) != 8 || sizeof(ropecheck_rope_problem) == 232, "kernel ABI v1: ropecheck_rope_problem layout changed");
static_assert(sizeof(void*) != 8 || sizeof(ropecheck_table_problem) == 224, "kernel ABI v1: ropecheck_table_problem layout changed");
static_assert(sizeof(ropecheck_sinusoidal_params) == 32, "kernel ABI v1: ropecheck_sinusoidal_params layout changed");
static_assert(sizeof(void*) != 8 || sizeof(ropecheck_sinusoidal_problem) == 88, "kernel ABI v1: ropecheck_sinusoidal_problem layout changed");

constexpr std::size_t kGuardBytes = 64;
constexpr std::uint8_t kGuardByte = 0xA5;
constexpr std::uint8_t kNanByte = 0xFF;  // 0xFF... is a NaN in all four formats
constexpr std::uint32_t kMessageCapacity = 512;
constexpr int kMaxConsecutiveFailures = 3;

std::size_t page_size() {
  static const std::size_t p = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return p;
}
std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGPIPE: return "SIGPIPE";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    default: return "signal " + std::to_string(sig);
  }
}

std::string status_text(int status) {
  if (WIFSIGNALED(status)) return "killed by " + signal_name(WTERMSIG(status));
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "stopped";
}

std::string seconds(double s) { return fmt::format("{:g} s", s); }

// A file descriptor moved above the ones the host expects (3, 4), close-on-exec.
int high_fd(int fd) {
  const int h = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  ::close(fd);
  return h;
}

// The shared memory every call's inputs and outputs live in. Offset 0 is never used (NULL).
struct Arena {
  int fd = -1;
  std::uint8_t* base = nullptr;
  std::size_t size = 0;

  void open() {
    fd = ::memfd_create("ropecheck-kernel-arena", MFD_CLOEXEC);
    if (fd < 0) throw InputError(std::string("cannot create the kernel's shared memory (memfd_create): ") + std::strerror(errno));
    fd = high_fd(fd);
  }
  void reserve(std::size_t n) {
    if (n <= size) return;
    const std::size_t want = align_up(std::max(n, size + size / 2), page_size());
    if (::ftruncate(fd, static_cast<off_t>(want)) != 0)
      throw InputError("cannot size the kernel's shared memory to " + std::to_string(want) + " bytes: " + std::strerror(errno));
    if (base) ::munmap(base, size);
    void* m = ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      base = nullptr;
      size = 0;
      throw InputError("cannot map the kernel's shared memory (" + std::to_string(want) + " bytes): " + std::strerror(errno));
    }
    base = static_cast<std::uint8_t*>(m);
    size = want;
  }
  ~Arena() {
    if (base) ::munmap(base, size);
    if (fd >= 0) ::close(fd);
  }
};

// One call's placement in the arena: inputs packed first, then each writable buffer (outputs and
// the message) on its own pages: guard bytes, the buffer, guard bytes, then a guard page.
struct Layout {
  struct Input {
    const void* data;
    std::size_t bytes, offset;
  };
  struct Writable {
    std::string name;
    std::size_t bytes, offset, guard_page;
  };
  std::size_t cursor = page_size();
  std::vector<Input> inputs;
  std::vector<Writable> writable;

  std::size_t input(const void* data, std::size_t bytes) {
    if (bytes == 0) return 0;
    cursor = align_up(cursor, 64);
    inputs.push_back({data, bytes, cursor});
    cursor += bytes;
    return inputs.back().offset;
  }
  std::size_t output(std::string name, std::size_t bytes) {
    cursor = align_up(cursor, page_size());
    const std::size_t off = cursor + kGuardBytes;
    cursor = align_up(off + bytes + kGuardBytes, page_size());
    writable.push_back({std::move(name), bytes, off, cursor});
    cursor += page_size();
    return off;
  }
  // Copies the inputs, fills outputs with NaN and guards with the guard byte.
  void fill(std::uint8_t* base) const {
    for (const Input& i : inputs) std::memcpy(base + i.offset, i.data, i.bytes);
    for (const Writable& w : writable) {
      std::memset(base + w.offset - kGuardBytes, kGuardByte, kGuardBytes);
      std::memset(base + w.offset, w.name == "message" ? 0 : kNanByte, w.bytes);
      std::memset(base + w.offset + w.bytes, kGuardByte, kGuardBytes);
    }
  }
};

// Elements of `e` bytes still holding the NaN prefill pattern.
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
std::size_t count_prefill(const std::uint8_t* p, std::size_t bytes, std::size_t e) {
  if (e == 8) return count_all_ones<std::uint64_t>(p, bytes / 8);
  if (e == 4) return count_all_ones<std::uint32_t>(p, bytes / 4);
  return count_all_ones<std::uint16_t>(p, bytes / 2);
}

bool guard_intact(const std::uint8_t* p) {
  for (std::size_t i = 0; i < kGuardBytes; ++i)
    if (p[i] != kGuardByte) return false;
  return true;
}

template <class T>
T* offset_ptr(std::size_t off) {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(off));
}

}  // namespace

struct KernelPlugin::State {
  std::filesystem::path path, absolute;
  std::string kernel_options;  // for ropecheck_kernel_configure ("" = none)
  std::string name;
  PluginClientOptions options;
  std::uint32_t abi_version = 0;
  bool rope_apply = false, rope_cos_sin = false, sinusoidal = false;
  std::uint64_t capabilities = 0;

  pp::Symbols in_process;  // --in-process: the library in this process
  Arena arena;
  pid_t pid = -1;
  int sock = -1;
  int host_cpu = -1;  // the CPU the host is kept on (colocate), -1: wherever the scheduler puts it
  std::string broken;  // why every call fails (the host died or hung while loading the library)
  std::string gave_up, streak_first;
  bool gave_up_for_good = false;  // after a timeout or a host that would not start: never call again
  int consecutive = 0;
  std::int64_t calls = 0, failed = 0;
  std::string first_failure;
  std::vector<std::pair<std::size_t, std::size_t>> last_outputs;  // offset, bytes

  std::string who() const { return "kernel '" + name + "' (" + sanitize(path.string()) + ")"; }

  ~State() {
    stop_host(false);
    if (in_process.handle) ::dlclose(in_process.handle);
  }

  // Ends the host and returns what became of it ("exited with status 0", "killed by SIGSEGV").
  std::string stop_host(bool kill_it) {
    if (sock >= 0) ::close(sock);
    sock = -1;
    if (pid <= 0) return "gone";
    if (kill_it) ::kill(pid, SIGKILL);
    int status = 0;
    pid_t r;
    do r = ::waitpid(pid, &status, 0);
    while (r < 0 && errno == EINTR);
    pid = -1;
    return r < 0 ? std::string("gone") : status_text(status);
  }

  // Waits up to the timeout for n bytes; "" when they came, else why not (the host is then reaped).
  std::string receive(void* buf, std::size_t n, bool& timed_out) {
    timed_out = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(options.timeout_s);
    auto* c = static_cast<char*>(buf);
    while (n > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) {
        timed_out = true;
        stop_host(true);
        return "no answer after " + seconds(options.timeout_s);
      }
      pollfd p{sock, POLLIN, 0};
      const int pr = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
      if (pr < 0 && errno == EINTR) continue;
      if (pr == 0) continue;  // the deadline check above ends it
      const ssize_t r = ::read(sock, c, n);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return stop_host(false);
      c += r;
      n -= static_cast<std::size_t>(r);
    }
    return "";
  }

  // A call hands the problem to the host and waits for it: waking a process on another CPU costs far
  // more than the call itself when calls are small (props: ~200 us per call on a 2-vCPU VM, the host on
  // the caller's CPU: a few us). So for small problems the host is kept on the caller's CPU; for large
  // ones (check's) it may use every CPU, its own threads included. Threads a plugin starts during a
  // small call inherit that CPU; they are free again only if it starts them anew. Best effort: a
  // refused sched_setaffinity changes nothing.
  void colocate(std::size_t arena_bytes) {
    constexpr std::size_t kSmallCall = std::size_t{1} << 20;
    const int want = arena_bytes <= kSmallCall ? ::sched_getcpu() : -1;
    if (want == host_cpu) return;
    cpu_set_t set;
    if (want >= 0) {
      CPU_ZERO(&set);
      CPU_SET(want, &set);
    } else if (::sched_getaffinity(0, sizeof set, &set) != 0) {
      return;
    }
    if (::sched_setaffinity(pid, sizeof set, &set) == 0) host_cpu = want;
  }

  // Starts the host and reads its hello. Returns "" when the library loaded; throws InputError
  // when the host says why it could not load it (unusable input); else what happened to the host.
  std::string start_host() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      throw InputError(std::string("cannot create a socket for the kernel host: ") + std::strerror(errno));
    const int mine = high_fd(sv[0]), theirs = high_fd(sv[1]);
    const std::string host = kernel_host_path().string();
    const std::string lib = absolute.string(), parent = std::to_string(::getpid());
    std::vector<char*> argv = {const_cast<char*>(host.c_str()), const_cast<char*>(lib.c_str()),
                               const_cast<char*>(parent.c_str()), const_cast<char*>(kernel_options.c_str()), nullptr};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, theirs, 3);
    posix_spawn_file_actions_adddup2(&fa, arena.fd, 4);
    posix_spawn_file_actions_adddup2(&fa, 2, 1);  // the kernel's stdout must not mix into ropecheck's report
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    std::fflush(stdout);
    std::fflush(stderr);
    const int err = ::posix_spawn(&pid, host.c_str(), &fa, &attr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    ::close(theirs);
    if (err != 0) {
      ::close(mine);
      pid = -1;
      throw InputError("cannot start the kernel host " + sanitize(host) + ": " + std::strerror(err) +
                        " (set ROPECHECK_KERNEL_HOST, or use --in-process)");
    }
    sock = mine;
    host_cpu = -1;
    pp::Hello hello;
    bool timed_out = false;
    const std::string why = receive(&hello, sizeof hello, timed_out);
    if (!why.empty()) return why + " while loading the library (in a load-time constructor)";
    if (hello.magic != pp::kHelloMagic) {
      stop_host(true);
      return "answered garbage while loading the library";
    }
    if (!hello.ok) {
      stop_host(false);
      hello.problem[sizeof hello.problem - 1] = hello.dl[sizeof hello.dl - 1] = '\0';
      input_error("kernel library " + sanitize(path.string()),
                   std::string(hello.problem) + (hello.dl[0] ? sanitize(hello.dl, 400) : std::string()));
    }
    hello.name[sizeof hello.name - 1] = '\0';
    abi_version = hello.abi_version;
    name = hello.name;
    rope_apply = hello.has_rope_apply != 0;
    rope_cos_sin = hello.has_rope_cos_sin != 0;
    sinusoidal = hello.has_sinusoidal != 0;
    capabilities = hello.capabilities;
    return "";
  }

  KernelCall fail(const std::string& happened, std::string_view what, bool give_up) {
    ++failed;
    ++consecutive;
    std::string m = who() + ": " + happened + " (" + sanitize(what, 300) + ")";
    if (first_failure.empty()) first_failure = m;
    if (consecutive == 1) streak_first = happened;
    if (gave_up.empty() && (give_up || consecutive >= kMaxConsecutiveFailures)) {
      gave_up = give_up ? happened : "the last " + std::to_string(consecutive) + " calls failed, the first " + streak_first;
      gave_up_for_good = give_up;
    }
    for (const auto& [off, bytes] : last_outputs) std::memset(arena.base + off, kNanByte, bytes);
    return {KernelCall::Status::failed, std::move(m)};
  }

  // Runs one call: the request's pointers are arena offsets.
  KernelCall call(pp::Request& q, const Layout& layout, std::size_t message_off, std::string_view what) {
    ++calls;
    const char* entry = pp::entry_name(q.entry);
    last_outputs.clear();
    for (const Layout::Writable& w : layout.writable)
      if (w.name != "message") last_outputs.emplace_back(w.offset, w.bytes);
    arena.reserve(layout.cursor);
    layout.fill(arena.base);
    if (!broken.empty()) return fail(broken, what, false);
    if (!gave_up.empty()) return fail("not called: ropecheck gave up on this kernel earlier (" + gave_up + ")", what, false);
    std::size_t g = 0;
    for (const Layout::Writable& w : layout.writable)
      if (g < pp::kMaxGuardPages) q.guard_pages[g++] = w.guard_page;
    q.arena_bytes = arena.size;

    int rc = 0;
    if (options.in_process) {
      rc = call_in_process(q, layout);
    } else {
      if (pid <= 0) {
        const std::string why = start_host();
        if (!why.empty()) return fail(why, what, true);
      }
      colocate(layout.cursor);
      pp::Reply reply;
      bool timed_out = false;
      std::string why = pp::send_all(sock, &q, sizeof q) ? receive(&reply, sizeof reply, timed_out) : stop_host(false);
      if (!why.empty()) return fail(why + " inside " + entry + smashed(layout), what, timed_out);
      rc = reply.rc;
    }

    // What the kernel did to its buffers.
    for (const Layout::Writable& w : layout.writable) {
      const bool msg = w.name == "message";
      if (!guard_intact(arena.base + w.offset + w.bytes))
        return fail(std::string(entry) + (msg ? " wrote past message_capacity (" + std::to_string(kMessageCapacity) + " bytes)"
                                              : " wrote past the end of its output " + w.name),
                    what, false);
      if (!guard_intact(arena.base + w.offset - kGuardBytes))
        return fail(std::string(entry) + " wrote before the start of its " + (msg ? std::string("message") : "output " + w.name),
                    what, false);
    }
    const char* m = reinterpret_cast<const char*>(arena.base + message_off);
    const std::string reason = [&] {
      std::string_view s(m, ::strnlen(m, kMessageCapacity));
      s = s.substr(0, std::min(s.find_first_of("\r\n"), s.size()));
      return sanitize(s, 300);
    }();
    if (rc != ROPECHECK_OK && rc != ROPECHECK_UNSUPPORTED)
      return fail(std::string(entry) + " returned " + std::to_string(rc) +
                      ", which is neither ROPECHECK_OK nor ROPECHECK_UNSUPPORTED" + (reason.empty() ? "" : " (" + reason + ")"),
                  what, false);
    if (rc == ROPECHECK_OK) {
      // Elements still holding the prefill pattern were never written.
      for (const Layout::Writable& w : layout.writable) {
        if (w.name == "message") continue;
        const std::size_t e = element_bytes_of(q);
        const std::size_t unwritten = count_prefill(arena.base + w.offset, w.bytes, e);
        if (unwritten > 0)
          return fail(std::string(entry) + " returned ROPECHECK_OK but left " + std::to_string(unwritten) + " of " +
                          std::to_string(w.bytes / e) + " elements of " + w.name + " unwritten",
                      what, false);
      }
    }
    consecutive = 0;
    return {rc == ROPECHECK_OK ? KernelCall::Status::ok : KernelCall::Status::unsupported, reason};
  }

  // After the host died: whether the kernel had written over a guard first (the likely cause).
  std::string smashed(const Layout& layout) const {
    for (const Layout::Writable& w : layout.writable) {
      if (!guard_intact(arena.base + w.offset + w.bytes)) return " (after writing past the end of its " + w.name + ")";
      if (!guard_intact(arena.base + w.offset - kGuardBytes)) return " (after writing before the start of its " + w.name + ")";
    }
    return "";
  }

  static std::size_t element_bytes_of(const pp::Request& q) {
    const std::int32_t d = q.entry == pp::Entry::rope_apply     ? q.p.rope.out_dtype
                           : q.entry == pp::Entry::rope_cos_sin ? q.p.table.out_dtype
                                                                : q.p.sinusoidal.out_dtype;
    return d == ROPECHECK_DTYPE_F64 ? 8 : d == ROPECHECK_DTYPE_F32 ? 4 : 2;
  }

  int call_in_process(pp::Request q, const Layout& layout) {
    auto* base = reinterpret_cast<char*>(arena.base);
    const std::size_t page = page_size();
    for (const Layout::Writable& w : layout.writable) ::mprotect(base + w.guard_page, page, PROT_NONE);
    const int rc = pp::call_entry(in_process, q, base);
    for (const Layout::Writable& w : layout.writable) ::mprotect(base + w.guard_page, page, PROT_READ | PROT_WRITE);
    return rc;
  }
};

KernelPlugin::KernelPlugin() = default;
KernelPlugin::~KernelPlugin() = default;
KernelPlugin::KernelPlugin(KernelPlugin&&) noexcept = default;
KernelPlugin& KernelPlugin::operator=(KernelPlugin&&) noexcept = default;

const std::filesystem::path& KernelPlugin::path() const { return s_->path; }
const std::string& KernelPlugin::name() const { return s_->name; }
std::string KernelPlugin::who() const { return s_->who(); }
std::uint32_t KernelPlugin::abi_version() const { return s_->abi_version; }
bool KernelPlugin::has_rope_apply() const { return s_->rope_apply; }
bool KernelPlugin::has_rope_cos_sin() const { return s_->rope_cos_sin; }
bool KernelPlugin::has_sinusoidal() const { return s_->sinusoidal; }
bool KernelPlugin::isolated() const { return !s_->options.in_process; }
std::uint64_t KernelPlugin::capabilities() const { return s_->capabilities; }
bool KernelPlugin::declares_dtype(std::int32_t d) const {
  const std::uint64_t all = ROPECHECK_CAP_OUT_F64 | ROPECHECK_CAP_OUT_F32 | ROPECHECK_CAP_OUT_F16 | ROPECHECK_CAP_OUT_BF16;
  if ((s_->capabilities & all) == 0) return true;
  return d >= 0 && d <= 3 && (s_->capabilities & ROPECHECK_CAP_OUT_DTYPE(d)) != 0;
}
void KernelPlugin::forgive() {
  if (s_->gave_up_for_good) return;
  s_->gave_up.clear();
  s_->consecutive = 0;
}
std::int64_t KernelPlugin::failed_calls() const { return s_->failed; }
std::int64_t KernelPlugin::calls() const { return s_->calls; }
const std::string& KernelPlugin::first_failure() const { return s_->first_failure; }

std::span<const std::uint8_t> KernelPlugin::output(int i) const {
  const auto& o = s_->last_outputs.at(static_cast<std::size_t>(i));
  return {s_->arena.base + o.first, o.second};
}

namespace {

// What every problem starts with: the ABI version, the output dtype, the spec's JSON (`json` must
// outlive the call: the layout copies inputs into the arena when the call is made).
template <class Problem>
void place_header(Layout& l, Problem& p, std::int32_t out_dtype, const std::string& json) {
  p.abi_version = ROPECHECK_KERNEL_ABI_VERSION;
  p.out_dtype = out_dtype;
  p.spec_json = offset_ptr<const char>(l.input(json.c_str(), json.size() + 1));
}

// A RoPE problem's parameters (frequencies and LongRoPE factors placed in the arena) and positions.
template <class Problem>
void place_rope(Layout& l, Problem& p, const RopeInputs& in) {
  p.rope = in.rope;
  p.rope.inv_freq = offset_ptr<const double>(l.input(in.inv_freq.data(), in.inv_freq.size_bytes()));
  p.rope.longrope_ext = offset_ptr<const double>(l.input(in.longrope_ext.data(), in.longrope_ext.size_bytes()));
  p.tokens = in.tokens;
  p.position_streams = in.position_streams;
  p.positions = offset_ptr<const std::int64_t>(l.input(in.positions.data(), in.positions.size_bytes()));
}

// The message buffer, the last writable one; returns its offset.
template <class Problem>
std::size_t place_message(Layout& l, Problem& p) {
  const std::size_t msg = l.output("message", kMessageCapacity);
  p.message = offset_ptr<char>(msg);
  p.message_capacity = kMessageCapacity;
  return msg;
}

}  // namespace

KernelCall KernelPlugin::rope_apply(const RopeInputs& in, const char* input_name, std::int32_t heads, std::span<const float> x,
                                    std::int32_t out_dtype, std::size_t out_bytes, std::string_view what) {
  Layout l;
  pp::Request q;
  q.entry = pp::Entry::rope_apply;
  ropecheck_rope_problem& p = q.p.rope;
  const std::string json(in.spec_json);  // outlives the call: the layout copies it into the arena then
  place_header(l, p, out_dtype, json);
  place_rope(l, p, in);
  p.input_name = offset_ptr<const char>(l.input(input_name, std::strlen(input_name) + 1));
  p.heads = heads;
  p.x = offset_ptr<const float>(l.input(x.data(), x.size_bytes()));
  p.out = offset_ptr<void>(l.output("out", out_bytes));
  const std::size_t msg = place_message(l, p);
  return s_->call(q, l, msg, what);
}

KernelCall KernelPlugin::rope_cos_sin(const RopeInputs& in, std::int32_t out_dtype, std::size_t table_bytes, std::string_view what) {
  Layout l;
  pp::Request q;
  q.entry = pp::Entry::rope_cos_sin;
  ropecheck_table_problem& p = q.p.table;
  const std::string json(in.spec_json);  // outlives the call: the layout copies it into the arena then
  place_header(l, p, out_dtype, json);
  place_rope(l, p, in);
  p.cos = offset_ptr<void>(l.output("cos", table_bytes));
  p.sin = offset_ptr<void>(l.output("sin", table_bytes));
  const std::size_t msg = place_message(l, p);
  return s_->call(q, l, msg, what);
}

KernelCall KernelPlugin::sinusoidal(std::string_view spec_json, const ropecheck_sinusoidal_params& params,
                                    std::span<const std::int64_t> positions, std::int32_t out_dtype, std::size_t out_bytes,
                                    std::string_view what) {
  Layout l;
  pp::Request q;
  q.entry = pp::Entry::sinusoidal;
  ropecheck_sinusoidal_problem& p = q.p.sinusoidal;
  const std::string json(spec_json);  // outlives the call: the layout copies it into the arena then
  place_header(l, p, out_dtype, json);
  p.sinusoidal = params;
  p.tokens = static_cast<std::int64_t>(positions.size());
  p.positions = offset_ptr<const std::int64_t>(l.input(positions.data(), positions.size_bytes()));
  p.out = offset_ptr<void>(l.output("out", out_bytes));
  const std::size_t msg = place_message(l, p);
  return s_->call(q, l, msg, what);
}

namespace detail {
extern const char* const kernel_host_build_path;  // generated: this build tree's host (plugin/CMakeLists.txt)
}

std::filesystem::path kernel_host_path() {
  namespace fs = std::filesystem;
  if (const char* e = std::getenv("ROPECHECK_KERNEL_HOST"); e && *e) return e;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& p : {self.parent_path() / "ropecheck-kernel-host",
                              self.parent_path().parent_path() / "libexec" / "ropecheck" / "ropecheck-kernel-host"})
      if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return detail::kernel_host_build_path;
}

std::pair<std::filesystem::path, std::string> split_kernel_options(const std::string& name) {
  std::error_code ec;
  if (std::filesystem::exists(name, ec)) return {name, ""};
  const std::size_t slash = name.rfind('/');
  const std::size_t colon = name.find(':', slash == std::string::npos ? 0 : slash + 1);
  if (colon == std::string::npos) return {name, ""};
  return {name.substr(0, colon), name.substr(colon + 1)};
}

KernelPlugin load_kernel_plugin(const std::filesystem::path& name, const PluginClientOptions& options) {
  const auto [library, kernel_options] = split_kernel_options(name.string());
  const std::string where = "kernel library " + sanitize(library.string());
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(library, ec);
  if (ec || !std::filesystem::exists(st)) input_error(where, "no such file");
  if (!std::filesystem::is_regular_file(st)) input_error(where, "not a regular file");
  if (!(options.timeout_s > 0) || !std::isfinite(options.timeout_s))
    throw InputError("--kernel-timeout: must be a positive number of seconds");
  auto s = std::make_unique<KernelPlugin::State>();
  s->path = name;
  s->kernel_options = kernel_options;
  s->absolute = std::filesystem::absolute(library, ec);
  if (ec) input_error(where, "cannot resolve the path: " + ec.message());
  s->options = options;
  s->arena.open();
  if (options.in_process) {
    std::string dl;
    const std::string problem = pp::open_kernel_library(s->absolute.c_str(), s->kernel_options, s->in_process, dl);
    if (!problem.empty()) input_error(where, problem + (dl.empty() ? std::string() : sanitize(dl, 400)));
    s->abi_version = s->in_process.abi_version;
    s->name = s->in_process.name;
    s->rope_apply = s->in_process.rope_apply != nullptr;
    s->rope_cos_sin = s->in_process.rope_cos_sin != nullptr;
    s->sinusoidal = s->in_process.sinusoidal != nullptr;
    s->capabilities = s->in_process.capabilities;
  } else {
    const std::string why = s->start_host();
    if (!why.empty()) {
      // The library cannot even be loaded without killing its process: every call fails with that.
      s->broken = why;
      s->rope_apply = s->rope_cos_sin = s->sinusoidal = true;
      s->abi_version = ROPECHECK_KERNEL_ABI_VERSION;
    }
  }
  s->name = sanitize(s->name, 128);
  if (s->name.empty()) s->name = library.filename().string();
  KernelPlugin k;
  k.s_ = std::move(s);
  return k;
}

}  // namespace ropecheck::plugin
