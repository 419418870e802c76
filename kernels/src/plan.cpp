// RopePlan (everything position-independent about a spec and a recipe) and the tensor / position views.
#include <cmath>
#include <stdexcept>
#include <string>

#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kernels/scalar_recipes.hpp"
#include "ropecheck/formulas/rope.hpp"

namespace ropecheck::kernels {

TensorView TensorView::contiguous(void* data, DType dtype, std::int64_t tokens, std::int64_t heads,
                                  std::int64_t head_dim) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.tokens = tokens;
  v.heads = heads;
  v.head_dim = head_dim;
  v.stride_dim = 1;
  v.stride_head = head_dim;
  v.stride_token = heads * head_dim;
  return v;
}

PositionsView PositionsView::of(std::span<const std::int64_t> p) {
  PositionsView v;
  v.data = p.data();
  v.is_int64 = true;
  v.tokens = static_cast<std::int64_t>(p.size());
  return v;
}

PositionsView PositionsView::of(std::span<const std::int32_t> p) {
  PositionsView v;
  v.data = p.data();
  v.is_int64 = false;
  v.tokens = static_cast<std::int64_t>(p.size());
  return v;
}

PositionsView PositionsView::three_streams(std::span<const std::int64_t> thw, std::int64_t tokens) {
  if (tokens < 0 || static_cast<std::int64_t>(thw.size()) != 3 * tokens)
    throw std::invalid_argument("ropecheck::kernels: three_streams needs 3 * tokens positions, got " +
                                std::to_string(thw.size()) + " for " + std::to_string(tokens) + " tokens");
  PositionsView v;
  v.data = thw.data();
  v.is_int64 = true;
  v.tokens = tokens;
  v.streams = 3;
  v.token_stride = 1;
  v.stream_stride = tokens;
  return v;
}

Position PositionsView::at(std::int64_t token) const {
  auto read = [&](std::int64_t i) -> std::int64_t {
    return is_int64 ? static_cast<const std::int64_t*>(data)[i] : static_cast<const std::int32_t*>(data)[i];
  };
  const std::int64_t i = token * token_stride;
  if (streams == 3) return {read(i), read(i + stream_stride), read(i + 2 * stream_stride)};
  return Position::uniform(read(i));
}

RopePlan make_rope_plan(const RopeSpec& spec, Recipe recipe, std::optional<std::int64_t> seq_len) {
  EncodingSpec e;
  e.family = Family::rope;
  e.rope = spec;
  validate(e);  // throws SpecError naming the key

  RopePlan plan;
  plan.spec = spec;
  plan.recipe = recipe;
  plan.pairs = rope_pairs(spec);
  plan.head_dim = spec.head_dim;
  plan.interleaved = spec.layout == RopeLayout::interleaved;
  const auto P = static_cast<std::size_t>(plan.pairs);

  // binary64: the reference's formulas instantiated on double (glibc pow / log).
  const RopeFrequencies<double> f64 = rope_frequencies<double>(spec, seq_len);
  plan.inv_freq_f64 = f64.inv_freq;
  plan.attention_factor_f64 = f64.attention_factor;
  plan.long_factors = f64.long_factors;

  // f32: the Hugging Face way (scalar_recipes.hpp), attention factor the Python float rounded to f32.
  const RopeFrequenciesF32 hf = hf_rope_frequencies_f32(spec, seq_len);
  plan.attention_factor_f32 = hf.attention_factor;
  plan.inv_freq_f32 = hf.inv_freq;
  switch (recipe) {
    case Recipe::accurate:
      for (std::size_t j = 0; j < P; ++j) plan.inv_freq_f32[j] = static_cast<float>(plan.inv_freq_f64[j]);
      break;
    case Recipe::bf16_inv_freq:
      for (float& w : plan.inv_freq_f32) w = round_to_dtype(w, DType::bf16);
      break;
    case Recipe::f16_inv_freq:
      for (float& w : plan.inv_freq_f32) w = round_to_dtype(w, DType::f16);
      break;
    default: break;
  }

  // ggml: theta_scale = powf(base, -2.0f / n_dims) and the recurrence theta_{j+1} = theta_j * scale
  // approximate the unscaled base^(-2j/R); a scaled spec divides by fl32(w_default / w_scaled)
  // (llama.cpp's freq_factors, computed in Python floats and stored as f32). Zero frequencies
  // (proportional's unrotated pairs) give an infinite divisor, hence angle 0.
  plan.ggml_theta_scale = std::pow(static_cast<float>(spec.base), -2.0f / static_cast<float>(spec.rotary_dim));
  plan.ggml_divisor.assign(P, 1.0f);
  if (spec.scaling.type != ScalingType::none) {
    for (std::size_t j = 0; j < P; ++j) {
      const double w_default = std::pow(spec.base, -static_cast<double>(2 * j) / spec.rotary_dim);
      plan.ggml_divisor[j] = static_cast<float>(w_default / plan.inv_freq_f64[j]);
    }
  }
  if (recipe == Recipe::ggml) {  // w_j as the recipe holds it: the recurrence at p = 1, divided
    float theta = 1.0f;
    for (std::size_t j = 0; j < P; ++j) {
      plan.inv_freq_f32[j] = theta / plan.ggml_divisor[j];
      theta = theta * plan.ggml_theta_scale;
    }
  }

  plan.stream.resize(P);
  for (int j = 0; j < plan.pairs; ++j)
    plan.stream[static_cast<std::size_t>(j)] =
        static_cast<std::uint8_t>(spec.mrope == MropeMode::none ? 0 : mrope_stream(spec, j));
  return plan;
}

}  // namespace ropecheck::kernels
