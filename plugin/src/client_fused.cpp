// The plugin client's revision-3 fused calls (kernel_abi.h): rotate + quantized store, rotate + KV-cache
// append. Laid out in the shared arena as the other calls are, every output between guard pages, made
// through the same isolation. The codes and the caches are not checked for unwritten elements (0xFF is a
// code, and the caches' sentinel): the checker judges them.
#include "client_state.hpp"

namespace ropecheck::plugin {

KernelCall KernelPlugin::rope_quantize(const RopeInputs& in, const char* input_name, std::int32_t heads,
                                       std::span<const float> x, const ropecheck_store_params& store, std::size_t codes_bytes,
                                       std::size_t scales_bytes, std::size_t biases_bytes, std::string_view what) {
  Layout l;
  pp::Request q;
  q.entry = pp::Entry::rope_quantize;
  ropecheck_rope_quantize_problem& p = q.p.quantize;
  const std::string json(in.spec_json), name(input_name);  // outlive the call: copied into the arena then
  p.abi_version = ROPECHECK_KERNEL_ABI_VERSION;
  p.spec_json = offset_ptr<const char>(l.input(json.c_str(), json.size() + 1));
  place_rope(l, p, in);
  p.input_name = offset_ptr<const char>(l.input(name.c_str(), name.size() + 1));
  p.heads = heads;
  p.x = offset_ptr<const float>(l.input(x.data(), x.size_bytes()));
  p.store = store;
  p.codes = offset_ptr<void>(l.output("codes", codes_bytes, false, false));
  p.scales = scales_bytes > 0 ? offset_ptr<void>(l.output("scales", scales_bytes)) : nullptr;
  p.biases = biases_bytes > 0 ? offset_ptr<void>(l.output("biases", biases_bytes)) : nullptr;
  p.codes_bytes = codes_bytes;
  p.scales_bytes = scales_bytes;
  p.biases_bytes = biases_bytes;
  const std::size_t msg = place_message(l, p);
  return s_->call(q, l, msg, what);
}

KernelCall KernelPlugin::rope_append_kv(const RopeInputs& in, std::int32_t heads, std::span<const float> k,
                                        std::span<const float> v, const ropecheck_kv_cache_params& cache,
                                        std::span<const std::span<const std::int64_t>, 6> metadata, std::int32_t out_dtype,
                                        std::size_t cache_bytes, std::string_view what) {
  Layout l;
  pp::Request q;
  q.entry = pp::Entry::rope_append_kv;
  ropecheck_rope_append_kv_problem& p = q.p.append;
  const std::string json(in.spec_json);
  place_header(l, p, out_dtype, json);
  place_rope(l, p, in);
  p.heads = heads;
  p.k = offset_ptr<const float>(l.input(k.data(), k.size_bytes()));
  p.v = v.empty() ? nullptr : offset_ptr<const float>(l.input(v.data(), v.size_bytes()));
  p.cache = cache;
  const std::int64_t** fields[6] = {&p.cache.append_indptr, &p.cache.seq_lens,         &p.cache.kv_indptr,
                                    &p.cache.kv_indices,    &p.cache.kv_last_page_len, &p.cache.slot_mapping};
  for (std::size_t i = 0; i < 6; ++i)
    *fields[i] = offset_ptr<const std::int64_t>(l.input(metadata[i].data(), metadata[i].size_bytes()));
  // The prefill (0xFF) is the cache's sentinel: a slot the kernel leaves alone keeps it.
  p.k_cache = offset_ptr<void>(l.output("k_cache", cache_bytes, false, false));
  p.v_cache = v.empty() ? nullptr : offset_ptr<void>(l.output("v_cache", cache_bytes, false, false));
  const std::size_t msg = place_message(l, p);
  return s_->call(q, l, msg, what);
}

}  // namespace ropecheck::plugin
