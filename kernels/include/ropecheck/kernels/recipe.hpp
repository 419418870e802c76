// Precision recipes: how a kernel forms the angle, evaluates cos / sin, and rounds the table and the
// rotation. A recipe is a statement about where the computation rounds, so that the kernels can
// reproduce what real frameworks do and drift investigations can compare them. The formulas below
// are the contract every implementation (portable CPU, AVX-512, CUDA) follows; kernels/RECIPES.md
// gives the sources and the accuracy class each lands in.
//
// Notation: w_j the pair's inverse frequency (after scaling), p the position of the pair's stream,
// att the attention factor, (x_a, x_b) the pair, fl32 / fl16 / flbf a rounding to nearest even.
//
//   accurate       w_j in binary64 (the scaling formulas evaluated in double), theta = p * w_j in
//                  binary64 (p exact below 2^53), reduced modulo pi/2 in binary64 with a three-part
//                  Cody-Waite constant, the reduced argument rounded once to f32 and sin / cos
//                  evaluated in f32 by minimax polynomials on [-pi/4, pi/4]; att folded in f32;
//                  rotation in f32; one rounding to the storage dtype. About 1 ulp of f32 at every
//                  position up to 2^24 and beyond. With f64 storage: everything in binary64 (w, theta,
//                  sin, cos, rotation), one rounding: the f64 path.
//   hf             Hugging Face Llama: w_j = 1 / powf(fl32(base), fl32(2j) / R) in f32 (scalings as in
//                  transformers), theta = fl32(fl32(p) * w_j), f32 cos / sin, c = fl32(cos * att),
//                  table cast to the activation (storage) dtype, rotation in the storage dtype
//                  (q * cos + rotate_half(q) * sin: each product and the sum rounded to it; no FMA).
//   meta           Meta's reference: f32 w_j and theta as hf, freqs_cis = polar(1, theta) in complex64,
//                  x as complex64, complex multiply in f32 (no FMA), one rounding to the storage dtype.
//   ggml           ggml / llama.cpp: theta_scale = powf(fl32(base), -2.0f / R), theta_0 = fl32(p),
//                  theta_{j+1} = fl32(theta_j * theta_scale) (the recurrence), divided in f32 by the
//                  pair's scaling factor fl32(w_j(default) / w_j(scaled)) when the spec scales, f32
//                  cos / sin, att folded in f32, rotation in f32, one rounding to the storage dtype.
//   bf16-table     hf, but cos / sin cast to bf16 and the rotation done in bf16 whatever the storage
//   f16-table      ... in f16 (the GPT-NeoX fp16 cache bug)
//   bf16-inv-freq  hf with w_j cast to bf16 before the product (transformers #29496, sglang-jax #1472)
//   f16-inv-freq   hf with w_j cast to f16 (OpenVINO #35674)
//   bf16-positions hf with p held in bf16 (position_ids in the activation dtype): 1409 distinct values
//                  below 131072
//   f16-positions  hf with p held in f16 (infinite from 65520: cos / sin become NaN there)
//   fast-sincos    hf's angle, sin / cos by the CUDA fast-math __sinf / __cosf model: the argument
//                  scaled to revolutions by one f32 product with fl32(1 / 2pi) rounded toward zero, the
//                  fractional revolution's sin / cos then evaluated to about 2^-21.4 absolute. On a
//                  GPU: the real __sinf / __cosf. The only recipe that uses fast-math intrinsics.
//
// Every recipe applies to both layouts, prefix-partial rotary, multimodal streams, every scaling type
// (through w_j) and the attention factor. Sinusoidal tables follow the same recipe for the angle and
// sin / cos (w_i from the Vaswani / tensor2tensor formulas in f32, or in binary64 for accurate).
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "ropecheck/core/dtype.hpp"

namespace ropecheck::kernels {

enum class Recipe {
  accurate,
  hf,
  meta,
  ggml,
  bf16_table,
  f16_table,
  bf16_inv_freq,
  f16_inv_freq,
  bf16_positions,
  f16_positions,
  fast_sincos,
};

struct RecipeInfo {
  Recipe recipe;
  std::string_view name;         // the command-line spelling: "accurate", "bf16-table", ...
  std::string_view description;  // one line
  bool known_bad;                // kept on purpose for investigations; never recommended
};

// Every recipe, the recommended one (accurate) first.
std::span<const RecipeInfo> recipes();
const RecipeInfo& recipe_info(Recipe r);
std::string_view to_string(Recipe r);
// nullopt for an unknown name.
std::optional<Recipe> parse_recipe(std::string_view name);

// The dtype the recipe rounds its cos / sin table to and rotates in, given the storage dtype:
// hf -> the storage dtype, bf16-table -> bf16, f16-table -> f16, every other recipe -> f32 (no table
// rounding; f64 for accurate with f64 storage).
DType table_dtype(Recipe r, DType storage);

}  // namespace ropecheck::kernels
