// What `golden --stores` names (golden/GOLDEN_FORMAT.md, "Quantized stores"): a store of rotated q / k,
// its --stores item and how it groups a [tokens, heads, head_dim] tensor. Pure: the golden values are
// reference/quantized_stores.hpp's, a kernel's rotate-then-quantize recipe kernels/rope_quantize.hpp's.
#pragma once

#include <cstdint>
#include <optional>
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
  // fp8: the scale's granularity; data-derived (an output to check) unless `given` holds it. A data-derived
  // per-tensor or per-head scale takes the amax over every token (whole_tensor_scale()).
  ScaleGranularity scale = ScaleGranularity::per_token;
  // fp8, a given scale (a golden input, vLLM's k_scale / v_scale): one binary32 value (per-tensor) or one
  // per head (per-head); empty for a data-derived scale. Codes fp8(y / s).
  std::vector<float> given;
  AffineSpec affine;
  bool given_scale() const { return !given.empty(); }
  // A data-derived FP8 scale over all tokens (per-tensor, per-head): no block of tokens computes it alone.
  bool whole_tensor_scale() const {
    return kind == StoreKind::fp8 && given.empty() &&
           (scale == ScaleGranularity::per_tensor || scale == ScaleGranularity::per_head);
  }
  // The tensor name's suffix: "e4m3fn", "e5m2", "q8_0", "q4_0", "int4g64".
  std::string name() const;
  // The --stores item that parses back to this spec: "e4m3fn:saturate:per-token",
  // "e4m3fn:saturate:scale=0.0625", "int4g64:bf16", "q8_0".
  std::string item() const;
  friend bool operator==(const StoreSpec&, const StoreSpec&) = default;
};

// One item of --stores: e4m3fn or e5m2 [:saturate|:nonfinite]
// [:per-token|:per-token-head|:per-tensor|:per-head|:scale=LIST];
// q8_0; q4_0; int4gG or int8gG (G = 32, 64, 128) [:f32|:f16|:bf16] (the scales' and biases' dtype).
// scale=V gives one scale for the tensor, scale=V1/V2/... one per head (store_heads_problem checks the
// count); each V a decimal number rounded once (nearest even) to a positive finite binary32 value (an
// f32 checkpoint scale printed to its shortest round trip comes back exactly). nullopt with `why` set
// for anything else.
std::optional<StoreSpec> parse_store(std::string_view item, std::string& why);
// What a store needs of head_dim (a multiple of 32 for GGML, of the group size for MLX); empty when
// head_dim suits it.
std::string store_head_dim_problem(const StoreSpec& s, std::int64_t head_dim);

// What a given per-head scale needs of heads (one scale per head); empty when it suits.
std::string store_heads_problem(const StoreSpec& s, std::int64_t heads);
// The given scale of head h (per-tensor: the one scale).
double given_scale(const StoreSpec& s, std::int64_t h);

// FP8: the scale of element i of a [tokens, heads, head_dim] tensor: the index of its data-derived scale
// (per token, per (token, head), per tensor 0, per head its head) or of its given scale.
std::int64_t fp8_scale_group(const StoreSpec& s, std::int64_t i, std::int64_t heads, std::int64_t head_dim);

// Scale groups per token: fp8 1 or heads (a given or whole-tensor scale: 0, it is not per token);
// q8_0 / q4_0 heads * head_dim / 32; affine heads * head_dim / G.
std::int64_t scale_groups_per_token(const StoreSpec& s, std::int64_t heads, std::int64_t head_dim);

}  // namespace ropecheck::quant
