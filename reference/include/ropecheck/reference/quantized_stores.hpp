// The quantized stores a golden set carries (golden/GOLDEN_FORMAT.md, "Quantized stores"): what
// `ropecheck golden --stores` names, and each store's golden codes, scales, biases and margins for a
// block of tokens, computed from the set's correctly rounded f64 rotated values with
// quantized_rounding.hpp. Every store here groups within one token (a per-token or per-(token, head)
// scale, GGML blocks and MLX groups along head_dim), so blocks of tokens and shards compute it alone.
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

namespace ropecheck::quant {

enum class StoreKind { fp8, q8_0, q4_0, affine };

struct StoreSpec {
  StoreKind kind = StoreKind::fp8;
  Fp8 fp8 = Fp8::e4m3fn;
  Fp8Overflow overflow = Fp8Overflow::saturate;
  ScaleGranularity scale = ScaleGranularity::per_token;  // fp8: per-token or per-token-head
  AffineSpec affine;
  // The tensor name's suffix: "e4m3fn", "e5m2", "q8_0", "q4_0", "int4g64".
  std::string name() const;
  friend bool operator==(const StoreSpec&, const StoreSpec&) = default;
};

// One item of --stores: e4m3fn or e5m2 [:saturate|:nonfinite] [:per-token|:per-token-head]; q8_0; q4_0;
// int4gG or int8gG (G = 32, 64, 128) [:f32|:f16|:bf16] (the scales' and biases' dtype). nullopt with
// `why` set for anything else.
std::optional<StoreSpec> parse_store(std::string_view item, std::string& why);
// What a store needs of head_dim (a multiple of 32 for GGML, of the group size for MLX); empty when
// head_dim suits it.
std::string store_head_dim_problem(const StoreSpec& s, std::int64_t head_dim);

// A block of tokens of one tensor ([tokens, heads, head_dim] f64 values), stored.
struct StoreBlock {
  std::vector<std::uint8_t> bytes;    // fp8 codes; q8_0 / q4_0 blocks (34 / 18 bytes); empty for affine
  std::vector<std::uint32_t> words;   // affine: packed codes, head_dim * bits / 32 per head
  std::vector<double> scales;         // fp8: per scale group; affine: per group (values of its dtype)
  std::vector<double> biases;         // affine: per group
  std::vector<float> margin;          // per element
  std::vector<float> scale_margin;    // per scale group (GGML block, MLX group, FP8 scale)
  std::vector<float> decision_margin; // affine: per group
};
StoreBlock store_block(const StoreSpec& s, std::span<const double> y, std::int64_t tokens, std::int64_t heads,
                       std::int64_t head_dim);

// Scale groups per token: fp8 1 or heads; q8_0 / q4_0 heads * head_dim / 32; affine heads * head_dim / G.
std::int64_t scale_groups_per_token(const StoreSpec& s, std::int64_t heads, std::int64_t head_dim);

}  // namespace ropecheck::quant
