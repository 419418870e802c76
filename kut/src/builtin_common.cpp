#include "builtin_common.hpp"

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

Capabilities all_capabilities() {
  Capabilities c;
  c.rope_apply = c.rope_cos_sin = c.sinusoidal = true;
  c.output_dtypes = {DType::f64, DType::f32, DType::f16, DType::bf16};
  c.negative_positions = true;
  return c;
}

}  // namespace ropecheck::kut::detail
