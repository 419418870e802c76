// The kernel host process (ropecheck-kernel-host, host_main.cpp) as the plugin client sees it:
// starting it, waiting for its answers, stopping it, and whose doing its end was. Private to the
// plugin client.
//
// The host runs in a process group of its own, so that a terminal's Ctrl-C or Ctrl-Z, and a kernel's
// kill(0, SIG), reach only one side; it inherits the signals ropecheck ignores (nohup, a background
// job's SIGINT). Waits count only time ropecheck could run: a job stopped for a while (Ctrl-Z, a frozen
// CI runner) does not use up a kernel's timeout. The host's exit is watched through a pidfd as well as
// the socket, so a process the kernel forked that still holds the socket does not hide a crash.
// Stopping is bounded: EOF, a grace period for the library's destructors, then SIGKILL to the whole
// group (the host and anything it forked that stayed in its group).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "protocol.hpp"

namespace ropecheck::plugin::detail {

std::string signal_name(int sig);

// How the host ended and whose doing it was.
struct HostEnd {
  enum class Cause {
    kernel,     // a crash, an exit, a signal the kernel raised itself
    ropecheck,  // killed by ropecheck (a timeout, a stop past the grace period)
    external,   // a signal ropecheck did not send and the kernel did not raise (another process, the terminal)
  };
  Cause cause = Cause::kernel;
  std::string text;  // "exited with status 0", "killed by SIGSEGV", "killed by SIGTERM sent by process 42"
};

class HostProcess {
 public:
  HostProcess() = default;
  ~HostProcess();  // stop()
  HostProcess(const HostProcess&) = delete;
  HostProcess& operator=(const HostProcess&) = delete;

  // Starts `host` for `library`; InputError (naming the host) when it cannot be started at all.
  // `grace_s`: how long stop() waits for the host to exit on its own.
  void spawn(const std::string& host, const std::string& library, const std::string& options, int arena_fd,
             double grace_s);
  bool running() const { return pid_ > 0; }

  enum class Wait { done, timeout, closed };
  // Reads exactly n bytes, waiting at most timeout_s seconds of time ropecheck could run. closed: the
  // socket closed or the host exited before they came.
  Wait receive(void* buf, std::size_t n, double timeout_s);
  bool send(const void* p, std::size_t n);

  // Ends the host: closes the socket (the host returns from main, running the library's destructors
  // and atexit handlers), waits up to the grace period, then SIGKILLs its process group. `overdue`
  // (may be null) tells whether the grace period ran out.
  HostEnd stop(bool* overdue = nullptr);
  // Ends the host at once (after a timeout): SIGKILL to its process group.
  HostEnd kill();

  // Small calls run the host on the caller's CPU (client.cpp); best effort.
  void colocate(std::size_t arena_bytes);
  double grace() const { return grace_s_; }

 private:
  bool wait_exit(double limit_s);
  HostEnd finish();
  HostEnd classify(int status) const;
  std::vector<plugin_protocol::Notice> notices() const;

  pid_t pid_ = -1;
  int sock_ = -1, pidfd_ = -1, notices_ = -1;
  int host_cpu_ = -1;  // the CPU the host is kept on, -1: wherever the scheduler puts it
  double grace_s_ = 5;
  bool killed_by_us_ = false;
  std::optional<int> status_;  // once reaped
};

// A host started for `library` and read up to its hello. `failure` is "" when the hello came (it
// may still say the library is unusable: hello.ok == 0), else what happened while loading, naming the
// step (a load-time constructor, ropecheck_kernel_configure, ropecheck_kernel_name / _capabilities);
// `end` says whose doing that was. InputError, naming the host, when the host itself is unusable: it
// cannot be started, dies or hangs before it says it started, or speaks another protocol (a host of
// another ropecheck build).
struct Loaded {
  std::string failure;
  HostEnd end;
  plugin_protocol::Hello hello;
};
Loaded start_and_load(HostProcess& host, const std::string& host_path, const std::string& library,
                      const std::string& options, int arena_fd, double timeout_s, double grace_s);

}  // namespace ropecheck::plugin::detail
