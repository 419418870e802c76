// ropecheck-kernel-host: the process a kernel plugin runs in (host_process.cpp starts it).
//
//   ropecheck-kernel-host LIBRARY PARENT_PID OPTIONS   socket on fd 3, the arena memfd on fd 4, the
//                                                     notice pipe on fd 5
//                                                     (OPTIONS: for ropecheck_kernel_configure, "" = none)
//
// Says it started, loads LIBRARY (its constructors run here) reporting each step, says hello, then
// serves calls until the socket closes (protocol.hpp). Everything the kernel can break is in this
// process; the client reads the outcome from the exit status, the reply, the notices and the guard
// bytes in the shared arena.
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "protocol.hpp"

namespace pp = ropecheck::plugin::plugin_protocol;

namespace {

constexpr int kSocket = 3;
constexpr int kArena = 4;
constexpr int kNotices = 5;

bool read_all(void* p, std::size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::read(kSocket, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

void copy(char* dst, std::size_t cap, const std::string& s) {
  const std::size_t n = s.size() < cap - 1 ? s.size() : cap - 1;
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

void report_step(pp::LoadStep step) {
  pp::Progress p;
  p.step = step;
  p.sizes = pp::message_sizes();
  (void)pp::send_all(kSocket, &p, sizeof p);
}

// Async-signal-safe: tells the client who sent the signal, then dies of it as if it were not handled.
extern "C" void on_termination_signal(int sig, siginfo_t* info, void*) {
  pp::Notice n;
  n.signal = sig;
  n.code = info ? info->si_code : 0;
  n.sender = info ? info->si_pid : 0;
  // raise / tgkill (SI_TKILL) and kill (SI_USER) by this process, or a write to a closed pipe.
  n.from_self = info && (info->si_code == SI_USER || info->si_code == SI_TKILL || info->si_code == SI_QUEUE) &&
                info->si_pid == ::getpid();
  (void)::write(kNotices, &n, sizeof n);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// The termination signals that are not ignored (an ignored one stays ignored: the host inherits
// ropecheck's dispositions) get the notice handler; a kernel that installs its own replaces it.
void watch_termination_signals() {
  for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGPIPE, SIGVTALRM, SIGPROF, SIGXCPU,
                  SIGXFSZ}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_sigaction = on_termination_signal;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

// Serves calls until the socket closes; returns the exit status.
int serve(const pp::Symbols& s) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  char* base = nullptr;
  std::uint64_t mapped = 0;
  // The guard pages stay protected between calls (only the kernel touches this mapping; the client
  // writes through its own): a call whose layout repeats the last one's costs no mprotect.
  std::uint64_t guarded[pp::kMaxGuardPages] = {};
  auto listed = [](const std::uint64_t* pages, std::uint64_t g) {
    for (std::size_t i = 0; i < pp::kMaxGuardPages; ++i)
      if (pages[i] == g) return true;
    return false;
  };
  pp::Request q;
  while (read_all(&q, sizeof q)) {
    if (q.arena_bytes != mapped) {
      if (base) ::munmap(base, mapped);
      void* m = ::mmap(nullptr, q.arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, kArena, 0);
      if (m == MAP_FAILED) return 66;
      base = static_cast<char*>(m);
      mapped = q.arena_bytes;
      std::fill(std::begin(guarded), std::end(guarded), 0);
    }
    for (std::uint64_t g : guarded)  // the last call's guards that are buffers now
      if (g && !listed(q.guard_pages, g)) ::mprotect(base + g, page, PROT_READ | PROT_WRITE);
    for (std::uint64_t g : q.guard_pages)
      if (g && !listed(guarded, g)) ::mprotect(base + g, page, PROT_NONE);
    std::copy(std::begin(q.guard_pages), std::end(q.guard_pages), std::begin(guarded));
    pp::Reply reply;
    reply.rc = pp::call_entry(s, q, base);
    if (!pp::send_all(kSocket, &reply, sizeof reply)) return 0;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return 64;
  // Die with ropecheck: the host must never outlive the process it serves.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (std::to_string(::getppid()) != argv[2]) return 65;
  watch_termination_signals();
  report_step(pp::LoadStep::started);

  pp::Symbols s;
  std::string dl;
  const std::string problem = pp::open_kernel_library(argv[1], argv[3], s, dl, report_step);
  report_step(pp::LoadStep::loaded);
  pp::Hello hello;
  hello.ok = problem.empty() ? 1 : 0;
  hello.abi_version = s.abi_version;
  hello.has_rope_apply = s.rope_apply != nullptr;
  hello.has_rope_cos_sin = s.rope_cos_sin != nullptr;
  hello.has_sinusoidal = s.sinusoidal != nullptr;
  hello.has_rope_attention = s.rope_attention != nullptr;
  hello.has_rope_quantize = s.rope_quantize != nullptr;
  hello.has_rope_append_kv = s.rope_append_kv != nullptr;
  hello.has_capabilities = s.has_capabilities;
  hello.capabilities = s.capabilities;
  copy(hello.name, sizeof hello.name, s.name);
  copy(hello.problem, sizeof hello.problem, problem);
  copy(hello.dl, sizeof hello.dl, dl);
  if (!pp::send_all(kSocket, &hello, sizeof hello) || !hello.ok) return 0;
  return serve(s);
}
