// The plugin client's state (client.hpp: KernelPlugin::State) and how a call's problem is placed in the
// arena: shared by client.cpp (loading, the v1 entry points) and client_attention.cpp (the fused entry
// point, kernel_abi.h revision 2). Private to the plugin client.
#pragma once

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

#include <fmt/core.h>

#include "arena.hpp"
#include "host_process.hpp"
#include "protocol.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"
#include "ropecheck/kut/kernel_under_test.hpp"
#include "ropecheck/plugin/client.hpp"

namespace ropecheck::plugin {

namespace pp = plugin_protocol;
using detail::HostEnd;
using detail::HostProcess;
using detail::Layout;

inline constexpr std::uint32_t kMessageCapacity = 512;
inline constexpr int kMaxConsecutiveFailures = 3;
// A host that exits normally does so in milliseconds; a library whose destructors tear down a GPU
// context may take a second or two. Past this (or the kernel timeout, if shorter) it is killed.
inline constexpr double kStopGrace = 5;
// A host killed by a signal that is not the kernel's doing: the call is made again on a fresh host,
// this many times in all, before the run is given up as interrupted (exit 2).
inline constexpr int kMaxExternalTries = 3;

inline std::string seconds(double s) { return fmt::format("{:g} s", s); }

template <class T>
T* offset_ptr(std::size_t off) {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(off));
}

struct KernelPlugin::State {
  std::filesystem::path path, absolute;
  std::string kernel_options;  // for ropecheck_kernel_configure ("" = none)
  std::string name;
  PluginClientOptions options;
  std::uint32_t abi_version = 0;
  bool rope_apply = false, rope_cos_sin = false, sinusoidal = false, rope_attention = false;
  bool rope_quantize = false, rope_append_kv = false;  // revision 3
  std::uint64_t capabilities = 0;

  pp::Symbols in_process;  // --in-process: the library in this process
  detail::Arena arena;
  HostProcess host;
  std::string broken;  // why every call fails (the host died or hung while loading the library)
  std::string gave_up, streak_first;
  bool gave_up_for_good = false;  // after a timeout or a host that would not start: never call again
  int consecutive = 0;
  std::int64_t calls = 0, failed = 0;
  std::string first_failure;
  std::vector<std::pair<std::size_t, std::size_t>> last_outputs;  // offset, bytes
  detail::OutputSnapshot snapshot;                               // the last ok call's outputs

  std::string who() const { return "kernel '" + name + "' (" + sanitize(path.string()) + ")"; }
  double grace() const { return std::min(options.timeout_s, kStopGrace); }

  ~State() {
    if (in_process.handle) ::dlclose(in_process.handle);
  }

  [[noreturn]] void interrupted(const HostEnd& end, std::string_view during) const {
    throw kut::KernelRunInterrupted(who() + ": the kernel host was " + end.text + " " + std::string(during) + ", " +
                                    std::to_string(kMaxExternalTries) +
                                    " times: not the kernel's doing, and no verdict without it (is something killing "
                                    "ropecheck-kernel-host processes?)");
  }

  // Starts the host and reads its progress and hello. Returns "" when the library loaded, else what
  // happened to the host (the kernel's failure while loading). Throws InputError when the host says
  // why it could not load the library (unusable input) and when the host itself is unusable (a missing
  // or foreign binary: exit 2 naming the host).
  std::string start_host() {
    for (int attempt = 1;; ++attempt) {
      HostEnd end;
      const std::string why = start_host_once(end);
      if (why.empty() || end.cause != HostEnd::Cause::external) return why;
      if (attempt == kMaxExternalTries) interrupted(end, "while loading the library");
    }
  }

