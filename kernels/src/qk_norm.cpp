#include "ropecheck/kernels/qk_norm.hpp"

#include <cmath>
#include <cstddef>
#include <stdexcept>

namespace ropecheck::kernels {

void rms_norm_f32(const RmsNormStage& norm, std::span<const float> x, int heads, int head_dim, std::span<float> out,
                  NormMistake mistake) {
  const auto D = static_cast<std::size_t>(head_dim), H = static_cast<std::size_t>(heads);
  if (norm.weight.size() != D) throw std::invalid_argument("rms_norm_f32: the norm's weights are not filled in");
  if (H == 0 || x.size() % (H * D) != 0 || out.size() != x.size())
    throw std::invalid_argument("rms_norm_f32: sizes do not match rows x heads x head_dim");
  const bool one_plus = (norm.weight_form == NormWeightForm::one_plus_w) != (mistake == NormMistake::weight_form_swapped);
  const float eps = mistake == NormMistake::eps_omitted ? 0.0f : static_cast<float>(norm.eps);
  // The span the mean is taken over, and its divisor.
  const std::size_t span = mistake == NormMistake::whole_row ? H * D : D;
  const float divisor = static_cast<float>(mistake == NormMistake::mean_over_pairs ? D / 2 : span);
  for (std::size_t g = 0; g < x.size(); g += span) {
    float sum = 0.0f;
    for (std::size_t c = 0; c < span; ++c) sum += x[g + c] * x[g + c];
    const float r = 1.0f / std::sqrt(sum / divisor + eps);
    for (std::size_t c = 0; c < span; ++c) {
      const float w = static_cast<float>(norm.weight[c % D]);
      const float f = one_plus ? 1.0f + w : w;
      const float y = x[g + c] * r;
      out[g + c] = mistake == NormMistake::weight_omitted ? y : y * f;
    }
  }
}

}  // namespace ropecheck::kernels
