// Kernel plugins (ropecheck/kernel_abi.h, golden/KERNEL_ABI.md) run on a golden set's inputs, so
// that `ropecheck check --kernel LIB.so` checks a kernel without files in between. Loading and
// calling is the plugin client's (plugin_client.hpp: isolation, guards, timeouts, load errors).
//
// run_kernel_plugin() calls the kernel on the golden inputs, for every output dtype of the set (f64
// and the listed ones):
//   RoPE sets:        ropecheck_rope_apply on q and on k   -> q_rot.<dt>, k_rot.<dt>
//                     ropecheck_rope_cos_sin (if exported)  -> cos.<dt>, sin.<dt>
//   sinusoidal sets:  ropecheck_sinusoidal                  -> pe.<dt>
// and returns the results as Tensors named like the golden outputs, ready for check_candidate().
// A dtype the kernel answers ROPECHECK_UNSUPPORTED for (or declares unsupported through
// ropecheck_kernel_capabilities) is skipped with a note (the kernel's message if it gave one).
// TensorError (unusable input) when: the set needs an entry point the plugin lacks (sinusoidal
// without ropecheck_sinusoidal; RoPE with neither RoPE entry point); it answers UNSUPPORTED for k
// after producing q; or it produces no output at all (the message lists the notes). A call that
// fails (plugin_client.hpp) is a failed check instead: see KernelRun::failures.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/golden/plugin_client.hpp"
#include "ropecheck/kernel_abi.h"
#include "ropecheck/golden/tensor.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::golden {

struct KernelFailure {
  std::vector<std::string> outputs;  // the golden outputs the failed call was to produce
  std::string message;               // one line: the kernel, the entry point, what happened, the problem
};

struct KernelRun {
  std::vector<Tensor> tensors;     // named like the golden outputs ("q_rot.f32", "cos.bf16", "pe.f64")
  std::vector<std::string> notes;  // one line each: dtypes skipped (UNSUPPORTED) and why, tables not provided
  std::vector<KernelFailure> failures;  // plugin calls that failed (their tensors are NaN); empty for builtin
};

// Runs the plugin on the golden inputs. A call that fails (KernelCall::Status::failed: a crash, a
// timeout, an exit, a write outside its buffers, unwritten elements, an unknown return code) does
// not stop the run: its outputs are returned filled with NaN (so the checker fails them) and the
// failure is listed in KernelRun::failures; the next call starts a fresh kernel host.
KernelRun run_kernel_plugin(KernelPlugin& plugin, const GoldenSet& golden);

// The ABI's codes for ropecheck's enums (kernel_abi.h), shared by the plugin runner and the
// property-suite plugin target.
std::int32_t abi_dtype(DType d);
std::int32_t abi_scaling(ScalingType t);
std::int32_t abi_mrope(MropeMode m);
// The resolved parameters of a RoPE spec as the ABI passes them; inv_freq, longrope_ext and
// attention_factor are left for the caller.
ropecheck_rope_params abi_rope_params(const RopeSpec& r, std::int64_t seq_len);

}  // namespace ropecheck::golden
