// The quantized stores a golden set carries (golden/GOLDEN_FORMAT.md, "Quantized stores"): what
// `ropecheck golden --stores` names (core/quantized_store_spec.hpp) and each store's golden codes,
// scales, biases and margins for a block of tokens, computed from the set's correctly rounded f64
// rotated values with quantized_rounding.hpp. Every store here groups within one token (a per-token or per-(token, head)
// scale, GGML blocks and MLX groups along head_dim; a given FP8 scale, per tensor or per head, is an input
// and not computed), so blocks of tokens and shards compute it alone; except a data-derived FP8 scale per
// tensor or per head (StoreSpec::whole_tensor_scale()): its amax is over every token, so store_block is
// given the whole tensor (golden holds it; a shard cannot compute it alone), its scales one per group.
//
// The f64 value differs from the exact one by at most half an ulp; a code whose margin on the f64 values
// exceeds the group's largest half-ulp err is the exact value's code too, with margin - err (moving
// the exact values by that much moves the f64 ones by at most the margin); otherwise the margin is 0
// (undecided: never held against a kernel) and the code is that of the f64 value.
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

// A block of tokens of one tensor ([tokens, heads, head_dim] f64 values), stored.
struct StoreBlock {
  std::vector<std::uint8_t> bytes;    // fp8 codes; q8_0 / q4_0 blocks (34 / 18 bytes); empty for affine
  std::vector<std::uint32_t> words;   // affine: packed codes, head_dim * bits / 32 per head
  std::vector<double> scales;         // fp8 data-derived: per scale group (none for a given scale); affine: per group
  std::vector<double> biases;         // affine: per group
  std::vector<float> margin;          // per element
  std::vector<float> scale_margin;    // per scale group (GGML block, MLX group, FP8 scale)
  std::vector<float> decision_margin; // affine: per group
};
StoreBlock store_block(const StoreSpec& s, std::span<const double> y, std::int64_t tokens, std::int64_t heads,
                       std::int64_t head_dim);

}  // namespace ropecheck::quant
