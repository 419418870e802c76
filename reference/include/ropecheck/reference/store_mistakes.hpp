// The quantized stores a kernel writes with one known store mistake (checker/DIAGNOSIS.md, "Quantized
// stores"), recomputed from binary32 values with the owners' quantizers of core/quantized.hpp, laid out
// as a candidate's store (checker stores.hpp): the diagnosis of a failing store compares the candidate's
// codes and scales with each of these. The mistakes are the recipe's (kernels/rope_quantize.hpp,
// StoreMistake, same ids), written here again from their definitions: the checker does not use kernels/.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ropecheck/core/quantized.hpp"
#include "ropecheck/core/quantized_store_spec.hpp"

namespace ropecheck::quant {

struct StoreMistakeInfo {
  std::string id, title, source;
};
// The catalogue, in its order: quantize-before-rotate, scale-from-input, scale-inverted,
// scale-applied-twice, e5m2-for-e4m3fn, overflow-rule-swapped, ggml-d-truncated, q4_0-abs-max,
// mlx-scale-bias-swapped, mlx-scale-dtype, mlx-no-edge-shift.
const std::vector<StoreMistakeInfo>& store_mistake_catalogue();
// Whether mistake `id` can act on a store of this kind (FP8 only the FP8 ones, ...).
bool store_mistake_applies(std::string_view id, const StoreSpec& s);

// A store's bytes as a candidate gives them: codes (FP8 codes, GGML blocks, MLX uint32 words
// little-endian), FP8 scales (f32) or MLX scales and biases (the spec's scale dtype).
struct StoreBytes {
  std::vector<std::uint8_t> codes, scales, biases;
};
// The store of the binary32 values x ([tokens, heads, head_dim]; each store's groups, an FP8 scale per
// tensor or per head over every token) written with mistake `id` ("" or "none": the correct store).
// `input`: the unrotated values, for scale-from-input.
// quantize-before-rotate is the correct store of other values (store_dequantized rotated): not here.
StoreBytes mistaken_store(std::string_view id, std::span<const float> x, std::span<const float> input,
                          std::int64_t tokens, std::int64_t heads, std::int64_t head_dim, const StoreSpec& s);
// The values the correct store of x gives back (each code with its scale and bias), in binary32.
std::vector<float> store_dequantized(std::span<const float> x, std::int64_t tokens, std::int64_t heads,
                                     std::int64_t head_dim, const StoreSpec& s);

}  // namespace ropecheck::quant
