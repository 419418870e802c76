// Quantized stores (core/quantized.hpp): one rounding of a double, FP8 and scales. The block formats
// (MLX affine, GGML q8_0 / q4_0) are in quantized_blocks.cpp.
#include "ropecheck/core/quantized.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace ropecheck::quant {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// v rounded to `precision` significant bits, ties to even, with gradual underflow below
// 2^min_normal_exp and no upper exponent limit (the caller applies its overflow rule). The scaling
// by a power of two is exact, and nearbyint in the default rounding mode rounds ties to even.
double round_binary(double v, int precision, int min_normal_exp) {
  if (!std::isfinite(v) || v == 0.0) return v;
  int e2 = 0;
  (void)std::frexp(std::fabs(v), &e2);  // |v| in [2^(e2-1), 2^e2)
  const int quantum_exp = std::max(e2 - 1, min_normal_exp) - precision + 1;
  const double k = std::nearbyint(std::ldexp(v, -quantum_exp));
  return std::ldexp(k, quantum_exp);  // exact; nearbyint keeps the sign of a zero result
}

// Indexed by Fp8. overflow_from = max_finite + half its step: the nearest-even rounding of anything
// at or above it (for e4m3fn 464 itself is a tie that goes to the even 448, so anything above it).
constexpr Fp8Info kFp8[] = {
    {4, -6, 8, 448.0, 464.0, "e4m3fn", "F8_E4M3", "float8_e4m3fn"},
    {3, -14, 15, 57344.0, 61440.0, "e5m2", "F8_E5M2", "float8_e5m2"},
};

int exponent_bits(Fp8 f) { return f == Fp8::e4m3fn ? 4 : 5; }

}  // namespace

double round_to(double v, DType t) {
  if (t == DType::f64) return v;
  const FormatInfo& f = format_info(t);
  const double r = round_binary(v, f.precision, f.min_normal_exp);
  const double max_finite = std::ldexp(2.0 - std::ldexp(1.0, 1 - f.precision), f.max_exp);
  if (std::fabs(r) > max_finite) return std::signbit(r) ? -kInf : kInf;
  return r;
}

const Fp8Info& fp8_info(Fp8 f) {
  const auto i = static_cast<std::size_t>(f);
  if (i >= std::size(kFp8)) throw std::invalid_argument("ropecheck: invalid Fp8");
  return kFp8[i];
}

std::string_view to_string(Fp8 f) { return fp8_info(f).name; }

std::optional<Fp8> parse_fp8(std::string_view s) {
  for (Fp8 f : {Fp8::e4m3fn, Fp8::e5m2})
    if (s == to_string(f)) return f;
  return std::nullopt;
}

std::string_view to_string(Fp8Overflow o) { return o == Fp8Overflow::saturate ? "saturate" : "nonfinite"; }

std::optional<Fp8Overflow> parse_fp8_overflow(std::string_view s) {
  for (Fp8Overflow o : {Fp8Overflow::saturate, Fp8Overflow::nonfinite})
    if (s == to_string(o)) return o;
  return std::nullopt;
}

double fp8_decode(std::uint8_t bits, Fp8 f) {
  const Fp8Info& fi = fp8_info(f);
  const int mant_bits = fi.precision - 1;
  const int e_field = (bits >> mant_bits) & ((1 << exponent_bits(f)) - 1);
  const int m_field = bits & ((1 << mant_bits) - 1);
  const bool neg = (bits & 0x80) != 0;
  double mag = 0;
  if (f == Fp8::e4m3fn && e_field == 15 && m_field == 7) {
    mag = kNaN;
  } else if (f == Fp8::e5m2 && e_field == 31) {
    mag = m_field == 0 ? kInf : kNaN;
  } else if (e_field == 0) {
    mag = std::ldexp(m_field, fi.min_normal_exp - mant_bits);
  } else {
    const int bias = 1 - fi.min_normal_exp;
    mag = std::ldexp(m_field + (1 << mant_bits), e_field - bias - mant_bits);
  }
  return neg ? -mag : mag;
}

bool fp8_is_nan(std::uint8_t bits, Fp8 f) { return std::isnan(fp8_decode(bits, f)); }

