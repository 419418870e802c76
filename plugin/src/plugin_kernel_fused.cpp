// A plugin's revision-3 fused entry points as the kernel under test's calls (kernel_abi.h): the store
// and the cache described by kut/abi_fused.hpp, the outputs copied back as the other calls' are.
#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "ropecheck/kut/abi_fused.hpp"
#include "ropecheck/plugin/plugin_kernel.hpp"

namespace ropecheck::plugin {

std::string PluginKernel::undeclared_stage(const RopeSpec& rope, std::string_view input) const {
  const std::uint64_t caps = plugin_.capabilities();
  if (norm_stage(rope, input) != nullptr && (caps & ROPECHECK_CAP_QK_NORM) == 0)
    return "the spec normalizes " + std::string(input) + " first (Q/K RMSNorm) and the kernel does not declare "
           "ROPECHECK_CAP_QK_NORM";
  if ((rope.rotary_offset != 0 || rope.key_layout != KeyLayout::per_head) && (caps & ROPECHECK_CAP_MLA) == 0)
    return "the spec is an MLA slice (rotary_offset / k_pe) and the kernel does not declare ROPECHECK_CAP_MLA";
  return {};
}

kut::CallResult PluginKernel::rope_quantize(const kut::RopeQuantizeCall& call) {
  // (No spec: unsupported before it is read; binding a reference to it would be undefined.)
  if (!info_.capabilities.rope_quantize || !call.problem.spec || call.problem.spec->family != Family::rope || !call.store)
    return {kut::CallResult::Status::unsupported, "the kernel exports no ropecheck_rope_quantize for this spec"};
  const EncodingSpec& spec = *call.problem.spec;
  if (call.x.dtype != DType::f32) return {kut::CallResult::Status::unsupported, "the kernel ABI takes f32 input"};
  if (call.store->given_scale())  // ropecheck_store_params describes data-derived FP8 scales only
    return {kut::CallResult::Status::unsupported,
            "a given FP8 scale (" + call.store->item() + ") is not in the kernel ABI (revision 3 stores derive their scale)"};
  if (call.store->whole_tensor_scale())  // the ABI's scale granularities are per token and per (token, head)
    return {kut::CallResult::Status::unsupported,
            "a data-derived FP8 scale over every token (" + call.store->item() + ") is not in the kernel ABI"};
  if (const std::string why = undeclared_stage(spec.rope, call.input); !why.empty())
    return {kut::CallResult::Status::unsupported, why};
  const RopeInputs in = rope_inputs(call.problem);
  const std::span<const float> x(reinterpret_cast<const float*>(call.x.bytes.data()), call.x.count());
  const std::string input(call.input);
  const KernelCall c = plugin_.rope_quantize(in, input.c_str(), call.heads, x, kut::abi_store(*call.store), call.codes.size(),
                                             call.scales.size(), call.biases.size(), call.problem.what);
  if (c.status == KernelCall::Status::unsupported) return {kut::CallResult::Status::unsupported, c.message};
  int i = 0;  // NaN bytes after a failed call
  for (const std::span<std::byte> o : {call.codes, call.scales, call.biases}) {
    if (o.empty()) continue;
    const std::span<const std::uint8_t> b = plugin_.output(i++);
    std::memcpy(o.data(), b.data(), std::min(b.size(), o.size()));
  }
  return {c.ok() ? kut::CallResult::Status::ok : kut::CallResult::Status::failed, c.message};
}

kut::CallResult PluginKernel::rope_append_kv(const kut::KvAppendCall& call) {
  if (!info_.capabilities.rope_append_kv || !call.problem.spec || call.problem.spec->family != Family::rope || !call.cache)
    return {kut::CallResult::Status::unsupported, "the kernel exports no ropecheck_rope_append_kv for this spec"};
  const EncodingSpec& spec = *call.problem.spec;
  if (call.k.dtype != DType::f32 || (!call.v.bytes.empty() && call.v.dtype != DType::f32))
    return {kut::CallResult::Status::unsupported, "the kernel ABI takes f32 input"};
  if (const std::string why = undeclared_stage(spec.rope, "k"); !why.empty())
    return {kut::CallResult::Status::unsupported, why};
  const RopeInputs in = rope_inputs(call.problem);
  auto floats = [](const kut::ConstStorage& s) {
    return std::span<const float>(reinterpret_cast<const float*>(s.bytes.data()), s.count());
  };
  const kut::AbiCache cache = kut::abi_cache(*call.cache);
  const std::array<std::span<const std::int64_t>, 6> metadata = {cache.append_indptr, cache.seq_lens,     cache.kv_indptr,
                                                                 cache.kv_indices,    cache.last_page_len, cache.slot_mapping};
  const KernelCall c = plugin_.rope_append_kv(in, call.heads, floats(call.k), floats(call.v), cache.params, metadata,
                                              abi_dtype(call.k_cache.dtype), call.k_cache.bytes.size(), call.problem.what);
  if (call.v.bytes.empty()) return finish(c, {call.k_cache});
  return finish(c, {call.k_cache, call.v_cache});
}

}  // namespace ropecheck::plugin
