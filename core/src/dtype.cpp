// Storage formats (core/dtype.hpp): parameters, exact decoding and encoding.
#include "ropecheck/core/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>

namespace ropecheck {
namespace {

// Indexed by DType. The exponent bias equals max_exp for all four formats.
constexpr FormatInfo kFormats[] = {
    {53, -1022, 1023, 64, "f64"},
    {24, -126, 127, 32, "f32"},
    {11, -14, 15, 16, "f16"},
    {8, -126, 127, 16, "bf16"},
};

constexpr double kInf = std::numeric_limits<double>::infinity();

std::uint64_t sign_mask(const FormatInfo& f) { return std::uint64_t{1} << (f.storage_bits - 1); }

std::uint64_t canonical_nan(const FormatInfo& f) {
  // Exponent all ones, top fraction bit set (quiet), sign clear.
  const int frac_bits = f.precision - 1;
  const std::uint64_t exp_ones = (std::uint64_t{1} << (f.storage_bits - 1 - frac_bits)) - 1;
  return (exp_ones << frac_bits) | (std::uint64_t{1} << (frac_bits - 1));
}

}  // namespace

const FormatInfo& format_info(DType t) {
  const auto i = static_cast<std::size_t>(t);
  if (i >= std::size(kFormats)) throw std::invalid_argument("ropecheck: invalid DType");
  return kFormats[i];
}

std::string_view to_string(DType t) { return format_info(t).name; }

std::optional<DType> parse_dtype(std::string_view s) {
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    if (s == to_string(t)) return t;
  }
  return std::nullopt;
}

std::uint64_t double_to_bits(double v, DType t) {
  const FormatInfo& f = format_info(t);
  if (std::isnan(v)) return canonical_nan(f);
  const int frac_bits = f.precision - 1;
  const std::uint64_t sign = std::signbit(v) ? sign_mask(f) : 0;
  const double a = std::fabs(v);
  if (std::isinf(a)) return sign | (canonical_nan(f) & ~(std::uint64_t{1} << (frac_bits - 1)));
  if (a == 0.0) return sign;

  int e2 = 0;
  (void)std::frexp(a, &e2);  // a in [2^(e2-1), 2^e2)
  const int e = e2 - 1;      // a = 1.xxx * 2^e
  if (e > f.max_exp) throw std::invalid_argument("ropecheck: value overflows " + std::string(f.name));
  const bool normal = e >= f.min_normal_exp;
  const int quantum_exp = (normal ? e : f.min_normal_exp) - frac_bits;
  // Integer significand; exact whenever v is a value of the format (<= 53 bits).
  const double m = std::ldexp(a, -quantum_exp);
  if (m != std::floor(m)) {
    throw std::invalid_argument("ropecheck: value not representable in " + std::string(f.name));
  }
  auto sig = static_cast<std::uint64_t>(m);
  std::uint64_t biased = 0;
  if (normal) {
    biased = static_cast<std::uint64_t>(e + f.max_exp);
    sig -= std::uint64_t{1} << frac_bits;  // drop the hidden bit
  }
  return sign | (biased << frac_bits) | sig;
}

double bits_to_double(std::uint64_t bits, DType t) {
  const FormatInfo& f = format_info(t);
  if (f.storage_bits < 64 && (bits >> f.storage_bits) != 0) {
    throw std::invalid_argument("ropecheck: bit pattern wider than " + std::string(f.name));
  }
  const int frac_bits = f.precision - 1;
  const bool neg = (bits & sign_mask(f)) != 0;
  const std::uint64_t frac = bits & ((std::uint64_t{1} << frac_bits) - 1);
  const std::uint64_t exp_max = (std::uint64_t{1} << (f.storage_bits - 1 - frac_bits)) - 1;
  const std::uint64_t biased = (bits >> frac_bits) & exp_max;

  double mag = 0.0;
  if (biased == exp_max) {
    mag = frac == 0 ? kInf : std::numeric_limits<double>::quiet_NaN();
  } else if (biased == 0) {
    mag = std::ldexp(static_cast<double>(frac), f.min_normal_exp - frac_bits);
  } else {
    const std::uint64_t sig = frac | (std::uint64_t{1} << frac_bits);
    mag = std::ldexp(static_cast<double>(sig), static_cast<int>(biased) - f.max_exp - frac_bits);
  }
  return neg ? -mag : mag;  // negation is exact and also sets the sign of zero / NaN
}

double ulp(double v, DType t) {
  const FormatInfo& f = format_info(t);
  if (!std::isfinite(v)) return std::numeric_limits<double>::quiet_NaN();
  int e2 = 0;
  (void)std::frexp(std::fabs(v), &e2);  // |v| in [2^(e2-1), 2^e2); e2 = 0 for v = 0
  const int e = v == 0.0 ? f.min_normal_exp : std::max(e2 - 1, f.min_normal_exp);
  return std::ldexp(1.0, e - f.precision + 1);
}

const std::array<double, 65536>& f16_values() {
  static const std::array<double, 65536> table = [] {
    std::array<double, 65536> a{};
    for (std::uint32_t b = 0; b < 65536; ++b) a[b] = bits_to_double(b, DType::f16);
    return a;
  }();
  return table;
}

void decode(const void* data, DType t, std::span<double> out) {
  if (t == DType::f64) {
    std::memcpy(out.data(), data, out.size() * 8);
    return;
  }
  const StoredValues v(data, t);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = v[static_cast<std::int64_t>(i)];
}

double load_element(const void* p, DType t) {
  switch (format_info(t).storage_bits) {
    case 64: {
      std::uint64_t b = 0;
      std::memcpy(&b, p, 8);
      return bits_to_double(b, t);
    }
    case 32: {
      std::uint32_t b = 0;
      std::memcpy(&b, p, 4);
      return bits_to_double(b, t);
    }
    default: {
      std::uint16_t b = 0;
      std::memcpy(&b, p, 2);
      return bits_to_double(b, t);
    }
  }
}

double unit_roundoff(DType t) { return std::ldexp(1.0, -format_info(t).precision); }

double min_subnormal(DType t) {
  const FormatInfo& f = format_info(t);
  return std::ldexp(1.0, f.min_normal_exp - f.precision + 1);
}

}  // namespace ropecheck