  std::string start_host_once(HostEnd& end) {
    detail::Loaded l = detail::start_and_load(host, kernel_host_path().string(), absolute.string(), kernel_options,
                                              arena.fd(), options.timeout_s, grace());
    end = l.end;
    if (!l.failure.empty()) return l.failure;
    pp::Hello& hello = l.hello;
    if (!hello.ok) {
      host.stop();
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
    rope_attention = hello.has_rope_attention != 0;
    rope_quantize = hello.has_rope_quantize != 0;
    rope_append_kv = hello.has_rope_append_kv != 0;
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
    for (const auto& [off, bytes] : last_outputs) std::memset(arena.base() + off, detail::kNanByte, bytes);
    return {KernelCall::Status::failed, std::move(m)};
  }

  // A write into the last ok call's outputs since it returned: "" or one line naming the call.
  std::string late_write() const {
    const std::string out = snapshot.changed(arena.base());
    if (out.empty()) return "";
    return snapshot.entry() + " wrote to its output " + out + " after returning";
  }

  // Runs the request on the host (started first if need be); "" and the return code, or why it failed.
  std::string call_isolated(pp::Request& q, Layout& layout, const char* entry, bool& give_up, int& rc) {
    for (int attempt = 1;; ++attempt) {
      if (!host.running()) {
        const std::string why = start_host();
        if (!why.empty()) {
          give_up = true;
          return why;
        }
      }
      host.colocate(layout.cursor);
      pp::Reply reply;
      const HostProcess::Wait w =
          host.send(&q, sizeof q) ? host.receive(&reply, sizeof reply, options.timeout_s) : HostProcess::Wait::closed;
      if (w == HostProcess::Wait::done) {
        rc = reply.rc;
        return "";
      }
      bool overdue = false;
      const HostEnd end = w == HostProcess::Wait::timeout ? host.kill() : host.stop(&overdue);
      if (end.cause == HostEnd::Cause::external) {  // not the kernel's doing: the same call on a fresh host
        if (attempt == kMaxExternalTries) interrupted(end, std::string("inside ") + entry);
        layout.fill(arena.base());
        continue;
      }
      give_up = w == HostProcess::Wait::timeout || overdue;
      const std::string happened = w == HostProcess::Wait::timeout ? "no answer after " + seconds(options.timeout_s)
                                   : overdue ? "closed its connection to ropecheck and did not exit within " +
                                                   seconds(grace()) + " (killed)"
                                             : end.text;
      return happened + " inside " + entry + detail::smashed_note(arena.base(), layout);
    }
  }

  // Runs one call: the request's pointers are arena offsets.
  KernelCall call(pp::Request& q, Layout& layout, std::size_t message_off, std::string_view what) {
    ++calls;
    const char* entry = pp::entry_name(q.entry);
    // Compared before the arena is filled for this call: the last call's outputs are still there.
    const std::string late = late_write();
    const std::string late_what = snapshot.what();
    snapshot.clear();
    last_outputs.clear();
    for (const Layout::Writable& w : layout.writable)
      if (!w.message) last_outputs.emplace_back(w.offset, w.bytes);
    arena.reserve(layout.cursor);
    layout.fill(arena.base());
    if (!late.empty()) {
      if (host.running()) host.kill();  // with whatever it left running
      return fail(late + " (the call before this one: " + sanitize(late_what, 300) + ")", what, false);
    }
    if (!broken.empty()) return fail(broken, what, false);
    if (!gave_up.empty()) return fail("not called: ropecheck gave up on this kernel earlier (" + gave_up + ")", what, false);
    std::size_t g = 0;
    for (std::size_t page : layout.guard_pages)
      if (g < pp::kMaxGuardPages) q.guard_pages[g++] = page;
    q.arena_bytes = arena.size();

    int rc = 0;
    if (options.in_process) {
      rc = call_in_process(q, layout);
    } else {
      bool give_up = false;
      const std::string why = call_isolated(q, layout, entry, give_up, rc);
      if (!why.empty()) return fail(why, what, give_up);
    }
    if (std::string broke = detail::guard_failure(arena.base(), layout, entry, kMessageCapacity); !broke.empty())
      return fail(broke, what, false);
    const char* m = reinterpret_cast<const char*>(arena.base() + message_off);
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
      const std::size_t e = element_bytes_of(q);
      for (const Layout::Writable& w : layout.writable) {
        if (w.message || !w.prefill_checked) continue;
        const std::size_t unwritten = detail::count_prefill(arena.base() + w.offset, w.bytes, e);
        if (unwritten > 0)
          return fail(std::string(entry) + " returned ROPECHECK_OK but left " + std::to_string(unwritten) + " of " +
                          std::to_string(w.bytes / e) + " elements of " + w.name + " unwritten",
                      what, false);
      }
      snapshot.take(arena.base(), layout, entry, std::string(what));
    }
    consecutive = 0;
    return {rc == ROPECHECK_OK ? KernelCall::Status::ok : KernelCall::Status::unsupported, reason};
  }

  static std::size_t element_bytes_of(const pp::Request& q) {
    const std::int32_t d = q.entry == pp::Entry::rope_apply       ? q.p.rope.out_dtype
                           : q.entry == pp::Entry::rope_cos_sin   ? q.p.table.out_dtype
                           : q.entry == pp::Entry::rope_attention ? q.p.attention.out_dtype
                           : q.entry == pp::Entry::rope_quantize  ? q.p.quantize.store.scale_dtype  // its scales
                           : q.entry == pp::Entry::rope_append_kv ? q.p.append.out_dtype
                                                                  : q.p.sinusoidal.out_dtype;
    return d == ROPECHECK_DTYPE_F64 ? 8 : d == ROPECHECK_DTYPE_F32 ? 4 : 2;
  }

  int call_in_process(pp::Request q, const Layout& layout) {
    auto* base = reinterpret_cast<char*>(arena.base());
    const std::size_t page = detail::page_size();
    for (std::size_t g : layout.guard_pages) ::mprotect(base + g, page, PROT_NONE);
    const int rc = pp::call_entry(in_process, q, base);
    for (std::size_t g : layout.guard_pages) ::mprotect(base + g, page, PROT_READ | PROT_WRITE);
    return rc;
  }

  // The end of the run: a write into the last outputs before or while the host stops (a thread the
  // kernel left running, a destructor) is a failure of that call; a host that must be killed is a note.
  kut::RunEnd finish() {
    kut::RunEnd end;
    const std::string what = snapshot.what();
    std::string late = late_write();
    if (host.running()) {
      bool overdue = false;
      const HostEnd e = host.stop(&overdue);
      if (overdue)
        end.notes.push_back(who() + ": the kernel host did not exit within " + seconds(grace()) +
                            " of being stopped (a destructor or atexit handler that blocks?); killed");
      else if (e.text != "exited with status 0")
        end.notes.push_back(who() + ": the kernel host " + e.text + " while it was being stopped (unloading the library)");
    }
    if (late.empty()) late = late_write();
    if (!late.empty()) {
      ++failed;
      const std::string m = who() + ": " + late + " (" + sanitize(what, 300) + ")";
      if (first_failure.empty()) first_failure = m;
      end.failures.push_back({what, m});
    }
    snapshot.clear();
    return end;
  }
};

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
  const std::size_t msg = l.output("message", kMessageCapacity, true);
  p.message = offset_ptr<char>(msg);
  p.message_capacity = kMessageCapacity;
  return msg;
}

}  // namespace ropecheck::plugin
