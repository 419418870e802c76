// Quantized stores, defined exactly as their owners define them: FP8 (OCP float8_e4m3fn and
// float8_e5m2) with per-tensor / per-head / per-token scales, MLX's group-affine int8 / int4
// (mx.quantize), and GGML's q8_0 / q4_0 blocks. No MPFR: decoding is exact in double, and the
// owners' own float computations (ggml's and MLX's quantizers take binary32 input and compute in
// binary32) are reproduced bit for bit. The correct rounding of exact (MPFR) values into these stores
// is reference/quantized_rounding.hpp; the formats and their sources: golden/GOLDEN_FORMAT.md
// ("Quantized stores").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ropecheck/core/dtype.hpp"

namespace ropecheck::quant {

// ---- One rounding of a double ---------------------------------------------------------------

// v rounded once, to nearest with ties to even, to dtype t: IEEE gradual underflow, overflow to +-inf
// at max_finite + ulp/2, signed zero, NaN -> NaN. The MPFR-free twin of round_to_double
// (reference/rounding.hpp) for a binary64 argument.
double round_to(double v, DType t);

// ---- FP8 ---------------------------------------------------------------------------------------

// float8_e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, S.1111.111 is NaN, so
// the largest finite value is 1.75 * 2^8 = 448. float8_e5m2: 1 sign, 5 exponent (bias 15), 2 mantissa
// bits, IEEE-style (infinities, NaNs), largest finite 1.75 * 2^15 = 57344. Both have subnormals.
enum class Fp8 { e4m3fn, e5m2 };

// What a value beyond the largest finite one becomes (rounding to nearest even first, so e4m3fn
// overflows from 464 = 448 + half a step on, e5m2 from 61440 = 57344 + half a step on):
//   saturate  - +-max_finite, infinities included, NaN stays NaN: CUDA's __NV_SATFINITE
//               (cuda_fp8.hpp; the __nv_fp8_e4m3 / __nv_fp8_e5m2 constructors, hence FlashInfer's
//               casts), and torch's CUDA float -> float8_e4m3fn copy when built with the conversion
//               intrinsics;
//   nonfinite - NaN for e4m3fn, +-inf for e5m2: ml_dtypes' casts, torch's c10 Float8_e4m3fn /
//               Float8_e5m2 (the CPU and the other CUDA builds), CUDA's __NV_NOSAT.
enum class Fp8Overflow { saturate, nonfinite };

struct Fp8Info {
  int precision;         // significand bits with the hidden bit: 4, 3
  int min_normal_exp;    // -6, -14
  int max_exp;           // 8, 15
  double max_finite;     // 448, 57344
  double overflow_from;  // the least |v| that rounds past max_finite: 464, 61440
  const char* name;      // "e4m3fn", "e5m2"
  const char* safetensors;  // "F8_E4M3", "F8_E5M2"
  const char* ml_dtypes;    // "float8_e4m3fn", "float8_e5m2"
};
const Fp8Info& fp8_info(Fp8 f);
std::string_view to_string(Fp8 f);
std::optional<Fp8> parse_fp8(std::string_view s);  // "e4m3fn", "e5m2"
std::string_view to_string(Fp8Overflow o);          // "saturate", "nonfinite"
std::optional<Fp8Overflow> parse_fp8_overflow(std::string_view s);

// Every bit pattern's value, exactly; NaN patterns decode to a quiet NaN with their sign.
double fp8_decode(std::uint8_t bits, Fp8 f);
bool fp8_is_nan(std::uint8_t bits, Fp8 f);
// v rounded once to nearest even (directly from binary64, never through binary32), then the overflow
// rule. NaN encodes as 0x7F (e4m3fn) / 0x7E (e5m2) with v's sign (ml_dtypes' quiet NaN).
std::uint8_t fp8_encode(double v, Fp8 f, Fp8Overflow o);
// The spacing of the FP8 values around the finite v (the quantum of its binade, the subnormal
// spacing below the normal range; at a power of two the gap above).
double fp8_step(double v, Fp8 f);

// ---- Scales --------------------------------------------------------------------------------------

// Which elements of a [tokens, heads, head_dim] tensor share one scale: all of them, one head index
// across all tokens, one token across all heads, or one (token, head) vector.
enum class ScaleGranularity { per_tensor, per_head, per_token, per_token_head };
std::string_view to_string(ScaleGranularity g);  // "per-tensor", "per-head", "per-token", "per-token-head"
std::optional<ScaleGranularity> parse_scale_granularity(std::string_view s);
// Number of scales and the scale of element [token, head, *], scales stored row-major ([heads],
// [tokens], [tokens, heads]).
std::int64_t scale_count(ScaleGranularity g, std::int64_t tokens, std::int64_t heads);
std::int64_t scale_index(ScaleGranularity g, std::int64_t token, std::int64_t head, std::int64_t heads);

// FP8 with a scale s: the stored code is fp8(x / s), its value decode(code) * s. With x and s
// binary32 values the quotient, computed in binary64, is never closer to an FP8 rounding boundary
// than 2^-30 relative unless it is on it, so this is the one correct rounding of the exact x / s.
std::uint8_t fp8_quantize(double x, double s, Fp8 f, Fp8Overflow o);
double fp8_dequantize(std::uint8_t code, double s, Fp8 f);  // exact for binary32 s
// A scale computed from the data as vLLM's dynamic FP8 quantization does (per tensor or per token):
// max(amax / max_finite, 1 / (max_finite * 512)) in binary32, amax = max |x|.
float fp8_dynamic_scale(std::span<const float> x, Fp8 f);
// The same scale from amax = max |x| (a group whose amax is gathered elsewhere: per tensor, per head).
float fp8_scale_from_amax(float amax, Fp8 f);

// ---- MLX group-affine (mx.quantize, mode "affine") ---------------------------------------------------

// bits 4 or 8; group_size 32, 64 or 128 consecutive elements of a row; scale and bias stored in the
// dtype of the quantized array (scale_dtype).
struct AffineSpec {
  int bits = 4;
  int group_size = 64;
  DType scale_dtype = DType::f32;
};
struct AffineGroup {
  double scale = 0;  // values of scale_dtype
  double bias = 0;
};
struct AffineQuantized {
  std::vector<std::uint8_t> codes;  // one per element, 0 .. 2^bits - 1
  std::vector<AffineGroup> groups;  // one per group
};
// MLX's CPU quantizer (mlx/backend/cpu/quantized.cpp, quantize<T, U>) in its binary32 arithmetic, on
// values of scale_dtype given as floats (w.size() a multiple of group_size):
//   s = max((max - min) / (2^bits - 1), 1e-7f); negated unless |min| > |max|; edge = min or max
//   (the larger magnitude); q0 = rint(edge / s); if q0 != 0: s = edge / q0, bias = edge, else bias 0;
//   code = clamp(rint((w - bias) / s), 0, 2^bits - 1); scale and bias stored in scale_dtype.
AffineQuantized mlx_affine_quantize(std::span<const float> w, const AffineSpec& spec);
// Packing as MLX stores w_q: codes in uint32 words from the low bits up (element k of a word at bits
// [k bits, (k + 1) bits)): 8 four-bit or 4 eight-bit codes per word.
std::vector<std::uint32_t> affine_pack(std::span<const std::uint8_t> codes, int bits);
std::vector<std::uint8_t> affine_unpack(std::span<const std::uint32_t> words, int bits, std::size_t count);
// The exact value code * scale + bias, correctly rounded to binary64 (one fma).
double affine_value(int code, const AffineGroup& g);
// mx.dequantize's result: scale * code rounded to scale_dtype, plus bias rounded to scale_dtype.
double mlx_affine_dequantize(int code, const AffineGroup& g, DType scale_dtype);

// ---- GGML blocks (ggml-common.h, ggml-quants.c) ----------------------------------------------------

inline constexpr int kGgmlBlock = 32;
// block_q8_0: f16 scale d, then 32 int8 codes; 34 bytes. Value j = qs[j] * d.
struct BlockQ8_0 {
  std::uint16_t d = 0;
  std::array<std::int8_t, kGgmlBlock> qs{};
};
// block_q4_0: f16 scale d, then 16 bytes; byte j holds element j in its low nibble and element j + 16
// in its high nibble; value = (nibble - 8) * d. 18 bytes.
struct BlockQ4_0 {
  std::uint16_t d = 0;
  std::array<std::uint8_t, kGgmlBlock / 2> qs{};
};
// quantize_row_q8_0_ref in binary32: amax = max |x|, d = amax / 127, id = d ? 1 / d : 0,
// qs[j] = roundf(x[j] * id) (ties away from zero), d stored as f16 (nearest even). The codes use the
// binary32 d, the block stores its f16 rounding.
BlockQ8_0 ggml_quantize_q8_0(std::span<const float, kGgmlBlock> x);
// quantize_row_q4_0_ref in binary32: max = the first element of largest |x|, d = max / -8,
// id = d ? 1 / d : 0, code = min(15, (int8_t)(x[j] * id + 8.5f)), d stored as f16.
BlockQ4_0 ggml_quantize_q4_0(std::span<const float, kGgmlBlock> x);
int q4_0_code(const BlockQ4_0& b, int j);  // element j's 4-bit code, 0 .. 15
// The exact values (f16 d times a small integer: exact in binary32 already, as ggml's dequantizers).
double ggml_value(const BlockQ8_0& b, int j);
double ggml_value(const BlockQ4_0& b, int j);
// The bytes ggml writes (d little-endian, then qs) and back.
std::array<std::uint8_t, 34> to_bytes(const BlockQ8_0& b);
std::array<std::uint8_t, 18> to_bytes(const BlockQ4_0& b);
BlockQ8_0 q8_0_from_bytes(std::span<const std::uint8_t, 34> bytes);
BlockQ4_0 q4_0_from_bytes(std::span<const std::uint8_t, 18> bytes);

}  // namespace ropecheck::quant
