// Correct rounding of high-precision values to the storage formats the suite checks.
//
// Every golden value in the suite is computed in MPFR and then rounded ONCE, round-to-nearest
// ties-to-even, straight to the target format. Rounding through an intermediate format (e.g.
// float32, then bf16) is not a correct oracle: double rounding differs from single rounding on
// about 2^-17 of sin/cos values (research/precision.md section 2.4).
//
// Formats follow IEEE 754 semantics: gradual underflow (subnormals), overflow to infinity,
// signed zero, NaN. The MPFR global exponent range is never touched, so all functions are
// thread-safe (given a thread-safe MPFR build, as Debian's is).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include <boost/multiprecision/mpfr.hpp>
#include <mpfr.h>

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

// Round x (any precision) once, round-to-nearest ties-to-even, to format t; returns the bit
// pattern in the low storage_bits bits. NaN gives the canonical quiet NaN (0x7FF8000000000000,
// 0x7FC00000, 0x7E00, 0x7FC0); values at or beyond max_finite + ulp(max_finite)/2 give +-inf.
std::uint64_t round_to_bits(mpfr_srcptr x, DType t);
std::uint64_t round_to_bits(const boost::multiprecision::mpfr_float& x, DType t);

// The same rounded value as a double. Exact: every value of the four formats is a binary64
// value. +-inf on overflow, a quiet NaN for NaN, signed zero preserved.
double round_to_double(mpfr_srcptr x, DType t);
double round_to_double(const boost::multiprecision::mpfr_float& x, DType t);

// Decode a bit pattern of format t (exactly). Bits above storage_bits must be zero
// (std::invalid_argument otherwise). Every NaN pattern decodes to a quiet NaN with its sign.
double bits_to_double(std::uint64_t bits, DType t);

// The element of format t stored at p (native byte order, storage_bits wide), decoded exactly: how
// the checker, plugin targets and kernel targets read a kernel's output buffer.
double load_element(const void* p, DType t);

// Encode a double that is a value of format t (e.g. a round_to_double result) as its bit
// pattern; std::invalid_argument if v is not exactly representable in t. NaN -> canonical.
std::uint64_t double_to_bits(double v, DType t);

// Convenience wrappers around round_to_bits / round_to_double.
double to_f64(const boost::multiprecision::mpfr_float& x);
float to_f32(const boost::multiprecision::mpfr_float& x);
std::uint16_t to_f16_bits(const boost::multiprecision::mpfr_float& x);
std::uint16_t to_bf16_bits(const boost::multiprecision::mpfr_float& x);

// The same for the reference's scalar (expression templates off; see scalar.hpp): no copy.
using RealNoEt = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<0>,
                                               boost::multiprecision::et_off>;
inline std::uint64_t round_to_bits(const RealNoEt& x, DType t) { return round_to_bits(x.backend().data(), t); }
inline double round_to_double(const RealNoEt& x, DType t) { return round_to_double(x.backend().data(), t); }
inline double to_f64(const RealNoEt& x) { return round_to_double(x.backend().data(), DType::f64); }
inline float to_f32(const RealNoEt& x) {
  return static_cast<float>(round_to_double(x.backend().data(), DType::f32));
}
inline std::uint16_t to_f16_bits(const RealNoEt& x) {
  return static_cast<std::uint16_t>(round_to_bits(x.backend().data(), DType::f16));
}
inline std::uint16_t to_bf16_bits(const RealNoEt& x) {
  return static_cast<std::uint16_t>(round_to_bits(x.backend().data(), DType::bf16));
}

// Spacing of format t around the finite value v: 2^(e - p + 1) for |v| in [2^e, 2^(e+1)),
// and the subnormal spacing 2^(min_normal_exp - p + 1) for |v| < 2^min_normal_exp (v = 0
// included). At a power of two this is the gap above |v|. Beyond max_finite the exponent is
// treated as unbounded (ulp keeps growing). NaN for non-finite v.
double ulp(double v, DType t);

}  // namespace ropecheck
