// The plugin client: the one place ropecheck loads a kernel plugin (ropecheck/kernel_abi.h,
// abi/KERNEL_ABI.md) and calls its entry points. `check --kernel`, `props --kernel` and
// `drift plugin:` all go through it.
//
// Isolation (the default). The library is loaded and called in a separate process,
// ropecheck-kernel-host (src/host_process.cpp starts and stops it, src/host_main.cpp is it), started
// with posix_spawn (fork + exec of a small helper, not a bare fork: the host starts clean, without
// ropecheck's threads, locks, handlers or atexit handlers, and spawning does not copy the page tables
// of a parent holding gigabytes of golden data) in a process group of its own, inheriting the signals
// ropecheck ignores. Inputs and outputs live in one shared-memory arena (memfd, sealed against
// shrinking; src/arena.hpp): every output and the message buffer sit between guard pages the host
// protects during the call, with the padding between them filled with guard bytes and checked whole;
// outputs are filled with NaN before each call, and copied when the call returns, so that a later
// change (a thread the kernel left running, a destructor) is caught. The parent keeps the golden data,
// the verdict and the report.
//
// What a call can come to (KernelCall): ok, unsupported (ROPECHECK_UNSUPPORTED), or failed: the
// host was killed by a signal the kernel brought about (a fault, abort, one it raised or sent its own
// process group), exited, gave no answer within the timeout (time ropecheck could run: a stopped job
// does not count), closed its socket, or the kernel wrote outside an output or its message, returned
// a code other than OK / UNSUPPORTED, left outputs unwritten, or changed the last call's outputs after
// it returned. A failed call's message is one line naming the entry point, the problem (the caller's
// `what`) and what happened ("killed by SIGSEGV", "no answer after 30 s", "exited with status 0 inside
// ropecheck_rope_apply"). After a failure the next call starts a fresh host; after a timeout, a host
// that closed its socket and would not exit, or three failures in a row (until forgive()), the client
// gives up and fails every later call at once ("not called: ..."), so that a hanging kernel costs one
// timeout and a crashing one does not respawn its host forever. A host killed by a signal that is not
// the kernel's doing (another process's kill, the terminal) is not a failure: the call is made again on
// a fresh host, and after the third such death kut::KernelRunInterrupted is thrown (exit 2).
// finish() (at the end of a check; the destructor otherwise) stops the host: EOF, a grace period of
// min(timeout, 5 s) for the library's destructors, then SIGKILL to the host's whole process group
// (whatever the kernel forked and left in it).
//
// In-process (`--in-process`). The library is loaded into ropecheck itself and called directly,
// with the same arena, NaN prefill, guards and late-write check (a write into a guard page is then
// ropecheck's SIGSEGV). For running a kernel under gdb, valgrind or a sanitizer. No timeout.
//
// Loading throws InputError (unusable input, one line naming the library) when the file does not
// exist or is not a regular file, dlopen fails, the ABI symbols are missing, the ABI version is not
// 1, the name is NULL, or no entry point is exported; and (naming the host) when the host cannot be
// started, dies or hangs before it says it started, or speaks another protocol (a host of another
// ropecheck build). A host that dies or hangs while loading the library (a constructor,
// ropecheck_kernel_configure, ropecheck_kernel_name: the message names which) does not throw: the
// client is "broken", claims every entry point, and fails every call with what happened, so the check
// fails (exit 1) and its report is written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ropecheck/kernel_abi.h"
#include "ropecheck/kut/kernel_under_test.hpp"

namespace ropecheck::plugin {

// Seconds a kernel call may take before it counts as hung (`--kernel-timeout`).
inline constexpr double kDefaultKernelTimeout = 120;

struct PluginClientOptions {
  bool in_process = false;              // --in-process
  double timeout_s = kDefaultKernelTimeout;  // per call; isolated only
};

struct KernelCall {
  enum class Status { ok, unsupported, failed };
  Status status = Status::ok;
  std::string message;  // ok / unsupported: the kernel's reason (may be empty); failed: what happened
  bool ok() const { return status == Status::ok; }
};

// The inputs every RoPE call shares. `rope`'s pointers are ignored: the client lays out inv_freq
// and longrope_ext (empty span = NULL).
struct RopeInputs {
  std::string_view spec_json;
  ropecheck_rope_params rope{};
  std::span<const double> inv_freq, longrope_ext;
  std::int64_t tokens = 0;
  std::int32_t position_streams = 1;
  std::span<const std::int64_t> positions;  // [position_streams][tokens]
};

// The attention inputs of a fused call (kernel_abi.h revision 2). `params.sinks` is ignored: the client
// lays out `sinks` (empty span = NULL).
struct AttentionInputs {
  ropecheck_attention_params params{};
  std::span<const double> sinks;
  std::span<const float> q, k, v;  // [tokens][group][head_dim], [tokens][head_dim], [tokens][value_dim]
};

class KernelPlugin {
 public:
  KernelPlugin();
  ~KernelPlugin();  // ends the host / dlclose
  KernelPlugin(KernelPlugin&&) noexcept;
  KernelPlugin& operator=(KernelPlugin&&) noexcept;
  KernelPlugin(const KernelPlugin&) = delete;
  KernelPlugin& operator=(const KernelPlugin&) = delete;

