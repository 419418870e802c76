// The plugin client's fused RoPE + attention call (kernel_abi.h revision 2): laid out in the shared
// arena as the other calls are, out and scores between guard pages, made through the same isolation.
#include "client_state.hpp"

namespace ropecheck::plugin {

KernelCall KernelPlugin::rope_attention(const RopeInputs& in, const AttentionInputs& a, std::int32_t out_dtype,
                                        std::size_t out_bytes, std::size_t score_bytes, std::string_view what) {
  Layout l;
  pp::Request q;
  q.entry = pp::Entry::rope_attention;
  ropecheck_rope_attention_problem& p = q.p.attention;
  const std::string json(in.spec_json);  // outlives the call: the layout copies it into the arena then
  place_header(l, p, out_dtype, json);
  place_rope(l, p, in);
  p.attention = a.params;
  p.attention.sinks = offset_ptr<const double>(l.input(a.sinks.data(), a.sinks.size_bytes()));
  p.q = offset_ptr<const float>(l.input(a.q.data(), a.q.size_bytes()));
  p.k = offset_ptr<const float>(l.input(a.k.data(), a.k.size_bytes()));
  p.v = offset_ptr<const float>(l.input(a.v.data(), a.v.size_bytes()));
  p.out = offset_ptr<void>(l.output("out", out_bytes));
  p.scores = score_bytes > 0 ? offset_ptr<void>(l.output("scores", score_bytes)) : nullptr;
  const std::size_t msg = place_message(l, p);
  return s_->call(q, l, msg, what);
}

}  // namespace ropecheck::plugin
