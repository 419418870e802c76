// C-ABI kernel plugins (ropecheck/kernel_abi.h, abi/KERNEL_ABI.md) as kernels under test
// (kut/kernel_under_test.hpp), through the plugin client (plugin_client.hpp: the one dlopen,
// isolation, guards, timeouts). The third source beside ropecheck's CPU and CUDA kernels.
//
// Per call the kernel gets what the ABI passes: the spec as JSON, its resolved parameters, the
// binary64 inverse frequencies and attention factor of the exact reference (MPFR, rounded once) for
// the call's sequence length, the positions as [streams][tokens] (three streams for a multimodal
// spec), x as f32. Capabilities are the plugin's entry points and its ropecheck_kernel_capabilities
// (output dtypes, negative positions). A call the plugin answers ROPECHECK_UNSUPPORTED is
// unsupported with its message; a call that fails (plugin_client.hpp: a crash, a timeout, an exit, a
// write outside its buffers, ...) is failed with the client's message, and its outputs read as NaN.
// Inputs in another dtype than f32 are unsupported (the ABI's x is float).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>

#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/plugin/client.hpp"
#include "ropecheck/kernel_abi.h"
#include "ropecheck/kut/abi_fused.hpp"
#include "ropecheck/kut/kernel_under_test.hpp"

namespace ropecheck::plugin {

class PluginKernel final : public kut::KernelUnderTest {
 public:
  explicit PluginKernel(KernelPlugin plugin);
  ~PluginKernel() override;
  const kut::Info& info() const override { return info_; }
  kut::CallResult rope_apply(const kut::RopeApplyCall& call) override;
  kut::CallResult rope_cos_sin(const kut::RopeTableCall& call) override;
  kut::CallResult sinusoidal(const kut::SinusoidalCall& call) override;
  kut::CallResult rope_attention(const kut::RopeAttentionCall& call) override;
  kut::CallResult rope_quantize(const kut::RopeQuantizeCall& call) override;    // plugin_kernel_fused.cpp
  kut::CallResult rope_append_kv(const kut::KvAppendCall& call) override;
  void forgive() override { plugin_.forgive(); }
  kut::RunEnd finish() override { return plugin_.finish(); }
  const KernelPlugin& plugin() const { return plugin_; }

 private:
  struct Resolved;
  Resolved& resolve(const EncodingSpec& spec, std::optional<std::int64_t> seq_len);
  RopeInputs rope_inputs(const kut::RopeProblem& problem);  // valid until the next call
  kut::CallResult finish(const KernelCall& c, std::initializer_list<kut::Storage> outs);
  // "" when the kernel may be given `input`'s problem of this spec: a Q/K norm stage needs
  // ROPECHECK_CAP_QK_NORM, an MLA slice ROPECHECK_CAP_MLA (revision 3); else why not.
  std::string undeclared_stage(const RopeSpec& rope, std::string_view input) const;

  KernelPlugin plugin_;
  kut::Info info_;
  // ABI inputs by spec JSON + sequence length: the MPFR frequencies are the costliest part of a call,
  // and props asks for a handful of specs (a case's spec and the specs derived from it) many times.
  std::unordered_map<std::string, std::unique_ptr<Resolved>> resolved_;
};

// Loads the plugin (load errors: InputError, one line naming the library) as a kernel under test.
std::unique_ptr<PluginKernel> load_plugin_kernel(const std::filesystem::path& library, const PluginClientOptions& options = {});

// The ABI's codes for ropecheck's enums (kernel_abi.h); abi_dtype is kut's (abi_fused.hpp).
using kut::abi_dtype;
std::int32_t abi_scaling(ScalingType t);
std::int32_t abi_mrope(MropeMode m);
// The resolved parameters of a RoPE spec as the ABI passes them; inv_freq, longrope_ext and
// attention_factor are left for the caller.
ropecheck_rope_params abi_rope_params(const RopeSpec& r, std::int64_t seq_len);
// The sinusoidal parameters as the ABI passes them.
ropecheck_sinusoidal_params abi_sinusoidal_params(const SinusoidalSpec& s);
// The attention parameters as the ABI passes them (revision 2): value_dim resolved, the scale the
// binary64 nearest 1 / sqrt(scale_dim) (MPFR, rounded once) or the given one; sinks left for the caller.
ropecheck_attention_params abi_attention_params(const AttentionParams& a, int head_dim);

}  // namespace ropecheck::plugin
