#include "host_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <thread>

#include "arena.hpp"
#include "ropecheck/core/input_error.hpp"
#include "ropecheck/core/one_line.hpp"
#include "ropecheck/plugin/client.hpp"

extern char** environ;

namespace ropecheck::plugin {
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

}  // namespace ropecheck::plugin

namespace ropecheck::plugin::detail {

namespace pp = plugin_protocol;

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
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGPIPE: return "SIGPIPE";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGALRM: return "SIGALRM";
    default: return "signal " + std::to_string(sig);
  }
}

namespace {

// Signals only the faulting code itself brings about (or abort()): always the kernel's.
bool is_fault(int sig) {
  return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGABRT || sig == SIGTRAP ||
         sig == SIGSYS;
}

// poll() for at most limit_s seconds of time this process could run. Each wait is a slice of at most
// a quarter second; a slice that took longer than asked means the process was not running (stopped
// by Ctrl-Z or SIGSTOP, a frozen CI job, a suspended machine), and counts as its length only.
int poll_counting(pollfd* fds, nfds_t n, double limit_s, double& counted) {
  constexpr double kSlice = 0.25;
  while (counted < limit_s) {
    const double slice = std::min(kSlice, limit_s - counted);
    const auto t0 = std::chrono::steady_clock::now();
    const int r = ::poll(fds, n, std::max(1, static_cast<int>(std::ceil(slice * 1000))));
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
    counted += std::min(took.count(), slice);
    if (r < 0 && errno == EINTR) continue;
    if (r != 0) return r;
  }
  return 0;
}

}  // namespace

HostProcess::~HostProcess() {
  if (running()) stop();
}

void HostProcess::spawn(const std::string& host, const std::string& library, const std::string& options, int arena_fd,
                        double grace_s) {
  int sv[2], pf[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw InputError(std::string("cannot create a socket for the kernel host: ") + std::strerror(errno));
  const int mine = high_fd(sv[0]), theirs = high_fd(sv[1]);
  if (::pipe2(pf, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(mine);
    ::close(theirs);
    throw InputError(std::string("cannot create a pipe for the kernel host: ") + std::strerror(errno));
  }
  const int notices = high_fd(pf[0]), notices_w = high_fd(pf[1]);
  const std::string parent = std::to_string(::getpid());
  std::vector<char*> argv = {const_cast<char*>(host.c_str()), const_cast<char*>(library.c_str()),
                             const_cast<char*>(parent.c_str()), const_cast<char*>(options.c_str()), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, theirs, 3);
  posix_spawn_file_actions_adddup2(&fa, arena_fd, 4);
  posix_spawn_file_actions_adddup2(&fa, notices_w, 5);
  posix_spawn_file_actions_adddup2(&fa, 2, 1);  // the kernel's stdout must not mix into ropecheck's report
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  // No POSIX_SPAWN_SETSIGDEF: exec resets the signals ropecheck catches, and the ones it ignores stay
  // ignored in the host too.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = -1;
  const int err = ::posix_spawn(&pid, host.c_str(), &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(theirs);
  ::close(notices_w);
  if (err != 0) {
    ::close(mine);
    ::close(notices);
    throw InputError("cannot start the kernel host " + sanitize(host) + ": " + std::strerror(err) +
                     " (set ROPECHECK_KERNEL_HOST, or use --in-process)");
  }
  pid_ = pid;
  sock_ = mine;
  notices_ = notices;
  pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));  // -1 before Linux 5.3: the socket alone
  grace_s_ = grace_s;
  host_cpu_ = -1;
  killed_by_us_ = false;
  status_.reset();
}

bool HostProcess::send(const void* p, std::size_t n) { return sock_ >= 0 && pp::send_all(sock_, p, n); }

HostProcess::Wait HostProcess::receive(void* buf, std::size_t n, double timeout_s) {
  auto* c = static_cast<char*>(buf);
  double counted = 0;
  while (n > 0) {
    pollfd p[2] = {{sock_, POLLIN, 0}, {pidfd_, POLLIN, 0}};
    const int r = poll_counting(p, pidfd_ >= 0 ? 2 : 1, timeout_s, counted);
    if (r == 0) return Wait::timeout;
    if (r < 0) return Wait::closed;
    if (p[0].revents != 0) {  // what the host sent before it exited is read first
      const ssize_t k = ::read(sock_, c, n);
      if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (k <= 0) return Wait::closed;
      c += k;
      n -= static_cast<std::size_t>(k);
      continue;
    }
    if (p[1].revents != 0) return Wait::closed;  // the host exited; something it forked may hold the socket
  }
  return Wait::done;
}

bool HostProcess::wait_exit(double limit_s) {
  double counted = 0;
  if (pidfd_ >= 0) {
    pollfd p{pidfd_, POLLIN, 0};
    return poll_counting(&p, 1, limit_s, counted) > 0;
  }
  for (;;) {  // no pidfd: reap as soon as it exits
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      status_ = status;
      return true;
    }
    if (counted >= limit_s) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    counted += 0.01;
  }
}

