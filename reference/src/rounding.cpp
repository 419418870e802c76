#include "ropecheck/reference/rounding.hpp"

#include <algorithm>
#include <cstring>
#include <cmath>
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

// One mpfr_t with a given precision, cleared on scope exit.
class MpfrTemp {
 public:
  explicit MpfrTemp(mpfr_prec_t prec) { mpfr_init2(v_, prec); }
  ~MpfrTemp() { mpfr_clear(v_); }
  MpfrTemp(const MpfrTemp&) = delete;
  MpfrTemp& operator=(const MpfrTemp&) = delete;
  mpfr_ptr get() { return v_; }

 private:
  mpfr_t v_;
};

// MPFR 4 allows 1-bit precision, which the smallest-subnormal binade needs.
static_assert(MPFR_PREC_MIN <= 1, "needs MPFR >= 4 (1-bit precision)");

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

// Single RNE rounding. Instead of scaling by the quantum and calling mpfr_rint, round |x| to
// exactly as many bits as the format keeps in x's binade ("keep"): for normal binades that is p,
// in the subnormal range fewer, so the last kept bit always has weight = the format's quantum.
// MPFR's RNDN at that precision is then exactly the format's ties-to-even rounding, in one step,
// with no change to MPFR's exponent range.
double round_to_double(mpfr_srcptr x, DType t) {
  const FormatInfo& f = format_info(t);
  if (mpfr_nan_p(x)) return std::numeric_limits<double>::quiet_NaN();
  const bool neg = mpfr_signbit(x) != 0;
  if (mpfr_inf_p(x)) return neg ? -kInf : kInf;
  if (mpfr_zero_p(x)) return neg ? -0.0 : 0.0;

  // MPFR convention: |x| in [2^(e-1), 2^e).
  const mpfr_exp_t e = mpfr_get_exp(x);
  // |x| >= 2^(max_exp+1) is past max_finite + ulp/2 already; also keeps mpfr_get_d in range.
  if (e - 1 > f.max_exp) return neg ? -kInf : kInf;

  // Exponent of the quantum (weight of the last significand bit) in x's binade.
  const mpfr_exp_t quantum_exp =
      std::max<mpfr_exp_t>(e - f.precision, f.min_normal_exp - f.precision + 1);
  const mpfr_exp_t keep = e - quantum_exp;  // <= precision

  double mag = 0.0;
  if (keep >= 1) {
    MpfrTemp y(static_cast<mpfr_prec_t>(keep));
    mpfr_abs(y.get(), x, MPFR_RNDN);  // the one rounding (ties to even)
    // Rounding may carry into the next binade; past max_exp that is overflow (this is where
    // max_finite + ulp/2, a tie, goes to the even neighbour 2^(max_exp+1) = inf).
    if (mpfr_get_exp(y.get()) - 1 > f.max_exp) return neg ? -kInf : kInf;
    mag = mpfr_get_d(y.get(), MPFR_RNDN);  // exact: <= 53 bits, in binary64 range
  } else if (keep == 0) {
    // 2^(quantum_exp-1) <= |x| < 2^quantum_exp: between 0 and the smallest subnormal. The exact
    // half is a tie between 0 (even) and the smallest subnormal (odd), so it goes to 0.
    const int cmp_half = neg ? -mpfr_cmp_si_2exp(x, -1, e - 1) : mpfr_cmp_ui_2exp(x, 1, e - 1);
    mag = cmp_half > 0 ? std::ldexp(1.0, static_cast<int>(quantum_exp)) : 0.0;
  }
  // keep < 0: |x| < half the smallest subnormal, rounds to zero.
  return neg ? -mag : mag;
}

double round_to_double(const boost::multiprecision::mpfr_float& x, DType t) {
  return round_to_double(x.backend().data(), t);
}

std::uint64_t round_to_bits(mpfr_srcptr x, DType t) {
  return double_to_bits(round_to_double(x, t), t);
}

std::uint64_t round_to_bits(const boost::multiprecision::mpfr_float& x, DType t) {
  return round_to_bits(x.backend().data(), t);
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

double to_f64(const boost::multiprecision::mpfr_float& x) { return round_to_double(x, DType::f64); }

float to_f32(const boost::multiprecision::mpfr_float& x) {
  // Exact: the value is already a binary32 value (or inf / NaN).
  return static_cast<float>(round_to_double(x, DType::f32));
}

std::uint16_t to_f16_bits(const boost::multiprecision::mpfr_float& x) {
  return static_cast<std::uint16_t>(round_to_bits(x, DType::f16));
}

std::uint16_t to_bf16_bits(const boost::multiprecision::mpfr_float& x) {
  return static_cast<std::uint16_t>(round_to_bits(x, DType::bf16));
}

double ulp(double v, DType t) {
  const FormatInfo& f = format_info(t);
  if (!std::isfinite(v)) return std::numeric_limits<double>::quiet_NaN();
  int e2 = 0;
  (void)std::frexp(std::fabs(v), &e2);  // |v| in [2^(e2-1), 2^e2); e2 = 0 for v = 0
  const int e = v == 0.0 ? f.min_normal_exp : std::max(e2 - 1, f.min_normal_exp);
  return std::ldexp(1.0, e - f.precision + 1);
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

}  // namespace ropecheck