  const std::filesystem::path& path() const;  // as given
  const std::string& name() const;            // ropecheck_kernel_name(), sanitised for one-line output
  std::string who() const;                    // "kernel 'NAME' (PATH)"
  std::uint32_t abi_version() const;
  bool has_rope_apply() const;
  bool has_rope_cos_sin() const;
  bool has_sinusoidal() const;
  bool has_rope_attention() const;  // revision 2
  bool has_rope_quantize() const;   // revision 3
  bool has_rope_append_kv() const;  // revision 3
  bool isolated() const;
  // ropecheck_kernel_capabilities(), 0 when not exported.
  std::uint64_t capabilities() const;
  bool negative_positions() const { return (capabilities() & ROPECHECK_CAP_NEGATIVE_POSITIONS) != 0; }
  // False when the kernel declares its output dtypes and `abi_dtype` is not one of them.
  bool declares_dtype(std::int32_t abi_dtype) const;

  // One call each. `what` names the problem for messages ("q_rot.f32: input q, 2048 tokens x 8
  // heads, f32 output, spec llama-3.1-8b"). Outputs of an ok call: output(0) (out / cos) and
  // output(1) (sin), valid until the next call.
  KernelCall rope_apply(const RopeInputs& in, const char* input_name, std::int32_t heads, std::span<const float> x,
                        std::int32_t out_dtype, std::size_t out_bytes, std::string_view what);
  KernelCall rope_cos_sin(const RopeInputs& in, std::int32_t out_dtype, std::size_t table_bytes, std::string_view what);
  KernelCall sinusoidal(std::string_view spec_json, const ropecheck_sinusoidal_params& params,
                        std::span<const std::int64_t> positions, std::int32_t out_dtype, std::size_t out_bytes,
                        std::string_view what);
  // Fused RoPE + attention: output(0) out, output(1) scores when score_bytes > 0 (0: not asked for).
  KernelCall rope_attention(const RopeInputs& in, const AttentionInputs& a, std::int32_t out_dtype, std::size_t out_bytes,
                            std::size_t score_bytes, std::string_view what);
  // Rotate and store quantized (revision 3): output(0) codes, then scales and biases when their sizes
  // are not 0 (0: the store has none, NULL to the kernel).
  KernelCall rope_quantize(const RopeInputs& in, const char* input_name, std::int32_t heads, std::span<const float> x,
                           const ropecheck_store_params& store, std::size_t codes_bytes, std::size_t scales_bytes,
                           std::size_t biases_bytes, std::string_view what);
  // Rotate k and append k / v (revision 3): output(0) k_cache, output(1) v_cache (when v is not empty),
  // both filled with 0xFF sentinel bytes before the call. `cache`'s pointers are ignored: the client lays
  // out `metadata` (append_indptr, seq_lens, kv_indptr, kv_indices, kv_last_page_len, slot_mapping; an
  // empty span is NULL).
  KernelCall rope_append_kv(const RopeInputs& in, std::int32_t heads, std::span<const float> k, std::span<const float> v,
                            const ropecheck_kv_cache_params& cache, std::span<const std::span<const std::int64_t>, 6> metadata,
                            std::int32_t out_dtype, std::size_t cache_bytes, std::string_view what);
  std::span<const std::uint8_t> output(int i) const;

  // Calls again after three failures in a row (not after a timeout, nor for a library that cannot
  // be loaded): `props` forgives at each new property, so a kernel that crashes on some specs
  // only is still tested on the others.
  void forgive();

  // Ends the run (a bounded stop of the host; kut::KernelUnderTest::finish): outputs written after
  // their call returned are failures of that call (counted in failed_calls), a host that had to be
  // killed is a note. A later call starts a fresh host.
  kut::RunEnd finish();

  // Calls that failed so far (lost), and the first failure's message.
  std::int64_t failed_calls() const;
  std::int64_t calls() const;
  const std::string& first_failure() const;

 private:
  friend KernelPlugin load_kernel_plugin(const std::filesystem::path& library, const PluginClientOptions& options);
  struct State;
  std::unique_ptr<State> s_;
};

// `library` may carry the kernel's options after the file name: "LIB.so:OPTIONS" (split_kernel_options),
// handed to the kernel's ropecheck_kernel_configure before anything else (kernel_abi.h, revision 1).
KernelPlugin load_kernel_plugin(const std::filesystem::path& library, const PluginClientOptions& options = {});

// "DIR/LIB.so:OPTIONS" -> {"DIR/LIB.so", "OPTIONS"}: the options start at the first ':' after the last
// '/'. A name that is an existing file as a whole (a file name with ':' in it) has no options.
std::pair<std::filesystem::path, std::string> split_kernel_options(const std::string& name);

// Where the host executable is: $ROPECHECK_KERNEL_HOST, else beside the running executable, else
// ../libexec/ropecheck/ beside it, else the build tree's copy.
std::filesystem::path kernel_host_path();

}  // namespace ropecheck::plugin