HostEnd HostProcess::finish() {
  // The group is signalled while the host is still unreaped, so its id cannot have been reused.
  ::kill(-pid_, SIGKILL);
  if (!status_) {
    int status = 0;
    pid_t r;
    do r = ::waitpid(pid_, &status, 0);
    while (r < 0 && errno == EINTR);
    status_ = r == pid_ ? status : 0;
  }
  const HostEnd end = classify(*status_);
  if (sock_ >= 0) ::close(sock_);
  if (pidfd_ >= 0) ::close(pidfd_);
  if (notices_ >= 0) ::close(notices_);
  sock_ = pidfd_ = notices_ = -1;
  pid_ = -1;
  return end;
}

HostEnd HostProcess::stop(bool* overdue) {
  if (overdue) *overdue = false;
  if (pid_ <= 0) return {HostEnd::Cause::kernel, "gone"};
  if (sock_ >= 0) ::close(sock_);
  sock_ = -1;
  if (!wait_exit(grace_s_)) {
    killed_by_us_ = true;
    if (overdue) *overdue = true;
  }
  return finish();
}

HostEnd HostProcess::kill() {
  if (pid_ <= 0) return {HostEnd::Cause::kernel, "gone"};
  killed_by_us_ = true;
  return finish();
}

std::vector<pp::Notice> HostProcess::notices() const {
  std::vector<pp::Notice> out;
  pp::Notice n;
  while (notices_ >= 0 && ::read(notices_, &n, sizeof n) == static_cast<ssize_t>(sizeof n))
    if (n.magic == pp::kNoticeMagic) out.push_back(n);
  return out;
}

HostEnd HostProcess::classify(int status) const {
  using Cause = HostEnd::Cause;
  if (WIFEXITED(status)) return {Cause::kernel, "exited with status " + std::to_string(WEXITSTATUS(status))};
  if (!WIFSIGNALED(status)) return {Cause::kernel, "stopped"};
  const int sig = WTERMSIG(status);
  const std::string name = signal_name(sig);
  if (sig == SIGKILL && killed_by_us_) return {Cause::ropecheck, "killed by ropecheck (SIGKILL)"};
  if (is_fault(sig)) return {Cause::kernel, "killed by " + name};
  const pp::Notice* seen = nullptr;
  const std::vector<pp::Notice> all = notices();
  for (const pp::Notice& n : all)
    if (n.signal == sig) seen = &n;
  if (seen && seen->from_self) return {Cause::kernel, "killed by " + name + ", which it raised itself"};
  if (seen && seen->code == SI_USER) return {Cause::external, "killed by " + name + " sent by process " + std::to_string(seen->sender)};
  if (seen) return {Cause::external, "killed by " + name + " from the system (si_code " + std::to_string(seen->code) + ")"};
  if (sig == SIGKILL)
    return {Cause::external, "killed by SIGKILL, which ropecheck did not send (the out-of-memory killer, or another process)"};
  return {Cause::external, "killed by " + name + ", which the kernel did not raise as far as ropecheck can tell"};
}

