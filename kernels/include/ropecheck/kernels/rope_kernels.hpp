// The fast RoPE and sinusoidal kernels (CPU: portable and AVX-512 paths, threads). Same contract as
// the CUDA kernels (cuda_kernels.hpp). Recipes: recipe.hpp.
//
// Use: build a RopePlan once per (spec, recipe, run-time sequence length), then call rope_apply for
// every batch. Nothing is allocated inside the hot loops (per-thread scratch rows are allocated once
// per call, before the parallel region).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::kernels {

// ---- views ----------------------------------------------------------------------------------------

// A [tokens, heads, head_dim] tensor with strides in elements (any sign-free stride: a
// [batch, seq, heads, dim] or [batch, heads, seq, dim] buffer is viewed with batch folded into
// tokens when it can be, or one call per batch). dtype f32, f16, bf16 (raw IEEE / bfloat16 bits in
// uint16) or f64.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  std::int64_t tokens = 0, heads = 0, head_dim = 0;
  std::int64_t stride_token = 0, stride_head = 0, stride_dim = 1;
  // A contiguous [tokens, heads, head_dim] view.
  static TensorView contiguous(void* data, DType dtype, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim);
};

// Per-token positions: int32 or int64; one stream (plain RoPE) or three (t, h, w: multimodal RoPE,
// HF's position_ids of shape [3, tokens] has stream_stride = tokens, token_stride = 1).
struct PositionsView {
  const void* data = nullptr;
  bool is_int64 = true;
  std::int64_t tokens = 0;
  int streams = 1;                  // 1 or 3
  std::int64_t token_stride = 1;    // elements between consecutive tokens
  std::int64_t stream_stride = 0;   // elements between the t, h and w streams (streams == 3)
  static PositionsView of(std::span<const std::int64_t> p);
  static PositionsView of(std::span<const std::int32_t> p);
  // [3, tokens] row-major (t row, h row, w row).
  static PositionsView three_streams(std::span<const std::int64_t> thw, std::int64_t tokens);
  Position at(std::int64_t token) const;  // one stream: {p, p, p}
};

// ---- the plan -------------------------------------------------------------------------------------

// Everything about a (spec, recipe, sequence length) that does not depend on the position: the
// frequencies in the formats the recipe holds them, the attention factor, which stream drives each
// pair. Public so that other modules (drift, CUDA) read the same numbers.
struct RopePlan {
  RopeSpec spec;
  Recipe recipe = Recipe::accurate;
  int pairs = 0;                       // rope_pairs(spec)
  int head_dim = 0;
  bool interleaved = false;            // pair j = channels (2j, 2j+1); else (j, j + pairs)
  std::vector<float> inv_freq_f32;     // w_j as the recipe holds it in f32 (bf16-inv-freq: bf16 values)
  std::vector<double> inv_freq_f64;    // w_j in binary64 (accurate)
  std::vector<float> ggml_divisor;     // ggml: the per-pair f32 scaling divisor (1 when unscaled)
  float ggml_theta_scale = 1.0f;       // ggml: powf(base, -2 / R)
  std::vector<std::uint8_t> stream;    // per pair: 0 = t, 1 = h, 2 = w
  float attention_factor_f32 = 1.0f;
  double attention_factor_f64 = 1.0;
  bool long_factors = false;           // longrope: the long list was selected
};

// Throws SpecError for a spec the kernels cannot run (e.g. head_dim odd). seq_len as the reference's
// rope_frequencies takes it: nullopt = none given (dynamic: no change, longrope: short factors).
RopePlan make_rope_plan(const RopeSpec& spec, Recipe recipe, std::optional<std::int64_t> seq_len = std::nullopt);

struct KernelOptions {
  int threads = 0;          // 0: OpenMP's default (OMP_NUM_THREADS or all cores); 1: no threading
  bool portable = false;    // force the portable path even where AVX-512 is available
};

// Which CPU path runs by default here ("avx512" or "portable").
std::string_view cpu_path();

// ---- per-token rows (the recipe's math for one position; what drift investigations sample) --------

// cos / sin of every pair as the recipe computes them in f32 (before the attention factor and
// before the table cast). `pairs` floats each.
void recipe_cos_sin_row(const RopePlan& plan, const Position& p, float* cos_out, float* sin_out);
// The angle the recipe forms for every pair, unreduced: the exact value of the recipe's f32 angle as a
// double, or its binary64 angle (accurate: the rounding of its reduced argument to f32 belongs to the
// sin / cos evaluation and shows in recipe_cos_sin_row). fast-sincos: hf's angle. Reduce it exactly
// with reference/angle_reduction.hpp to compare angles on the circle.
void recipe_angle_row(const RopePlan& plan, const Position& p, double* angle_out);

// ---- kernels --------------------------------------------------------------------------------------

// Rotates q (and k, when k_in.data is not null) in place or out of place (out may equal in; it must
// not partially overlap). Shapes: q and k [tokens, heads, head_dim] with head_dim == spec.head_dim,
// tokens == positions.tokens; in and out of the same shape (dtypes may differ: the math runs in the
// recipe's formats and rounds once to out's dtype). Pass-through channels past the rotary block are
// copied (converted to out's dtype). Throws std::invalid_argument naming the mismatch.
void rope_apply(const RopePlan& plan, const PositionsView& positions, const TensorView& q_in, const TensorView& q_out,
                const TensorView& k_in = {}, const TensorView& k_out = {}, const KernelOptions& opts = {});

// Plain cos / sin tables [tokens][pairs] (no attention factor), as the recipe computes them, rounded
// to the recipe's table dtype and then to `dtype` (f32, f16, bf16; f64 holds the f32 values exactly,
// or binary64 values for accurate). cos_out / sin_out point to tokens * pairs elements of `dtype`.
void rope_cos_sin_table(const RopePlan& plan, const PositionsView& positions, void* cos_out, void* sin_out, DType dtype,
                        const KernelOptions& opts = {});

// Sinusoidal rows [tokens][d_model] in formulas/sinusoidal.hpp's column layout, the angle
// at position + position_offset, computed the recipe's way (hf/meta/ggml: the f32 formulas of
// scalar_recipes.hpp; accurate: frequencies and angle in binary64, reduced, f32 sin / cos; the
// known-bad recipes apply their defect to the frequency, position or sin / cos), rounded to dtype.
void sinusoidal_table(const SinusoidalSpec& spec, Recipe recipe, std::span<const std::int64_t> positions, void* out,
                      DType dtype, const KernelOptions& opts = {});

}  // namespace ropecheck::kernels
