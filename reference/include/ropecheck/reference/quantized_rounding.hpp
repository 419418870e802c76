// Golden values of the quantized stores (core/quantized.hpp) from exact (MPFR) values: the owners'
// quantizers with every binary32 operation replaced by the exact one and every store (codes, scales,
// biases) the one correct rounding of the exact quantity, by the owner's rounding rule (nearest even for
// FP8, rint and the stored dtypes; ties away from zero for ggml's roundf; ties up for q4_0's
// truncation of x / d + 8.5). golden/GOLDEN_FORMAT.md ("Quantized stores") states each definition.
//
// Each code comes with its margin: the largest absolute error on the exact values of its scale group
// (every value moved by at most that much, any data-derived scale recomputed from the moved values)
// that cannot change the code. 0 means the exact value lies on a decision boundary (a tie, settled by
// the owner's rule but by nothing a float kernel computes), or within binary64 resolution of one. A
// kernel whose results carry an error E decides a code the same way as the golden set only where
// E < margin; elsewhere the code is undecidable at that accuracy and a checker counts it as not tested
// (accuracy/quantized_store.hpp, accuracy/ERROR_MODEL.md "Quantized stores"). A golden writer whose
// own exact values are known to within e must also have e < margin to have proven the code (Ziv).
// Margins are lower bounds, computed in binary64 and rounded down.
#pragma once

#include <mpfr.h>

#include <array>
#include <span>
#include <vector>

#include "ropecheck/core/quantized.hpp"

namespace ropecheck::quant {

struct ExactCode {
  int code = 0;       // FP8 bit pattern 0..255, affine code 0..2^bits-1, q8_0 -127..127, q4_0 0..15
  double margin = 0;  // >= 0, see above
};

// FP8 of x / s, s > 0 a given scale (a golden input; 1 without a scale): rounded once to nearest even,
// then the overflow rule. The group is the element alone.
ExactCode fp8_exact(mpfr_srcptr x, double s, Fp8 f, Fp8Overflow o);

// FP8 with a scale computed from the group (vLLM's dynamic quantization, per tensor or per token):
// s* = max(amax / max_finite, 1 / (max_finite 512)) exactly, amax = max |x|; stored scale RN_f32(s*);
// codes fp8(x / s*) (the exact scale, as the owner's codes use its unrounded binary32 scale).
struct Fp8GroupExact {
  double scale = 0;         // RN_f32(s*)
  double scale_margin = 0;  // the margin of the stored scale
  std::vector<ExactCode> codes;
};
Fp8GroupExact fp8_dynamic_exact(std::span<const mpfr_srcptr> group, Fp8 f, Fp8Overflow o);
// The same for part of a group whose amax (the x of largest |x| over the whole group, its sign ignored) is given: a
// group too large to hold exactly at once (per tensor, per head over every token) is coded part by part.
Fp8GroupExact fp8_dynamic_exact(std::span<const mpfr_srcptr> part, mpfr_srcptr amax, Fp8 f, Fp8Overflow o);

// GGML blocks of 32 exact values. q8_0: d* = amax / 127, codes roundf(127 x / amax), d = RN_f16(d*).
// q4_0: m = the first value of largest |x|, d* = m / -8, codes min(15, floor(x / d* + 8.5)),
// d = RN_f16(d*). The codes use d* (ggml's codes use the binary32 d, not its f16 rounding).
struct Q8_0Exact {
  BlockQ8_0 block;
  double scale_margin = 0;
  std::array<double, kGgmlBlock> margin{};
};
Q8_0Exact q8_0_exact(std::span<const mpfr_srcptr, kGgmlBlock> x);
struct Q4_0Exact {
  BlockQ4_0 block;
  double scale_margin = 0;
  std::array<double, kGgmlBlock> margin{};
};
Q4_0Exact q4_0_exact(std::span<const mpfr_srcptr, kGgmlBlock> x);

// MLX group-affine (mlx_affine_quantize's algorithm in exact arithmetic): per group, R = max - min,
// s0 = max(R / n, 1e-7f) with n = 2^bits - 1, signed and edge chosen by |min| > |max|,
// q0 = rint(edge / s0); q0 != 0: scale = edge / q0, bias = edge, code = rint(q0 (x - edge) / edge);
// q0 = 0: scale = s0, bias = 0, code = rint(x / s0); codes clamped to [0, n]; scale and bias stored
// as RN_{scale_dtype}. margin per element, scale_margin per group (the stored scale's and bias').
struct AffineExact {
  AffineQuantized q;
  std::vector<double> margin;           // per element
  std::vector<double> scale_margin;     // per group: the stored scale and bias
  std::vector<double> decision_margin;  // per group: the edge choice, the clamp of s0 and q0 (>= scale_margin)
};
AffineExact mlx_affine_exact(std::span<const mpfr_srcptr> w, const AffineSpec& spec);

}  // namespace ropecheck::quant
