// Plain portable scalar float32 kernels: RoPE and sinusoidal tables computed the way the frameworks
// compute them, one recipe at a time. The first (and so far only) recipe is `hf-fp32`, the Hugging
// Face Llama way in float32:
//
//   inv[j]   = 1.0f / powf((float)base, (float)(2j) / (float)R)      every scaling type, in f32
//              (transformers' modeling_rope_utils.py, variants.md section 1; Python-float parts such
//              as the YaRN correction range, llama3 wavelength limits and the dynamic-NTK base in double)
//   angle    = (float)position * inv[j]                               one f32 product
//   c, s     = cosf(angle) * att, sinf(angle) * att                   att rounded to f32, one product
//   y_a      = x_a * c + (-x_b) * s,  y_b = x_b * c + x_a * s         f32 products and sum (no FMA)
//   stored   = y rounded once (round to nearest even) to the output dtype (f32, f16, bf16)
//
// Sinusoidal tables: w_i = expf(i' * (float)(-ln(base) / n)) (the annotated transformer and
// fairseq / tensor2tensor), angle = (float)(position + offset) * w_i, sinf / cosf, one rounding.
//
// Accuracy class: fp32-angle (accuracy/ERROR_MODEL.md). The SIMD, threaded and CUDA kernels and the
// other recipes (accurate, meta, ggml, known-bad ones) are a later issue (kernels/README.md).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::kernels {

// ---- storage formats (portable bit manipulation, round to nearest even) ------------------------

std::uint16_t f32_to_bf16_bits(float v);  // NaN -> a quiet NaN of the same sign
float bf16_bits_to_f32(std::uint16_t b);
std::uint16_t f32_to_f16_bits(float v);  // subnormals, overflow to infinity
float f16_bits_to_f32(std::uint16_t b);
// v rounded once to t, as a float (exact: every f16 / bf16 value is a float). f32 and f64: v.
float round_to_dtype(float v, DType t);

// ---- the hf-fp32 recipe, piece by piece ----------------------------------------------------------

// torch.arange(0, dim, 2).float() / dim: one f32 division.
float hf_exponent(int j, int dim);
// 1.0 / (base ** exponent): f32 pow with the Python-float base cast to f32, f32 reciprocal.
float hf_default_inv_freq(double base, int j, int dim);

struct RopeFrequenciesF32 {
  std::vector<float> inv_freq;    // per pair j (rope_pairs), after scaling
  float attention_factor = 1.0f;  // the Python float rounded to f32 (what `cos * attention_scaling` uses)
  bool long_factors = false;      // longrope: the long list was selected
};

// The inverse frequencies and attention factor of any RoPE spec, the Hugging Face way in f32.
// `seq_len` is the run-time sequence length (dynamic NTK, longrope's short/long switch), as the
// reference's rope_frequencies takes it; nullopt = none given (dynamic: no change, longrope: short).
RopeFrequenciesF32 hf_rope_frequencies_f32(const RopeSpec& rope, std::optional<std::int64_t> seq_len = std::nullopt);

// w_i of a sinusoidal spec in f32: expf(i * (float)(-ln(base) / d)) for Vaswani (i = 0, 2, 4, ...),
// expf(i * (float)(-ln(base) / max(d/2 - 1, 1))) for half_dim_minus_one (i = 0, 1, 2, ...).
std::vector<float> hf_sinusoidal_frequencies_f32(const SinusoidalSpec& s);

// ---- kernels --------------------------------------------------------------------------------------

// Rotates x [tokens][heads][head_dim] (row-major, contiguous) into out (same shape; may alias x),
// each token at its position, attention factor folded in, pass-through channels (past the rotary
// block) copied; every value stored rounded to out_dtype (f32, f16 or bf16; held as float).
// Throws std::invalid_argument on a size mismatch or out_dtype f64.
void hf_fp32_rope_apply(const RopeSpec& rope, const RopeFrequenciesF32& freq, std::span<const Position> positions,
                        int heads, std::span<const float> x, std::span<float> out, DType out_dtype);

// Plain cos / sin tables [tokens][pairs] (no attention factor), rounded to out_dtype.
void hf_fp32_rope_cos_sin(const RopeSpec& rope, const RopeFrequenciesF32& freq, std::span<const Position> positions,
                          std::span<float> cos_out, std::span<float> sin_out, DType out_dtype);

// Sinusoidal rows [tokens][d_model] (formulas/sinusoidal.hpp's column layout), the angle
// at position + position_offset, rounded to out_dtype.
void hf_fp32_sinusoidal(const SinusoidalSpec& s, std::span<const float> w, std::span<const std::int64_t> positions,
                        std::span<float> out, DType out_dtype);

}  // namespace ropecheck::kernels