// A call hands the problem to the host and waits for it: waking a process on another CPU costs far
// more than the call itself when calls are small (props: ~200 us per call on a 2-vCPU VM, the host on
// the caller's CPU: a few us). So for small problems the host is kept on the caller's CPU; for large
// ones (check's) it may use every CPU, its own threads included. Threads a plugin starts during a
// small call inherit that CPU; they are free again only if it starts them anew. Best effort: a
// refused sched_setaffinity changes nothing.
void HostProcess::colocate(std::size_t arena_bytes) {
  constexpr std::size_t kSmallCall = std::size_t{1} << 20;
  const int want = arena_bytes <= kSmallCall ? ::sched_getcpu() : -1;
  if (want == host_cpu_) return;
  cpu_set_t set;
  if (want >= 0) {
    CPU_ZERO(&set);
    CPU_SET(want, &set);
  } else if (::sched_getaffinity(0, sizeof set, &set) != 0) {
    return;
  }
  if (::sched_setaffinity(pid_, sizeof set, &set) == 0) host_cpu_ = want;
}

namespace {

std::string seconds(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%g s", s);
  return b;
}

// Where a death or a hang during loading happened, by the last step the host reported.
std::string load_step_text(pp::LoadStep step) {
  switch (step) {
    case pp::LoadStep::configure: return "inside ropecheck_kernel_configure";
    case pp::LoadStep::query: return "inside ropecheck_kernel_name or ropecheck_kernel_capabilities";
    default: return "while loading the library (in a load-time constructor)";
  }
}

}  // namespace

Loaded start_and_load(HostProcess& host, const std::string& host_path, const std::string& library,
                      const std::string& options, int arena_fd, double timeout_s, double grace_s) {
  const std::string host_name = "the kernel host " + sanitize(host_path);
  host.spawn(host_path, library, options, arena_fd, grace_s);
  Loaded l;
  pp::Progress p;
  HostProcess::Wait w = host.receive(&p, sizeof p, timeout_s);
  if (w != HostProcess::Wait::done) {
    l.end = w == HostProcess::Wait::timeout ? host.kill() : host.stop();
    l.failure = l.end.text + " before it started";
    if (l.end.cause == HostEnd::Cause::external) return l;
    throw InputError(host_name + (w == HostProcess::Wait::timeout ? " did not start within " + seconds(timeout_s)
                                                                   : " " + l.failure) +
                     " (is it a ropecheck-kernel-host? set ROPECHECK_KERNEL_HOST, or use --in-process)");
  }
  if (p.magic != pp::kProgressMagic || p.step != pp::LoadStep::started || p.protocol != pp::kProtocolVersion ||
      p.sizes != pp::message_sizes()) {
    host.kill();
    throw InputError(host_name + " is not this ropecheck's kernel host (it does not speak protocol " +
                     std::to_string(pp::kProtocolVersion) +
                     " of this build: a host of another ropecheck version? set ROPECHECK_KERNEL_HOST, or use --in-process)");
  }
  pp::LoadStep step = pp::LoadStep::started;
  while (step != pp::LoadStep::loaded) {
    w = host.receive(&p, sizeof p, timeout_s);
    if (w != HostProcess::Wait::done) {
      l.end = w == HostProcess::Wait::timeout ? host.kill() : host.stop();
      l.failure = (w == HostProcess::Wait::timeout ? "no answer after " + seconds(timeout_s) : l.end.text) + " " +
                  load_step_text(step);
      return l;
    }
    if (p.magic != pp::kProgressMagic) {
      l.end = host.kill();
      l.failure = "answered garbage while loading the library";
      return l;
    }
    step = p.step;
  }
  w = host.receive(&l.hello, sizeof l.hello, timeout_s);
  if (w != HostProcess::Wait::done || l.hello.magic != pp::kHelloMagic) {
    l.end = host.kill();
    l.failure = "answered garbage while loading the library";
  }
  return l;
}

}  // namespace ropecheck::plugin::detail
