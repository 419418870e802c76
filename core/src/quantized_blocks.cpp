// Quantized stores (core/quantized.hpp): MLX's group-affine quantizer and GGML's q8_0 / q4_0 blocks,
// computed in binary32 exactly as their owners compute them.
//
// Every binary32 operation below is done in binary64 and rounded once to binary32: for +, -, *, / of
// binary32 operands that double rounding is innocuous (53 >= 2 * 24 + 2 bits), so the result is the
// binary32 operation's, bit for bit, and an explicit narrowing between operations keeps a compiler
// from fusing a product and a sum into one FMA (which ggml's and MLX's reference loops do not do).
#include "ropecheck/core/quantized.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace ropecheck::quant {
namespace {

float f32_add(float a, float b) { return static_cast<float>(static_cast<double>(a) + static_cast<double>(b)); }
float f32_sub(float a, float b) { return static_cast<float>(static_cast<double>(a) - static_cast<double>(b)); }
float f32_mul(float a, float b) { return static_cast<float>(static_cast<double>(a) * static_cast<double>(b)); }
float f32_div(float a, float b) { return static_cast<float>(static_cast<double>(a) / static_cast<double>(b)); }

std::uint16_t f16_bits_of(float d) { return static_cast<std::uint16_t>(double_to_bits(round_to(d, DType::f16), DType::f16)); }
double f16_value(std::uint16_t bits) { return bits_to_double(bits, DType::f16); }

void check_affine_spec(const AffineSpec& spec, std::size_t n) {
  if (spec.bits != 2 && spec.bits != 4 && spec.bits != 8)
    throw std::invalid_argument("ropecheck: affine bits must be 2, 4 or 8, not " + std::to_string(spec.bits));
  if (spec.group_size != 32 && spec.group_size != 64 && spec.group_size != 128)
    throw std::invalid_argument("ropecheck: affine group size must be 32, 64 or 128");
  if (n % static_cast<std::size_t>(spec.group_size) != 0)
    throw std::invalid_argument("ropecheck: affine input length is not a multiple of the group size");
}

}  // namespace

AffineQuantized mlx_affine_quantize(std::span<const float> w, const AffineSpec& spec) {
  check_affine_spec(spec, w.size());
  const auto n_bins = static_cast<float>((1 << spec.bits) - 1);
  const float eps = 1e-7f;
  const auto gs = static_cast<std::size_t>(spec.group_size);
  AffineQuantized out;
  out.codes.resize(w.size());
  for (std::size_t g0 = 0; g0 < w.size(); g0 += gs) {
    const std::span<const float> grp = w.subspan(g0, gs);
    float w_min = std::numeric_limits<float>::infinity();
    float w_max = -w_min;
    for (float v : grp) {
      w_max = std::max(w_max, v);
      w_min = std::min(w_min, v);
    }
    const bool mask = std::fabs(w_min) > std::fabs(w_max);
    float scale = std::max(f32_div(f32_sub(w_max, w_min), n_bins), eps);
    scale = mask ? scale : -scale;
    const float edge = mask ? w_min : w_max;
    const float q0 = std::nearbyint(f32_div(edge, scale));  // rint: ties to even
    float bias = 0;
    if (q0 != 0) {
      scale = f32_div(edge, q0);
      bias = edge;
    }
    for (std::size_t j = 0; j < gs; ++j) {
      float c = std::nearbyint(f32_div(f32_sub(grp[j], bias), scale));
      c = std::min(std::max(c, 0.0f), n_bins);
      out.codes[g0 + j] = static_cast<std::uint8_t>(c);
    }
    out.groups.push_back({round_to(scale, spec.scale_dtype), round_to(bias, spec.scale_dtype)});
  }
  return out;
}

std::vector<std::uint32_t> affine_pack(std::span<const std::uint8_t> codes, int bits) {
  const auto per_word = static_cast<std::size_t>(32 / bits);
  std::vector<std::uint32_t> words((codes.size() + per_word - 1) / per_word, 0);
  for (std::size_t i = 0; i < codes.size(); ++i)
    words[i / per_word] |= static_cast<std::uint32_t>(codes[i]) << (bits * static_cast<int>(i % per_word));
  return words;
}

std::vector<std::uint8_t> affine_unpack(std::span<const std::uint32_t> words, int bits, std::size_t count) {
  const auto per_word = static_cast<std::size_t>(32 / bits);
  const std::uint32_t mask = (std::uint32_t{1} << bits) - 1;
  std::vector<std::uint8_t> codes(count);
  for (std::size_t i = 0; i < count; ++i)
    codes[i] = static_cast<std::uint8_t>((words[i / per_word] >> (bits * static_cast<int>(i % per_word))) & mask);
  return codes;
}

