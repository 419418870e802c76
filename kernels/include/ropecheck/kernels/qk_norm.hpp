// The Q/K RMSNorm stage of the own recipes (kernels/RECIPES.md, "Q/K RMSNorm before the rotation"): binary32
// as transformers computes it (Qwen3RMSNorm / Gemma3RMSNorm on f32 inputs): upcast to f32, the mean of the
// squares summed in order, rsqrt as 1 / sqrt, the product, then the weight factor (w, or 1 + w in f32).
#pragma once

#include <span>

#include "ropecheck/core/spec.hpp"

namespace ropecheck::kernels {

// Mistakes the tests inject, each one a kernel bug seen in the wild; none in every real use.
enum class NormMistake {
  none,
  eps_omitted,          // rsqrt(mean(x^2)) without eps
  weight_omitted,       // the normalized value without its weight
  weight_form_swapped,  // w where the stage says 1 + w, or 1 + w where it says w
  whole_row,            // the mean over all heads of the token, not each head
  mean_over_pairs,      // the sum divided by head_dim / 2 (the mean over the wrong width)
};

// x, out: [rows][heads][head_dim] binary32 (the norm's weights filled in).
void rms_norm_f32(const RmsNormStage& norm, std::span<const float> x, int heads, int head_dim, std::span<float> out,
                  NormMistake mistake = NormMistake::none);

}  // namespace ropecheck::kernels
