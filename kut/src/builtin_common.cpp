#include "builtin_common.hpp"

#include <cstring>

#include "ropecheck/kernels/qk_norm.hpp"

namespace ropecheck::kut::detail {

ThreeStreams three_streams(std::span<const Position> positions, bool multimodal) {
  ThreeStreams s;
  s.tokens = static_cast<std::int64_t>(positions.size());
  s.three = multimodal;
  s.thw.resize(3 * positions.size());
  for (std::size_t t = 0; t < positions.size(); ++t) {
    const Position& p = positions[t];
    s.thw[t] = p.t;
    s.thw[positions.size() + t] = p.h;
    s.thw[2 * positions.size() + t] = p.w;
    s.three = s.three || p.h != p.t || p.w != p.t;
  }
  return s;
}

RopeSetup rope_setup(const RopeProblem& problem, kernels::Recipe recipe) {
  const RopeSpec& r = problem.spec->rope;
  return {kernels::make_rope_plan(r, recipe, problem.seq_len), three_streams(problem.positions, r.mrope != MropeMode::none)};
}

std::string check_rope_apply(const RopeApplyCall& c) {
  const EncodingSpec* spec = c.problem.spec;
  if (!spec || spec->family != Family::rope) return "not a RoPE spec";
  const std::size_t n = c.problem.positions.size() * static_cast<std::size_t>(c.heads < 0 ? 0 : c.heads) *
                        static_cast<std::size_t>(spec->rope.head_dim);
  if (c.heads < 0 || c.x.count() != n || c.out.count() != n) return "input / output sizes do not match tokens x heads x head_dim";
  if (const RmsNormStage* norm = norm_stage(spec->rope, c.input); norm && norm->weight.empty())
    return "the spec's " + std::string(c.input) + "_norm stage has no weights (golden sets record them)";
  return {};
}

std::vector<float> rms_normed_f32(const RmsNormStage& norm, const ConstStorage& x, int heads, int head_dim) {
  std::vector<double> wide(x.count());
  decode(x.bytes.data(), x.dtype, wide);
  const std::vector<float> in(wide.begin(), wide.end());  // transformers: hidden_states.to(torch.float32)
  std::vector<float> out(in.size());
  if (!in.empty()) kernels::rms_norm_f32(norm, in, heads, head_dim, out);
  return out;
}

std::string check_rope_table(const RopeTableCall& c) {
  const EncodingSpec* spec = c.problem.spec;
  if (!spec || spec->family != Family::rope) return "not a RoPE spec";
  const std::size_t n = c.problem.positions.size() * static_cast<std::size_t>(rope_pairs(spec->rope));
  if (c.cos.count() != n || c.sin.count() != n || c.cos.dtype != c.sin.dtype) return "table sizes do not match tokens x pairs";
  return {};
}

std::string check_sinusoidal(const SinusoidalCall& c) {
  if (!c.spec || c.spec->family != Family::sinusoidal) return "not a sinusoidal spec";
  if (c.out.count() != c.positions.size() * static_cast<std::size_t>(c.spec->sinusoidal.d_model))
    return "output size does not match tokens x d_model";
  return {};
}

std::string check_rope_attention(const RopeAttentionCall& c) {
  const EncodingSpec* spec = c.problem.spec;
  if (!spec || spec->family != Family::rope) return "not a RoPE spec";
  if (!c.attention) return "no attention parameters";
  const AttentionParams& a = *c.attention;
  const std::size_t T = c.problem.positions.size(), D = static_cast<std::size_t>(spec->rope.head_dim);
  const std::size_t G = static_cast<std::size_t>(a.group < 1 ? 0 : a.group);
  const auto Dv = static_cast<std::size_t>(attention_value_dim(a, spec->rope.head_dim));
  if (G == 0 || T == 0 || c.q.count() != T * G * D || c.k.count() != T * D || c.v.count() != T * Dv || c.out.count() != T * G * Dv)
    return "q / k / v / out sizes do not match tokens x group x head_dim / value_dim";
  const auto scores = G * static_cast<std::size_t>(attention_score_count(a, static_cast<std::int64_t>(T)));
  if (!c.scores.bytes.empty() && (c.scores.count() != scores || c.scores.dtype != c.out.dtype))
    return "scores size does not match group x visible pairs, or their dtype is not the output's";
  return {};
}

std::string check_rope_quantize(const RopeQuantizeCall& c) {
  const EncodingSpec* spec = c.problem.spec;
  if (!spec || spec->family != Family::rope) return "not a RoPE spec";
  if (!c.store) return "no store";
  if (spec->rope.rotary_offset != 0) return "no quantized store of an MLA slice";
  const std::size_t n = c.problem.positions.size() * static_cast<std::size_t>(c.heads < 0 ? 0 : c.heads) *
                        static_cast<std::size_t>(spec->rope.head_dim);
  if (c.heads < 1 || c.x.dtype != DType::f32 || c.x.count() != n) return "input size does not match tokens x heads x head_dim (f32)";
  if (const std::string why = quant::store_head_dim_problem(*c.store, spec->rope.head_dim); !why.empty()) return why;
  if (const RmsNormStage* norm = norm_stage(spec->rope, c.input); norm && norm->weight.empty())
    return "the spec's " + std::string(c.input) + "_norm stage has no weights (golden sets record them)";
  return {};
}

std::string check_append_kv(const KvAppendCall& c) {
  const EncodingSpec* spec = c.problem.spec;
  if (!spec || spec->family != Family::rope) return "not a RoPE spec";
  if (!c.cache) return "no cache description";
  if (spec->rope.rotary_offset != 0 || spec->rope.key_layout != KeyLayout::per_head) return "no KV-cache append of an MLA key";
  const auto D = static_cast<std::size_t>(spec->rope.head_dim), H = static_cast<std::size_t>(c.heads < 1 ? 0 : c.heads);
  const auto T = static_cast<std::size_t>(c.cache->tokens()), slots = static_cast<std::size_t>(c.cache->slots());
  if (H == 0 || c.problem.positions.size() != T || c.k.dtype != DType::f32 || c.k.count() != T * H * D)
    return "k does not match the batch's tokens x heads x head_dim (f32)";
  if (!c.v.bytes.empty() && (c.v.dtype != DType::f32 || c.v.count() != T * H * D || c.v_cache.dtype != c.k_cache.dtype))
    return "v does not match k, or its cache is of another dtype";
  if (c.k_cache.count() != slots * H * D || (!c.v.bytes.empty() && c.v_cache.count() != slots * H * D))
    return "the cache does not hold pages x page_size x heads x head_dim elements";
  return {};
}

std::vector<float> input_f32(const RopeSpec& rope, std::string_view input, const ConstStorage& x, int heads) {
  if (const RmsNormStage* n = norm_stage(rope, input)) return rms_normed_f32(*n, x, heads, rope.head_dim);
  std::vector<double> wide(x.count());
  decode(x.bytes.data(), x.dtype, wide);
  return {wide.begin(), wide.end()};
}

void copy_store(const kernels::StoredTensor& st, const RopeQuantizeCall& c) {
  auto put = [](const std::vector<std::uint8_t>& from, std::span<std::byte> to, const char* what) {
    if (from.size() != to.size())
      throw std::invalid_argument(std::string("the store's ") + what + " take " + std::to_string(from.size()) +
                                  " bytes, the call gives " + std::to_string(to.size()));
    if (!from.empty()) std::memcpy(to.data(), from.data(), from.size());
  };
  put(st.codes, c.codes, "codes");
  put(st.scales, c.scales, "scales");
  put(st.biases, c.biases, "biases");
}

Capabilities all_capabilities() {
  Capabilities c;
  c.rope_apply = c.rope_cos_sin = c.sinusoidal = true;
  c.output_dtypes = {DType::f64, DType::f32, DType::f16, DType::bf16};
  c.negative_positions = true;
  return c;
}

}  // namespace ropecheck::kut::detail