double affine_value(int code, const AffineGroup& g) { return std::fma(static_cast<double>(code), g.scale, g.bias); }

double mlx_affine_dequantize(int code, const AffineGroup& g, DType scale_dtype) {
  // Each operation rounded to the dtype: the product of a scale with at most 24 bits and an 8-bit
  // code is exact in binary64, and the sum of two values of the dtype rounds to it correctly through
  // binary64 (innocuous double rounding), as MLX's binary32 evaluation of a bf16 / f16 op does.
  const double prod = round_to(static_cast<double>(code) * g.scale, scale_dtype);
  return round_to(prod + g.bias, scale_dtype);
}

BlockQ8_0 ggml_quantize_q8_0(std::span<const float, kGgmlBlock> x) {
  float amax = 0.0f;
  for (float v : x) {
    const float a = std::fabs(v);
    amax = amax > a ? amax : a;  // ggml's MAX macro
  }
  const float d = f32_div(amax, 127.0f);
  const float id = d != 0.0f ? f32_div(1.0f, d) : 0.0f;
  BlockQ8_0 b;
  b.d = f16_bits_of(d);
  for (int j = 0; j < kGgmlBlock; ++j)
    b.qs[static_cast<std::size_t>(j)] = static_cast<std::int8_t>(std::round(f32_mul(x[static_cast<std::size_t>(j)], id)));
  return b;
}

BlockQ4_0 ggml_quantize_q4_0(std::span<const float, kGgmlBlock> x) {
  float amax = 0.0f;
  float max = 0.0f;
  for (float v : x) {
    if (amax < std::fabs(v)) {  // the first element of largest magnitude
      amax = std::fabs(v);
      max = v;
    }
  }
  const float d = f32_div(max, -8.0f);
  const float id = d != 0.0f ? f32_div(1.0f, d) : 0.0f;
  BlockQ4_0 b;
  b.d = f16_bits_of(d);
  constexpr int half = kGgmlBlock / 2;
  auto code = [&](int j) {
    const float t = f32_add(f32_mul(x[static_cast<std::size_t>(j)], id), 8.5f);
    return std::min(15, static_cast<int>(std::trunc(t)));  // (int8_t) conversion truncates
  };
  for (int j = 0; j < half; ++j)
    b.qs[static_cast<std::size_t>(j)] = static_cast<std::uint8_t>((code(j) & 0x0F) | ((code(j + half) & 0x0F) << 4));
  return b;
}

int q4_0_code(const BlockQ4_0& b, int j) {
  const std::uint8_t byte = b.qs[static_cast<std::size_t>(j % (kGgmlBlock / 2))];
  return j < kGgmlBlock / 2 ? byte & 0x0F : byte >> 4;
}

double ggml_value(const BlockQ8_0& b, int j) { return b.qs[static_cast<std::size_t>(j)] * f16_value(b.d); }
double ggml_value(const BlockQ4_0& b, int j) { return (q4_0_code(b, j) - 8) * f16_value(b.d); }

std::array<std::uint8_t, 34> to_bytes(const BlockQ8_0& b) {
  std::array<std::uint8_t, 34> out{};
  out[0] = static_cast<std::uint8_t>(b.d & 0xFF);
  out[1] = static_cast<std::uint8_t>(b.d >> 8);
  std::memcpy(out.data() + 2, b.qs.data(), 32);
  return out;
}

std::array<std::uint8_t, 18> to_bytes(const BlockQ4_0& b) {
  std::array<std::uint8_t, 18> out{};
  out[0] = static_cast<std::uint8_t>(b.d & 0xFF);
  out[1] = static_cast<std::uint8_t>(b.d >> 8);
  std::memcpy(out.data() + 2, b.qs.data(), 16);
  return out;
}

BlockQ8_0 q8_0_from_bytes(std::span<const std::uint8_t, 34> bytes) {
  BlockQ8_0 b;
  b.d = static_cast<std::uint16_t>(bytes[0] | (bytes[1] << 8));
  std::memcpy(b.qs.data(), bytes.data() + 2, 32);
  return b;
}

BlockQ4_0 q4_0_from_bytes(std::span<const std::uint8_t, 18> bytes) {
  BlockQ4_0 b;
  b.d = static_cast<std::uint16_t>(bytes[0] | (bytes[1] << 8));
  std::memcpy(b.qs.data(), bytes.data() + 2, 16);
  return b;
}

}  // namespace ropecheck::quant
