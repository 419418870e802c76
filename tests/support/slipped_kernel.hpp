// A float32 RoPE test kernel with one documented mistake made the way frameworks make it, for the
// diagnosis tests (test_diagnose.cpp, test_diagnose_params.cpp): the Hugging Face fp32 recipe (angle
// p * inv_freq in f32, libm sinf / cosf, rotation in f32) on a golden set's inputs, with the position
// or inverse frequency cast to bf16, shifted, wrapped to int32 / int16, the other pairing, another base,
// factor, rotary width or attention factor, the LongRoPE lists swapped, periods for frequencies, ...
// It shares no code with the diagnosis: it works in float from the spec, the diagnosis in MPFR from the
// catalogue and the fits.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "float_recipes.hpp"
#include "ropecheck/checker/diagnose.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/golden/golden_set.hpp"

namespace ropecheck::testing_support {

// The spec the kernel computes with: the golden set's, with the mistake's spec changes made.
inline RopeSpec slipped_spec(RopeSpec r, const checker::Mistake& m) {
  if (m.base) r.base = *m.base;
  if (m.factor) r.scaling.factor = *m.factor;
  if (m.rotary_dim) r.rotary_dim = *m.rotary_dim;
  if (m.swap_longrope_factors) {  // the other list, and the attention factor that goes with it
    std::swap(r.scaling.short_factor, r.scaling.long_factor);
    std::swap(r.scaling.short_mscale, r.scaling.long_mscale);
  }
  if (m.ignore_scaling) r.scaling = RopeScaling{};
  if (m.flip_truncate) r.scaling.truncate = !r.scaling.truncate;
  if (m.flip_layout) r.layout = r.layout == RopeLayout::half_split ? RopeLayout::interleaved : RopeLayout::half_split;
  if (m.flip_mrope_mode) r.mrope = r.mrope == MropeMode::chunked ? MropeMode::interleaved : MropeMode::chunked;
  return r;
}

inline io::Tensor f32_tensor(const std::string& name, std::vector<std::int64_t> shape, const std::vector<float>& v) {
  io::Tensor t;
  t.name = name;
  t.dtype = io::TensorDType::f32;
  t.shape = std::move(shape);
  t.data.resize(v.size() * 4);
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

// cos.f32, sin.f32, q_rot.f32, k_rot.f32 of the set under mistake `m`; `table` rounds cos / sin to f16 or
// bf16 before they are stored and used (the class hypotheses). With another rotary width the tables
// have another width: only q_rot and k_rot are returned.
inline std::vector<io::Tensor> slipped_kernel(const golden::GoldenSet& g, const checker::Mistake& m, DType table = DType::f32) {
  const RopeSpec r = slipped_spec(g.spec().rope, m);
  const RopeFrequencies<double> f = rope_frequencies<double>(r, g.seq_len());
  std::vector<float> inv;
  for (double w : f.inv_freq) {
    const float wf = m.reciprocal_freq && w != 0 ? static_cast<float>(1.0 / w) : static_cast<float>(w);
    inv.push_back(recipes::round_float_to(wf, m.freq_rounding.value_or(DType::f32)));
  }
  float att = static_cast<float>(m.attention.value_or(f.attention_factor));
  if (m.att == checker::Mistake::Att::missing) att = 1;
  if (m.att == checker::Mistake::Att::squared) att *= att;
  const float table_factor = m.att == checker::Mistake::Att::folded_in_table ? static_cast<float>(f.attention_factor) : 1.0f;
  const int P = rope_pairs(r), D = r.head_dim, H = g.heads(), block = rope_block_channels(r);
  const std::int64_t T = g.tokens();
  std::vector<float> cos_t(static_cast<std::size_t>(T * P)), sin_t(cos_t.size());
  for (std::int64_t t = 0; t < T; ++t)
    for (int j = 0; j < P; ++j) {
      int s = r.mrope == MropeMode::none ? 0 : mrope_stream(r, j);
      if (m.swap_hw_streams && s > 0) s = 3 - s;
      const Position& pos = g.positions()[static_cast<std::size_t>(t)];
      std::int64_t pi = s == 0 ? pos.t : (s == 1 ? pos.h : pos.w);
      if (m.position_wrap_bits == 32) pi = static_cast<std::int32_t>(static_cast<std::uint32_t>(pi));
      if (m.position_wrap_bits == 16) pi = static_cast<std::int16_t>(static_cast<std::uint16_t>(pi));
      float p = static_cast<float>(pi + m.position_shift);
      if (m.position_rounding) p = recipes::round_float_to(p, *m.position_rounding);
      const float angle = p * inv[static_cast<std::size_t>(j)];
      float c = std::cos(angle), sn = std::sin(angle);
      if (m.negate_sin) sn = -sn;
      if (m.swap_cos_sin) std::swap(c, sn);
      const std::size_t k = static_cast<std::size_t>(t * P + j);
      cos_t[k] = recipes::round_float_to(c * table_factor, table);
      sin_t[k] = recipes::round_float_to(sn * table_factor, table);
    }
  std::vector<io::Tensor> out;
  if (!m.rotary_dim) out = {f32_tensor("cos.f32", {T, P}, cos_t), f32_tensor("sin.f32", {T, P}, sin_t)};
  for (const char* which : {"q", "k"}) {
    const io::Tensor& in = g.tensor(which);
    std::vector<float> x(static_cast<std::size_t>(in.numel())), y;
    std::memcpy(x.data(), in.data.data(), in.data.size());
    y = x;
    for (std::int64_t t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) {
        const std::size_t row = static_cast<std::size_t>((t * H + h) * D);
        for (int j = 0; j < P; ++j) {
          const auto [a, b] = pair_channels(r, j);
          if (a >= block || b >= block) continue;
          const std::size_t k = static_cast<std::size_t>(t * P + j);
          const float c = cos_t[k], sn = sin_t[k], xa = x[row + a], xb = x[row + b];
          y[row + a] = att / table_factor * (xa * c - xb * sn);
          y[row + b] = att / table_factor * (xb * c + xa * sn);
        }
      }
    out.push_back(f32_tensor(std::string(which) + "_rot.f32", {T, H, D}, y));
  }
  return out;
}

}  // namespace ropecheck::testing_support
