// Rotate then quantize, as the fused kernels store rotated q / k (FlashInfer's rope_quantize_fp8, vLLM's
// dynamic FP8, llama.cpp's q8_0 / q4_0 KV writes, mlx_lm's QuantizedKVCache): a recipe rotates in its
// formats to binary32 (rope_apply), then the owner's binary32 quantizer of core/quantized.hpp stores the
// result as golden --stores lays it out (golden/GOLDEN_FORMAT.md, "Quantized stores"). The injected
// mistakes are the store bugs the checker must catch (tests/checker/test_check_stores.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "ropecheck/core/quantized_store_spec.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"

namespace ropecheck::kernels {

enum class StoreMistake {
  none,
  quantize_before_rotate,  // the input quantized (and dequantized), rotated, then quantized again
  scale_from_input,        // the data-derived scale (FP8 scale, GGML d, MLX scale / bias) of the unrotated input
  scale_inverted,          // FP8: codes of x * s instead of x / s; GGML, MLX: 1 / s stored as the scale
  scale_applied_twice,     // codes of x / s / s
  e5m2_for_e4m3fn,         // FP8: e5m2 bit patterns written where e4m3fn is asked for
  overflow_rule_swapped,   // FP8: saturate and nonfinite exchanged
  ggml_d_truncated,        // GGML: d rounded to f16 toward zero instead of to nearest even
  q4_0_abs_max,            // q4_0: d from the largest |x| instead of the signed value of largest |x|
  mlx_scale_bias_swapped,  // MLX: the scales written as the biases and the biases as the scales
  mlx_scale_dtype,         // MLX: scale and bias rounded to bf16 (f16 when bf16 is asked) before their store
  mlx_no_edge_shift,       // MLX: bias = min, scale = (max - min) / n (no q0 shift of the edge)
};
std::string_view to_string(StoreMistake m);

// A store of one [tokens, heads, head_dim] tensor as check reads a candidate's (checker stores.hpp):
// the codes' bytes (FP8 codes, GGML blocks, MLX uint32 words little-endian), FP8 scales (f32; none for a
// given scale: the kernel is given it) or MLX scales and biases (the store's scale dtype).
struct StoredTensor {
  std::vector<std::uint8_t> codes, scales, biases;
};

// The store of binary32 values x, laid out per token (FP8 scale per token, per (token, head), over every
// token per tensor or per head (the amax of the whole group first), or the
// spec's given one, codes fp8(x / s) in one rounding; GGML
// blocks and MLX groups along head_dim). `input`: the unrotated values, for scale_from_input (else
// ignored). quantize_before_rotate is rope_quantize's, not this function's.
StoredTensor quantize_store(std::span<const float> x, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,
                            const quant::StoreSpec& spec, StoreMistake mistake = StoreMistake::none,
                            std::span<const float> input = {});

// in ([tokens, heads, head_dim], any dtype rope_apply takes) rotated by the plan's recipe to binary32,
// then stored. std::invalid_argument as rope_apply.
StoredTensor rope_quantize(const RopePlan& plan, const PositionsView& positions, const TensorView& in,
                           const quant::StoreSpec& spec, StoreMistake mistake = StoreMistake::none);

}  // namespace ropecheck::kernels
