// Kernel plugins: shared libraries implementing the C ABI of ropecheck/kernel_abi.h
// (golden/KERNEL_ABI.md), loaded with dlopen and run on a golden set's inputs, so that
// `ropecheck check --kernel LIB.so` checks a kernel without files in between.
//
// load_kernel_plugin() throws TensorError (one line, naming the library) when the file does not
// exist or is not a regular file, dlopen fails (not a shared library, a missing dependency, wrong
// architecture: dlerror's text), ropecheck_kernel_abi_version or ropecheck_kernel_name is not
// exported, the ABI version is not one this ropecheck speaks (exactly ROPECHECK_KERNEL_ABI_VERSION),
// ropecheck_kernel_name returns NULL, or none of the three entry points is exported.
//
// run_kernel_plugin() calls the kernel on the golden inputs, for every output dtype of the set (f64
// and the listed ones):
//   RoPE sets:        ropecheck_rope_apply on q and on k   -> q_rot.<dt>, k_rot.<dt>
//                     ropecheck_rope_cos_sin (if exported)  -> cos.<dt>, sin.<dt>
//   sinusoidal sets:  ropecheck_sinusoidal                  -> pe.<dt>
// and returns the results as Tensors named like the golden outputs, ready for check_candidate().
// A dtype the kernel answers ROPECHECK_UNSUPPORTED for is skipped with a note (the kernel's message
// if it gave one). TensorError when: the set needs an entry point the plugin lacks (sinusoidal
// without ropecheck_sinusoidal; RoPE with neither RoPE entry point); the kernel returns a failure
// code (the message names the output, the code and the kernel's reason); it answers UNSUPPORTED for
// k after producing q (or sin / cos differently, which cannot happen through one call); it writes
// past the end of an output buffer (guard bytes); or it produces no output at all (the message
// lists the notes).
//
// Guards: every output buffer is filled with NaN before the call, so elements a kernel leaves
// unwritten are NaN and fail in the checker, which reports NaN / Inf wherever the truth is finite.
// Inputs are fresh copies for every call. Nothing can be done in-process about a kernel that
// crashes, hangs or writes elsewhere in memory: that ends ropecheck (documented in KERNEL_ABI.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/kernel_abi.h"
#include "ropecheck/golden/tensor.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::golden {

struct KernelRun {
  std::vector<Tensor> tensors;     // named like the golden outputs ("q_rot.f32", "cos.bf16", "pe.f64")
  std::vector<std::string> notes;  // one line each: dtypes skipped (UNSUPPORTED) and why, tables not provided
};

class KernelPlugin {
 public:
  KernelPlugin();
  ~KernelPlugin();  // dlclose
  KernelPlugin(KernelPlugin&&) noexcept;
  KernelPlugin& operator=(KernelPlugin&&) noexcept;
  KernelPlugin(const KernelPlugin&) = delete;
  KernelPlugin& operator=(const KernelPlugin&) = delete;

  const std::filesystem::path& path() const;  // as given
  const std::string& name() const;            // ropecheck_kernel_name(), sanitised for one-line output
  std::uint32_t abi_version() const;
  bool has_rope_apply() const;
  bool has_rope_cos_sin() const;
  bool has_sinusoidal() const;

 private:
  friend KernelPlugin load_kernel_plugin(const std::filesystem::path& library);
  friend KernelRun run_kernel_plugin(const KernelPlugin& plugin, const GoldenSet& golden);
  struct State;
  std::unique_ptr<State> s_;
};

KernelPlugin load_kernel_plugin(const std::filesystem::path& library);

KernelRun run_kernel_plugin(const KernelPlugin& plugin, const GoldenSet& golden);

// The ABI's codes for ropecheck's enums (kernel_abi.h), shared by the plugin runner and the
// property-suite plugin target.
std::int32_t abi_dtype(DType d);
std::int32_t abi_scaling(ScalingType t);
std::int32_t abi_mrope(MropeMode m);
// The resolved parameters of a RoPE spec as the ABI passes them; inv_freq, longrope_ext and
// attention_factor are left for the caller.
ropecheck_rope_params abi_rope_params(const RopeSpec& r, std::int64_t seq_len);

}  // namespace ropecheck::golden
