// A kernel's fused RoPE + KV-cache append on a set written with --kv-cache (kv_cache.hpp,
// kernel_kv_cache): the caches handed to the kernel filled with the default sentinel, the set's own
// description and inputs, the result judged by check_kv_cache as a file's cache is.
#include "ropecheck/checker/kv_cache.hpp"

namespace ropecheck::checker {

KernelKvCache kernel_kv_cache(kut::KernelUnderTest& kernel, const golden::GoldenSet& g) {
  KernelKvCache r;
  const kut::Capabilities& caps = kernel.info().capabilities;
  if (!caps.rope_append_kv) {
    r.not_tested = "the kernel exports no fused RoPE + KV-cache append entry point (ropecheck_rope_append_kv)";
    return r;
  }
  const kv::CacheSpec cache = golden_cache_spec(g);
  const std::int64_t H = g.heads(), D = g.spec().rope.head_dim;
  const std::vector<Position> pos = g.positions(0, g.tokens());
  const io::Tensor &k = g.tensor("k"), *v = g.find("v") ? &g.tensor("v") : nullptr;
  std::vector<std::string> reasons;
  for (const std::string& d : g.dtypes()) {
    const std::optional<DType> dt = parse_dtype(d);
    if (!dt || !g.find("k_rot." + d)) continue;
    if (!caps.supports(*dt)) {
      reasons.push_back(d + ": the kernel does not declare " + d + " output");
      continue;
    }
    const io::TensorDType td = io::tensor_dtype(*dt);
    const std::vector<std::int64_t> shape = kv::cache_shape(cache, H, D);
    const auto bytes = static_cast<std::size_t>(cache.slots() * H * D) * io::dtype_size(td);
    KvCacheCandidate c;
    c.k_cache = {"k_cache", td, shape, std::vector<std::uint8_t>(bytes, kDefaultSentinelByte)};
    if (v) c.v_cache = io::Tensor{"v_cache", td, shape, std::vector<std::uint8_t>(bytes, kDefaultSentinelByte)};
    c.sentinel.assign(io::dtype_size(td), kDefaultSentinelByte);
    c.cache = cache;
    c.slots = kv::token_slots(cache);
    const std::string what = "k_cache." + d + ": " + std::to_string(g.tokens()) + " tokens x " + std::to_string(H) + " heads, " +
                             std::string(kv::to_string(cache.kind)) + " " + std::string(kv::to_string(cache.layout)) +
                             " cache, spec " + (g.spec().name.empty() ? std::string("(unnamed)") : g.spec().name);
    kut::KvAppendCall call;
    call.problem = {&g.spec(), g.seq_len(), pos, what};
    call.cache = &c.cache;
    call.heads = static_cast<int>(H);
    call.k = {DType::f32, std::as_bytes(std::span(k.data))};
    if (v) call.v = {DType::f32, std::as_bytes(std::span(v->data))};
    call.k_cache = {*dt, std::as_writable_bytes(std::span(c.k_cache.data))};
    if (v) call.v_cache = {*dt, std::as_writable_bytes(std::span(c.v_cache->data))};
    const kut::CallResult res = kernel.rope_append_kv(call);
    if (res.status == kut::CallResult::Status::unsupported) {
      reasons.push_back(d + ": UNSUPPORTED" + (res.message.empty() ? "" : " (" + res.message + ")"));
      continue;
    }
    if (res.status == kut::CallResult::Status::failed) r.failures.push_back({{"k_cache." + d}, res.message});
    r.candidate = std::move(c);
    return r;
  }
  r.not_tested = "the kernel appended to no cache of the set's dtypes";
  for (const std::string& x : reasons) r.not_tested += (x == reasons.front() ? ": " : "; ") + x;
  return r;
}

}  // namespace ropecheck::checker
