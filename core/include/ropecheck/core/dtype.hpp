// Storage formats: the dtypes ropecheck checks, their parameters, and exact bit-level decoding and
// encoding. No MPFR, no Boost: every module that only needs to name or read a dtype includes this
// (reference/rounding.hpp adds the correct rounding of MPFR values on top).
//
// Formats follow IEEE 754 semantics: gradual underflow (subnormals), overflow to infinity,
// signed zero, NaN.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>

namespace ropecheck {

// The storage formats: IEEE binary64, binary32, binary16 (half) and bfloat16.
enum class DType { f64, f32, f16, bf16 };

// Parameters of a binary floating-point format. A finite nonzero value is s * 1.xxx * 2^e
// with p - 1 fraction bits; normal range e in [min_normal_exp, max_exp]. Below 2^min_normal_exp
// the spacing stays 2^(min_normal_exp - precision + 1) (subnormals).
struct FormatInfo {
  int precision;       // significand bits including the hidden bit: 53, 24, 11, 8
  int min_normal_exp;  // -1022, -126, -14, -126
  int max_exp;         // 1023, 127, 15, 127 (also the exponent bias)
  int storage_bits;    // 64, 32, 16, 16
  const char* name;    // "f64", "f32", "f16", "bf16"
};

const FormatInfo& format_info(DType t);
std::string_view to_string(DType t);
// Inverse of to_string: accepts exactly "f64", "f32", "f16", "bf16".
std::optional<DType> parse_dtype(std::string_view s);

// Decode a bit pattern of format t (exactly). Bits above storage_bits must be zero
// (std::invalid_argument otherwise). Every NaN pattern decodes to a quiet NaN with its sign.
double bits_to_double(std::uint64_t bits, DType t);

// The element of format t stored at p (native byte order, storage_bits wide), decoded exactly: how
// the checker, plugin targets and kernel targets read a kernel's output buffer.
double load_element(const void* p, DType t);

// Every f16 bit pattern's value (a table built once): decoding f16 elements in a loop.
const std::array<double, 65536>& f16_values();

// A stored array of format t (little-endian, contiguous) read element by element as exact doubles,
// without a per-element branch on the format's layout beyond one switch: the one decoder of the
// checker's and drift's per-element loops (load_element for a single value).
class StoredValues {
 public:
  StoredValues(const void* data, DType t) : data_(static_cast<const unsigned char*>(data)), t_(t), f16_(&f16_values()) {}
  double operator[](std::int64_t i) const {
    const std::size_t k = static_cast<std::size_t>(i);
    switch (t_) {
      case DType::f64: {
        double v;
        std::memcpy(&v, data_ + 8 * k, 8);
        return v;
      }
      case DType::f32: {
        float v;
        std::memcpy(&v, data_ + 4 * k, 4);
        return static_cast<double>(v);
      }
      case DType::f16: {
        std::uint16_t b;
        std::memcpy(&b, data_ + 2 * k, 2);
        return (*f16_)[b];
      }
      case DType::bf16: {
        std::uint16_t b;
        std::memcpy(&b, data_ + 2 * k, 2);
        const std::uint32_t w = static_cast<std::uint32_t>(b) << 16;
        float v;
        std::memcpy(&v, &w, 4);
        return static_cast<double>(v);
      }
    }
    return 0;
  }

 private:
  const unsigned char* data_;
  DType t_;
  const std::array<double, 65536>* f16_;
};

// out.size() elements of a stored array of format t, decoded exactly (StoredValues, f64 copied).
void decode(const void* data, DType t, std::span<double> out);

// Encode a double that is a value of format t (e.g. a round_to_double result) as its bit
// pattern; std::invalid_argument if v is not exactly representable in t. NaN -> canonical.
std::uint64_t double_to_bits(double v, DType t);

// Stores v, a value of format t (a correctly rounded result), at p (native byte order, storage_bits
// wide): the inverse of load_element, inline for the per-element loops that write outputs. f64 and f32
// are stored as converted; f16 and bf16 through double_to_bits (std::invalid_argument when v is not a
// value of t).
inline void store_element(void* p, double v, DType t) {
  switch (t) {
    case DType::f64: std::memcpy(p, &v, 8); return;
    case DType::f32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      return;
    }
    default: {
      const auto bits = static_cast<std::uint16_t>(double_to_bits(v, t));
      std::memcpy(p, &bits, 2);
    }
  }
}

// Spacing of format t around the finite value v: 2^(e - p + 1) for |v| in [2^e, 2^(e+1)),
// and the subnormal spacing 2^(min_normal_exp - p + 1) for |v| < 2^min_normal_exp (v = 0
// included). At a power of two this is the gap above |v|. Beyond max_finite the exponent is
// treated as unbounded (ulp keeps growing). NaN for non-finite v.
double ulp(double v, DType t);

// Unit roundoff 2^-p: f64 2^-53, f32 2^-24, f16 2^-11, bf16 2^-8.
double unit_roundoff(DType t);
// Smallest positive subnormal: f64 2^-1074, f32 2^-149, f16 2^-24, bf16 2^-133.
double min_subnormal(DType t);

}  // namespace ropecheck