std::uint8_t fp8_encode(double v, Fp8 f, Fp8Overflow o) {
  const Fp8Info& fi = fp8_info(f);
  const std::uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  const std::uint8_t nan = f == Fp8::e4m3fn ? 0x7F : 0x7E;
  if (std::isnan(v)) return sign | nan;
  double r = round_binary(v, fi.precision, fi.min_normal_exp);  // inf stays inf
  if (std::fabs(r) > fi.max_finite) {
    if (o == Fp8Overflow::saturate) {
      r = std::signbit(v) ? -fi.max_finite : fi.max_finite;
    } else {
      return sign | (f == Fp8::e4m3fn ? nan : std::uint8_t{0x7C});
    }
  }
  const double a = std::fabs(r);
  if (a == 0.0) return sign;
  const int mant_bits = fi.precision - 1;
  int e2 = 0;
  (void)std::frexp(a, &e2);
  const int e = e2 - 1;
  if (e < fi.min_normal_exp) {  // subnormal: the significand in units of the smallest subnormal
    return sign | static_cast<std::uint8_t>(std::ldexp(a, mant_bits - fi.min_normal_exp));
  }
  const int biased = e + 1 - fi.min_normal_exp;
  const int frac = static_cast<int>(std::ldexp(a, mant_bits - e)) - (1 << mant_bits);
  return sign | static_cast<std::uint8_t>((biased << mant_bits) | frac);
}

double fp8_step(double v, Fp8 f) {
  const Fp8Info& fi = fp8_info(f);
  if (!std::isfinite(v)) return kNaN;
  int e2 = 0;
  (void)std::frexp(std::fabs(v), &e2);
  const int e = v == 0.0 ? fi.min_normal_exp : std::max(e2 - 1, fi.min_normal_exp);
  return std::ldexp(1.0, e - fi.precision + 1);
}

std::string_view to_string(ScaleGranularity g) {
  switch (g) {
    case ScaleGranularity::per_tensor: return "per-tensor";
    case ScaleGranularity::per_head: return "per-head";
    case ScaleGranularity::per_token: return "per-token";
    case ScaleGranularity::per_token_head: return "per-token-head";
  }
  return "?";
}

std::optional<ScaleGranularity> parse_scale_granularity(std::string_view s) {
  for (ScaleGranularity g : {ScaleGranularity::per_tensor, ScaleGranularity::per_head, ScaleGranularity::per_token,
                             ScaleGranularity::per_token_head})
    if (s == to_string(g)) return g;
  return std::nullopt;
}

std::int64_t scale_count(ScaleGranularity g, std::int64_t tokens, std::int64_t heads) {
  switch (g) {
    case ScaleGranularity::per_tensor: return 1;
    case ScaleGranularity::per_head: return heads;
    case ScaleGranularity::per_token: return tokens;
    case ScaleGranularity::per_token_head: return tokens * heads;
  }
  return 0;
}

std::int64_t scale_index(ScaleGranularity g, std::int64_t token, std::int64_t head, std::int64_t heads) {
  switch (g) {
    case ScaleGranularity::per_tensor: return 0;
    case ScaleGranularity::per_head: return head;
    case ScaleGranularity::per_token: return token;
    case ScaleGranularity::per_token_head: return token * heads + head;
  }
  return 0;
}

std::uint8_t fp8_quantize(double x, double s, Fp8 f, Fp8Overflow o) { return fp8_encode(x / s, f, o); }

double fp8_dequantize(std::uint8_t code, double s, Fp8 f) { return fp8_decode(code, f) * s; }

float fp8_dynamic_scale(std::span<const float> x, Fp8 f) {
  float amax = 0.0f;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  return fp8_scale_from_amax(amax, f);
}

float fp8_scale_from_amax(float amax, Fp8 f) {
  const double fmax = fp8_info(f).max_finite;
  // Both divisions in binary64 then rounded once to binary32: the correctly rounded f32 quotient
  // (a binary64 quotient of binary32 operands rounds to binary32 as the binary32 division would).
  const auto scale = static_cast<float>(static_cast<double>(amax) / fmax);
  const auto min_scale = static_cast<float>(1.0 / (fmax * 512.0));
  return std::max(scale, min_scale);
}

}  // namespace ropecheck::quant
