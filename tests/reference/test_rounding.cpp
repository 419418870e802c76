// Tests for the correct-rounding module (reference/rounding.hpp).
//
// Expected results never come from the code under test: patterns are decoded by independent means
// (hardware float/double for f32/f64/bf16, a literal formula for f16), and the expected pattern
// of a rounding is derived from pattern arithmetic: on a positive grid the next larger magnitude
// is bits + 1 (max finite + 1 is the inf pattern), and the "even" neighbour of a tie is the one
// whose pattern has a clear low bit. Oracles for random inputs: hardware double->float, MPFR's own
// mpfr_get_d / mpfr_get_flt, _Float16 conversion where the compiler has it, and PyTorch's
// float->bf16 integer trick.
#include "ropecheck/reference/rounding.hpp"
#include "test_scale.hpp"

#include <gmp.h>
#include <gtest/gtest.h>
#include <mpfr.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace {

using ropecheck::DType;
using ropecheck::format_info;
using ropecheck::test::scaled;

// Random samples per oracle test; fewer at the small test scale (the sanitizer run: same code paths).
int oracle_samples() { return scaled(200000, 10000); }

constexpr mpfr_prec_t kPrec = 200;  // plenty for p + 1 + 40 bits plus headroom
constexpr std::array<DType, 4> kAllTypes = {DType::f64, DType::f32, DType::f16, DType::bf16};

// An mpfr_t owned by the test.
class Mp {
 public:
  explicit Mp(mpfr_prec_t prec = kPrec) { mpfr_init2(v_, prec); }
  ~Mp() { mpfr_clear(v_); }
  Mp(const Mp&) = delete;
  Mp& operator=(const Mp&) = delete;
  operator mpfr_ptr() { return v_; }  // NOLINT: lets Mp be passed straight to MPFR calls

 private:
  mpfr_t v_;
};

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::uint64_t bits_of(double d) {
  std::uint64_t u = 0;
  std::memcpy(&u, &d, sizeof u);
  return u;
}
std::uint32_t bits_of(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
double double_from(std::uint64_t u) {
  double d = 0;
  std::memcpy(&d, &u, sizeof d);
  return d;
}
float float_from(std::uint32_t u) {
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Independent decoder: the reference value of a pattern, not via ropecheck::bits_to_double.
double decode_ref(std::uint64_t bits, DType t) {
  switch (t) {
    case DType::f64:
      return double_from(bits);
    case DType::f32:
      return float_from(static_cast<std::uint32_t>(bits));
    case DType::bf16:  // bfloat16 is the top half of a binary32
      return float_from(static_cast<std::uint32_t>(bits) << 16);
    case DType::f16: {
      const double sign = (bits & 0x8000) ? -1.0 : 1.0;
      const int ex = static_cast<int>((bits >> 10) & 0x1F);
      const auto frac = static_cast<double>(bits & 0x3FF);
      if (ex == 31) return frac == 0 ? sign * std::numeric_limits<double>::infinity() : std::nan("");
      if (ex == 0) return sign * std::ldexp(frac, -24);
      return sign * std::ldexp(1024.0 + frac, ex - 25);
    }
  }
  return std::nan("");
}

std::uint64_t sign_bit(DType t) { return std::uint64_t{1} << (format_info(t).storage_bits - 1); }
// First pattern past the positive finite range = +inf.
std::uint64_t inf_bits(DType t) {
  const auto& f = format_info(t);
  return ((std::uint64_t{1} << (f.storage_bits - f.precision)) - 1) << (f.precision - 1);
}

std::string hex_of(mpfr_srcptr x) {
  char buf[160];
  mpfr_snprintf(buf, sizeof buf, "%Ra", x);
  return buf;
}

// Checks every rounding boundary kind in the gap [v, v+] above a positive finite pattern, for
// both signs, and for round_to_bits and round_to_double alike. Temporaries are reused (speed).
class GapChecker {
 public:
  explicit GapChecker(DType t) : t_(t) {}

  void check(std::uint64_t bits, std::uint64_t& rng) {
    const auto& f = format_info(t_);
    const std::uint64_t next = bits + 1;
    mpfr_set_d(v_, decode_ref(bits, t_), MPFR_RNDN);
    if (next == inf_bits(t_)) {
      // Above max finite the grid continues (unbounded exponent) at 2^(max_exp+1).
      mpfr_set_ui_2exp(vp_, 1, f.max_exp + 1, MPFR_RNDN);
    } else {
      mpfr_set_d(vp_, decode_ref(next, t_), MPFR_RNDN);
    }
    // All arithmetic below is exact at 200 bits: operands span < 100 bits.
    mpfr_sub(gap_, vp_, v_, MPFR_RNDN);
    mpfr_mul_2si(tiny_, gap_, -40, MPFR_RNDN);  // 2^-40 of the local spacing
    mpfr_add(m_, v_, vp_, MPFR_RNDN);
    mpfr_div_2ui(m_, m_, 1, MPFR_RNDN);
    const std::uint64_t even = (bits & 1) == 0 ? bits : next;

    expect(v_, bits, "v");
    mpfr_add(x_, v_, tiny_, MPFR_RNDN);
    expect(x_, bits, "v+tiny");
    mpfr_div_2ui(x_, gap_, 2, MPFR_RNDN);
    mpfr_add(x_, v_, x_, MPFR_RNDN);
    expect(x_, bits, "v+gap/4");
    mpfr_sub(x_, m_, tiny_, MPFR_RNDN);
    expect(x_, bits, "mid-tiny");
    expect(m_, even, "mid (tie to even)");
    mpfr_add(x_, m_, tiny_, MPFR_RNDN);
    expect(x_, next, "mid+tiny");
    mpfr_div_2ui(x_, gap_, 2, MPFR_RNDN);
    mpfr_sub(x_, vp_, x_, MPFR_RNDN);
    expect(x_, next, "v+ - gap/4");
    mpfr_sub(x_, vp_, tiny_, MPFR_RNDN);
    expect(x_, next, "v+ - tiny");
    // A random point of the gap at 2^-32 resolution goes to the nearer end.
    const auto k = static_cast<std::uint32_t>(splitmix64(rng) >> 32);
    mpfr_mul_ui(x_, gap_, k, MPFR_RNDN);
    mpfr_div_2ui(x_, x_, 32, MPFR_RNDN);
    mpfr_add(x_, v_, x_, MPFR_RNDN);
    expect(x_, k < 0x80000000U ? bits : (k > 0x80000000U ? next : even), "random point");
  }

  int failures() const { return failures_; }

 private:
  void expect(mpfr_ptr x, std::uint64_t want, const char* what) {
    expect_one(x, want, what);
    mpfr_neg(neg_, x, MPFR_RNDN);
    expect_one(neg_, want | sign_bit(t_), what);
  }

  void expect_one(mpfr_ptr x, std::uint64_t want, const char* what) {
    const std::uint64_t got = ropecheck::round_to_bits(x, t_);
    const double got_d = ropecheck::round_to_double(x, t_);
    // Bitwise comparison of the double also checks the sign of zero.
    if (got == want && bits_of(got_d) == bits_of(decode_ref(want, t_))) return;
    if (++failures_ <= 10) {
      ADD_FAILURE() << ropecheck::to_string(t_) << " " << what << ": x=" << hex_of(x) << " want 0x"
                    << std::hex << want << " got 0x" << got << " (double " << got_d << ")";
    }
  }

  DType t_;
  int failures_ = 0;
  Mp v_, vp_, gap_, m_, x_, tiny_, neg_;
};

// Every positive finite pattern; every 13th at the small test scale.
void exhaustive_grid(DType t) {
  GapChecker checker(t);
  std::uint64_t rng = 0x5EED0000ULL + static_cast<std::uint64_t>(t);
  const std::uint64_t end = inf_bits(t);  // 0 .. max finite
  const std::uint64_t step = scaled<std::uint64_t>(1, 13);
  for (std::uint64_t bits = 0; bits < end; bits += step) checker.check(bits, rng);
  EXPECT_EQ(checker.failures(), 0);
}

// Patterns of f32/f64 over every biased exponent (subnormal range included): edge fractions
// (0, 1, 2, mid, all ones) plus `random_per_exp` random fractions; every `exp_step`-th exponent.
std::vector<std::uint64_t> sample_patterns(DType t, int random_per_exp, std::uint64_t exp_step = 1) {
  const auto& f = format_info(t);
  const int frac_bits = f.precision - 1;
  const std::uint64_t frac_max = (std::uint64_t{1} << frac_bits) - 1;
  const std::uint64_t exp_end = inf_bits(t) >> frac_bits;
  std::uint64_t rng = 0xC0FFEEULL + static_cast<std::uint64_t>(t);
  std::vector<std::uint64_t> out;
  for (std::uint64_t ex = 0; ex < exp_end; ex += exp_step) {
    for (std::uint64_t fr : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{2}, frac_max / 2,
                             frac_max / 2 + 1, frac_max - 1, frac_max}) {
      out.push_back((ex << frac_bits) | fr);
    }
    for (int i = 0; i < random_per_exp; ++i) out.push_back((ex << frac_bits) | (splitmix64(rng) & frac_max));
  }
  return out;
}

void sampled_grid(DType t, int random_per_exp, std::uint64_t exp_step = 1) {
  GapChecker checker(t);
  std::uint64_t rng = 0xABCDULL + static_cast<std::uint64_t>(t);
  const auto patterns = sample_patterns(t, random_per_exp, exp_step);
  for (std::uint64_t bits : patterns) checker.check(bits, rng);
  EXPECT_EQ(checker.failures(), 0);
  EXPECT_GT(patterns.size(), scaled<std::size_t>(5000, 2000));
}

std::uint64_t round_bits_of_double(double d, DType t) {
  Mp x(53);
  mpfr_set_d(x, d, MPFR_RNDN);  // exact
  return ropecheck::round_to_bits(x, t);
}

// ---------------------------------------------------------------------------------------------
// Format metadata

TEST(RoundingFormat, InfoMatchesIeee) {
  struct Row {
    DType t;
    int p, emin, emax, bits;
    const char* name;
  };
  for (const Row& r : {Row{DType::f64, 53, -1022, 1023, 64, "f64"}, Row{DType::f32, 24, -126, 127, 32, "f32"},
                       Row{DType::f16, 11, -14, 15, 16, "f16"}, Row{DType::bf16, 8, -126, 127, 16, "bf16"}}) {
    const auto& f = format_info(r.t);
    EXPECT_EQ(f.precision, r.p);
    EXPECT_EQ(f.min_normal_exp, r.emin);
    EXPECT_EQ(f.max_exp, r.emax);
    EXPECT_EQ(f.storage_bits, r.bits);
    EXPECT_STREQ(f.name, r.name);
    EXPECT_EQ(ropecheck::to_string(r.t), r.name);
  }
  // Cross-check f32/f64 against <limits>.
  EXPECT_EQ(format_info(DType::f32).precision, std::numeric_limits<float>::digits);
  EXPECT_EQ(format_info(DType::f64).precision, std::numeric_limits<double>::digits);
  EXPECT_EQ(format_info(DType::f32).min_normal_exp, std::numeric_limits<float>::min_exponent - 1);
  EXPECT_EQ(format_info(DType::f64).max_exp, std::numeric_limits<double>::max_exponent - 1);
}

TEST(RoundingFormat, ParseIsInverseOfToString) {
  for (DType t : kAllTypes) {
    const auto parsed = ropecheck::parse_dtype(ropecheck::to_string(t));
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(*parsed, t);
  }
  for (const char* bad : {"", "F32", "float32", "bfloat16", "f8", "fp16", " f16", "f16 ", "bf1"}) {
    EXPECT_FALSE(ropecheck::parse_dtype(bad).has_value()) << bad;
  }
}

// ---------------------------------------------------------------------------------------------
// Decoding / encoding

TEST(RoundingBits, DecodesKnownPatterns) {
  using ropecheck::bits_to_double;
  EXPECT_EQ(bits_to_double(0x3C00, DType::f16), 1.0);
  EXPECT_EQ(bits_to_double(0x3555, DType::f16), 0.333251953125);
  EXPECT_EQ(bits_to_double(0x7BFF, DType::f16), 65504.0);
  EXPECT_EQ(bits_to_double(0x0400, DType::f16), std::ldexp(1.0, -14));
  EXPECT_EQ(bits_to_double(0x03FF, DType::f16), std::ldexp(1023.0, -24));
  EXPECT_EQ(bits_to_double(0x0001, DType::f16), std::ldexp(1.0, -24));
  EXPECT_EQ(bits_to_double(0xC000, DType::f16), -2.0);
  EXPECT_EQ(bits_to_double(0x7C00, DType::f16), std::numeric_limits<double>::infinity());
  EXPECT_EQ(bits_to_double(0xFC00, DType::f16), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(bits_to_double(0x7E00, DType::f16)));
  EXPECT_TRUE(std::isnan(bits_to_double(0x7C01, DType::f16)));  // signalling pattern decodes to NaN
  const double nz = bits_to_double(0x8000, DType::f16);
  EXPECT_TRUE(nz == 0.0 && std::signbit(nz));

  EXPECT_EQ(bits_to_double(0x3F80, DType::bf16), 1.0);
  EXPECT_EQ(bits_to_double(0x7F7F, DType::bf16), std::ldexp(255.0, 120));  // max finite
  EXPECT_EQ(bits_to_double(0x0080, DType::bf16), std::ldexp(1.0, -126));
  EXPECT_EQ(bits_to_double(0x0001, DType::bf16), std::ldexp(1.0, -133));
  EXPECT_EQ(bits_to_double(0x4380, DType::bf16), 256.0);
  EXPECT_TRUE(std::isnan(bits_to_double(0x7FC0, DType::bf16)));
  EXPECT_TRUE(std::isnan(bits_to_double(0xFFC1, DType::bf16)));

  EXPECT_EQ(bits_to_double(0x3F800000, DType::f32), 1.0);
  EXPECT_EQ(bits_to_double(0x00000001, DType::f32), static_cast<double>(std::numeric_limits<float>::denorm_min()));
  EXPECT_EQ(bits_to_double(0x7F7FFFFF, DType::f32), static_cast<double>(std::numeric_limits<float>::max()));
  EXPECT_EQ(bits_to_double(0x3FF0000000000000ULL, DType::f64), 1.0);
  EXPECT_EQ(bits_to_double(1, DType::f64), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(bits_to_double(0x7FEFFFFFFFFFFFFFULL, DType::f64), std::numeric_limits<double>::max());
  EXPECT_TRUE(std::isnan(bits_to_double(0xFFF8000000000001ULL, DType::f64)));

  // Only the low storage_bits may be set.
  EXPECT_THROW(bits_to_double(0x10000, DType::f16), std::invalid_argument);
  EXPECT_THROW(bits_to_double(0x10000, DType::bf16), std::invalid_argument);
  EXPECT_THROW(bits_to_double(0x100000000ULL, DType::f32), std::invalid_argument);
}

// All 65536 patterns of both 16-bit formats: decode agrees with the independent decoder, and
// encode(decode(b)) = b for every non-NaN pattern.
TEST(RoundingBits, Exhaustive16BitDecodeEncode) {
  for (DType t : {DType::f16, DType::bf16}) {
    int bad = 0;
    for (std::uint64_t b = 0; b < 0x10000; ++b) {
      const double d = ropecheck::bits_to_double(b, t);
      const double ref = decode_ref(b, t);
      if (std::isnan(ref)) {
        bad += !std::isnan(d);
        bad += ropecheck::double_to_bits(d, t) != (t == DType::f16 ? 0x7E00U : 0x7FC0U);
        continue;
      }
      bad += bits_of(d) != bits_of(ref);
      bad += ropecheck::double_to_bits(d, t) != b;
    }
    EXPECT_EQ(bad, 0) << ropecheck::to_string(t);
  }
}

TEST(RoundingBits, DecodeMatchesHardwareForSampledF32F64) {
  for (DType t : {DType::f32, DType::f64}) {
    for (std::uint64_t b : sample_patterns(t, 8)) {
      for (std::uint64_t s : {std::uint64_t{0}, sign_bit(t)}) {
        const double d = ropecheck::bits_to_double(b | s, t);
        ASSERT_EQ(bits_of(d), bits_of(decode_ref(b | s, t))) << std::hex << (b | s);
        ASSERT_EQ(ropecheck::double_to_bits(d, t), b | s);
      }
    }
  }
}

TEST(RoundingBits, DoubleToBitsRejectsNonMembers) {
  EXPECT_THROW(ropecheck::double_to_bits(1.0 + std::ldexp(1.0, -11), DType::f16), std::invalid_argument);
  EXPECT_THROW(ropecheck::double_to_bits(257.0, DType::bf16), std::invalid_argument);
  EXPECT_THROW(ropecheck::double_to_bits(65536.0, DType::f16), std::invalid_argument);
  EXPECT_THROW(ropecheck::double_to_bits(std::ldexp(1.0, -25), DType::f16), std::invalid_argument);
  EXPECT_THROW(ropecheck::double_to_bits(1e300, DType::f32), std::invalid_argument);
  EXPECT_EQ(ropecheck::double_to_bits(65504.0, DType::f16), 0x7BFFU);
  EXPECT_EQ(ropecheck::double_to_bits(-std::numeric_limits<double>::infinity(), DType::bf16), 0xFF80U);
}

// ---------------------------------------------------------------------------------------------
// Exhaustive / sampled grid boundaries

TEST(RoundingGrid, ExhaustiveF16) { exhaustive_grid(DType::f16); }
TEST(RoundingGrid, ExhaustiveBf16) { exhaustive_grid(DType::bf16); }
TEST(RoundingGrid, SampledF32) { sampled_grid(DType::f32, scaled(16, 2)); }
TEST(RoundingGrid, SampledF64) { sampled_grid(DType::f64, scaled(4, 0), scaled<std::uint64_t>(1, 4)); }

// Powers of two at every exponent the format has (subnormal ones included), and the neighbours
// just around them: below a power of two the spacing halves (normal range), so 2^e - ulp_below/2
// is the tie there.
TEST(RoundingGrid, AllPowersOfTwo) {
  for (DType t : kAllTypes) {
    const auto& f = format_info(t);
    const int lowest = f.min_normal_exp - f.precision + 1;
    Mp x;
    for (int e = lowest; e <= f.max_exp; ++e) {
      const double want = std::ldexp(1.0, e);
      mpfr_set_ui_2exp(x, 1, e, MPFR_RNDN);
      ASSERT_EQ(ropecheck::round_to_double(x, t), want) << ropecheck::to_string(t) << " e=" << e;
      mpfr_neg(x, x, MPFR_RNDN);
      ASSERT_EQ(ropecheck::round_to_double(x, t), -want) << ropecheck::to_string(t) << " e=" << e;
      // Tie below 2^e: between pred(2^e) (odd, all-ones fraction) and 2^e (even) -> 2^e.
      const double below = ropecheck::ulp(want / 2, t);
      if (e > lowest) {
        mpfr_set_d(x, want - below / 2, MPFR_RNDN);  // exact: p + 1 bits
        ASSERT_EQ(ropecheck::round_to_double(x, t), want) << ropecheck::to_string(t) << " e=" << e;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Special values and edges

TEST(RoundingSpecial, NanIsCanonicalQuiet) {
  Mp x;
  mpfr_set_nan(x);
  EXPECT_EQ(ropecheck::round_to_bits(x, DType::f64), 0x7FF8000000000000ULL);
  EXPECT_EQ(ropecheck::round_to_bits(x, DType::f32), 0x7FC00000U);
  EXPECT_EQ(ropecheck::round_to_bits(x, DType::f16), 0x7E00U);
  EXPECT_EQ(ropecheck::round_to_bits(x, DType::bf16), 0x7FC0U);
  mpfr_neg(x, x, MPFR_RNDN);  // a "negative" NaN is canonicalised too
  EXPECT_EQ(ropecheck::round_to_bits(x, DType::bf16), 0x7FC0U);
  for (DType t : kAllTypes) EXPECT_TRUE(std::isnan(ropecheck::round_to_double(x, t)));
}

TEST(RoundingSpecial, InfinitiesAndZeros) {
  Mp x;
  for (DType t : kAllTypes) {
    mpfr_set_inf(x, 1);
    EXPECT_EQ(ropecheck::round_to_bits(x, t), inf_bits(t));
    mpfr_set_inf(x, -1);
    EXPECT_EQ(ropecheck::round_to_bits(x, t), inf_bits(t) | sign_bit(t));
    mpfr_set_zero(x, 1);
    EXPECT_EQ(ropecheck::round_to_bits(x, t), 0U);
    mpfr_set_zero(x, -1);
    EXPECT_EQ(ropecheck::round_to_bits(x, t), sign_bit(t));
    EXPECT_TRUE(std::signbit(ropecheck::round_to_double(x, t)));
  }
}

// Exponents far outside every format (and outside binary64): no overflow inside the routine.
TEST(RoundingSpecial, HugeAndTinyExponents) {
  Mp x(64);
  for (DType t : kAllTypes) {
    mpfr_set_ui_2exp(x, 3, 100000, MPFR_RNDN);
    EXPECT_EQ(ropecheck::round_to_bits(x, t), inf_bits(t));
    mpfr_neg(x, x, MPFR_RNDN);
    EXPECT_EQ(ropecheck::round_to_bits(x, t), inf_bits(t) | sign_bit(t));
    mpfr_set_ui_2exp(x, 3, -100000, MPFR_RNDN);
    EXPECT_EQ(ropecheck::round_to_bits(x, t), 0U);
    mpfr_neg(x, x, MPFR_RNDN);
    EXPECT_EQ(ropecheck::round_to_bits(x, t), sign_bit(t));  // underflow keeps the sign
  }
}

// The rounding boundary of the top binade in each format, spelled out.
TEST(RoundingSpecial, OverflowThreshold) {
  Mp x;
  for (DType t : kAllTypes) {
    const auto& f = format_info(t);
    const std::uint64_t max_bits = inf_bits(t) - 1;
    // max_finite + ulp/2 = 2^(emax+1) - 2^(emax-p): the tie goes to the even side, inf.
    mpfr_set_ui_2exp(x, 1, f.max_exp + 1, MPFR_RNDN);
    Mp half_ulp;
    mpfr_set_ui_2exp(half_ulp, 1, f.max_exp - f.precision, MPFR_RNDN);
    mpfr_sub(x, x, half_ulp, MPFR_RNDN);
    EXPECT_EQ(ropecheck::round_to_bits(x, t), inf_bits(t)) << ropecheck::to_string(t);
    mpfr_nextbelow(x);  // just below the tie: stays max finite
    EXPECT_EQ(ropecheck::round_to_bits(x, t), max_bits) << ropecheck::to_string(t);
    mpfr_neg(x, x, MPFR_RNDN);
    EXPECT_EQ(ropecheck::round_to_bits(x, t), max_bits | sign_bit(t)) << ropecheck::to_string(t);
  }
  // Known numbers from the research notes: fp16 max 65504, >= 65520 is inf.
  for (auto [v, want] : {std::pair{65504.0, 0x7BFFU}, std::pair{65519.0, 0x7BFFU}, std::pair{65519.999, 0x7BFFU},
                         std::pair{65520.0, 0x7C00U}, std::pair{70000.0, 0x7C00U}}) {
    EXPECT_EQ(round_bits_of_double(v, DType::f16), want) << v;
  }
  // Double -> f32 of DBL_MAX is inf; FLT_MAX stays.
  EXPECT_EQ(round_bits_of_double(std::numeric_limits<double>::max(), DType::f32), 0x7F800000U);
  EXPECT_EQ(round_bits_of_double(static_cast<double>(std::numeric_limits<float>::max()), DType::f32), 0x7F7FFFFFU);
}

// Below the smallest subnormal s: s/2 is a tie between 0 (even) and s (odd) -> 0; just above -> s.
TEST(RoundingSpecial, SmallestSubnormal) {
  Mp x;
  for (DType t : kAllTypes) {
    const auto& f = format_info(t);
    const int s_exp = f.min_normal_exp - f.precision + 1;
    mpfr_set_ui_2exp(x, 1, s_exp - 1, MPFR_RNDN);
    EXPECT_EQ(ropecheck::round_to_bits(x, t), 0U) << ropecheck::to_string(t);
    mpfr_neg(x, x, MPFR_RNDN);
    EXPECT_EQ(ropecheck::round_to_bits(x, t), sign_bit(t)) << ropecheck::to_string(t);
    mpfr_neg(x, x, MPFR_RNDN);
    mpfr_nextabove(x);
    EXPECT_EQ(ropecheck::round_to_bits(x, t), 1U) << ropecheck::to_string(t);
    // 3s/2: tie between s (odd) and 2s (even) -> 2s.
    mpfr_set_ui_2exp(x, 3, s_exp - 1, MPFR_RNDN);
    EXPECT_EQ(ropecheck::round_to_bits(x, t), 2U) << ropecheck::to_string(t);
    // Far below: zero.
    mpfr_set_ui_2exp(x, 1, s_exp - 3, MPFR_RNDN);
    EXPECT_EQ(ropecheck::round_to_bits(x, t), 0U) << ropecheck::to_string(t);
  }
}

// The input's own precision does not matter (1 bit up to many).
TEST(RoundingSpecial, AnyInputPrecision) {
  Mp one_bit(1);
  mpfr_set_ui(one_bit, 1, MPFR_RNDN);
  EXPECT_EQ(ropecheck::round_to_bits(one_bit, DType::bf16), 0x3F80U);
  Mp wide(100000);
  // 1 + 2^-8 + 2^-99000: above the bf16 midpoint by a hair far below any double.
  mpfr_set_ui_2exp(wide, 1, -99000, MPFR_RNDN);
  mpfr_add_d(wide, wide, 1.0 + std::ldexp(1.0, -8), MPFR_RNDN);
  EXPECT_EQ(ropecheck::round_to_bits(wide, DType::bf16), 0x3F81U);
  mpfr_set_ui_2exp(wide, 1, -99000, MPFR_RNDN);
  mpfr_sub_d(wide, wide, 1.0 + std::ldexp(1.0, -8), MPFR_RNDN);  // -(1 + 2^-8) + hair
  EXPECT_EQ(ropecheck::round_to_bits(wide, DType::bf16), 0xBF80U);
}

TEST(RoundingSpecial, KnownIntegersFromResearchNotes) {
  // research/precision.md section 4: bf16 holds integers exactly only up to 256.
  for (auto [v, want] : {std::pair{256.0, 256.0}, std::pair{257.0, 256.0}, std::pair{259.0, 260.0},
                         std::pair{261.0, 260.0}, std::pair{385.0, 384.0}, std::pair{1001.0, 1000.0},
                         std::pair{4097.0, 4096.0}, std::pair{1000000.0, 999424.0}}) {
    Mp x;
    mpfr_set_d(x, v, MPFR_RNDN);
    EXPECT_EQ(ropecheck::round_to_double(x, DType::bf16), want) << v;
  }
  for (auto [v, want] : {std::pair{2048.0, 2048.0}, std::pair{2049.0, 2048.0}, std::pair{2051.0, 2052.0}}) {
    Mp x;
    mpfr_set_d(x, v, MPFR_RNDN);
    EXPECT_EQ(ropecheck::round_to_double(x, DType::f16), want) << v;
  }
  Mp x;
  mpfr_set_d(x, 16777217.0, MPFR_RNDN);
  EXPECT_EQ(ropecheck::round_to_double(x, DType::f32), 16777216.0);
}

// ---------------------------------------------------------------------------------------------
// Independent oracles on random inputs

// Hardware double -> float conversion is one RNE rounding, so it is a valid oracle for
// round_to_bits(double value, f32). Inputs: fully random doubles (mostly out of float range: inf / 0)
// and doubles with exponents around the float range (subnormals, overflow boundary).
TEST(RoundingOracle, F32MatchesHardwareConversion) {
  std::uint64_t rng = 42;
  int bad = 0;
  for (int i = 0; i < oracle_samples(); ++i) {
    std::uint64_t u = splitmix64(rng);
    if (i % 2 == 1) {  // biased double exponent in [1023-160, 1023+130)
      const std::uint64_t ex = 1023 - 160 + splitmix64(rng) % 290;
      u = (u & 0x800FFFFFFFFFFFFFULL) | (ex << 52);
    }
    const double d = double_from(u);
    if (std::isnan(d)) continue;
    // Out-of-range double->float is IEEE overflow (inf) under GCC/Clang on IEEE targets.
    const std::uint32_t want = bits_of(static_cast<float>(d));
    bad += round_bits_of_double(d, DType::f32) != want;
    // to_f64 of an exact double is the identity (bitwise, incl. -0 and subnormals).
    Mp x(53);
    mpfr_set_d(x, d, MPFR_RNDN);
    bad += bits_of(ropecheck::round_to_double(x, DType::f64)) != u;
  }
  EXPECT_EQ(bad, 0);
}

// MPFR's own mpfr_get_d / mpfr_get_flt are correctly rounded (subnormals included) and take a
// different code path. Random values of precision p+1 (half are ties), p+2 and 200 bits.
TEST(RoundingOracle, MatchesMpfrGetDAndGetFlt) {
  gmp_randstate_t state;
  gmp_randinit_mt(state);
  gmp_randseed_ui(state, 20240607UL);
  std::uint64_t rng = 7;
  int bad = 0;
  for (DType t : {DType::f64, DType::f32}) {
    const auto& f = format_info(t);
    const int lo = f.min_normal_exp - f.precision - 3;
    const int span = f.max_exp + 3 - lo;
    for (int i = 0; i < oracle_samples() * 3 / 10; ++i) {
      const mpfr_prec_t prec = i % 3 == 0 ? f.precision + 1 : (i % 3 == 1 ? f.precision + 2 : 200);
      Mp x(prec);
      mpfr_urandomb(x, state);
      if (mpfr_zero_p(x)) continue;
      const long ex = lo + static_cast<long>(splitmix64(rng) % static_cast<std::uint64_t>(span));
      mpfr_mul_2si(x, x, ex, MPFR_RNDN);
      if (splitmix64(rng) & 1) mpfr_neg(x, x, MPFR_RNDN);
      const double got = ropecheck::round_to_double(x, t);
      const double want = t == DType::f64 ? mpfr_get_d(x, MPFR_RNDN) : static_cast<double>(mpfr_get_flt(x, MPFR_RNDN));
      if (bits_of(got) != bits_of(want) && ++bad <= 5) {
        ADD_FAILURE() << ropecheck::to_string(t) << " x=" << hex_of(x) << " got " << got << " want " << want;
      }
    }
  }
  gmp_randclear(state);
  EXPECT_EQ(bad, 0);
}

// PyTorch's float -> bf16 rounding (c10/util/BFloat16.h) is integer RNE on the float bits; for an
// exactly-float input it is a single rounding, hence an oracle.
TEST(RoundingOracle, Bf16MatchesPytorchIntegerTrick) {
  std::uint64_t rng = 99;
  int bad = 0;
  for (int i = 0; i < oracle_samples(); ++i) {
    auto u = static_cast<std::uint32_t>(splitmix64(rng));
    if (i % 4 == 0) u = (u & 0xFFFF0000U) | 0x8000U;  // force exact ties
    const float fl = float_from(u);
    if (std::isnan(fl)) continue;
    const std::uint32_t want = (u + 0x7FFFU + ((u >> 16) & 1U)) >> 16;
    bad += round_bits_of_double(static_cast<double>(fl), DType::bf16) != want;
  }
  EXPECT_EQ(bad, 0);
}

#if defined(__FLT16_MANT_DIG__) && (defined(__x86_64__) || defined(__aarch64__))
// The compiler's double -> _Float16 conversion is a single RNE rounding.
TEST(RoundingOracle, F16MatchesCompilerFloat16) {
  std::uint64_t rng = 1234;
  int bad = 0;
  for (int i = 0; i < oracle_samples(); ++i) {
    std::uint64_t u = splitmix64(rng);
    const std::uint64_t ex = 1023 - 30 + splitmix64(rng) % 50;  // exponents -30 .. 19
    u = (u & 0x800FFFFFFFFFFFFFULL) | (ex << 52);
    if (i % 4 == 0) u &= ~((std::uint64_t{1} << 30) - 1);  // short significands: frequent ties
    const double d = double_from(u);
    const auto h = static_cast<_Float16>(d);
    std::uint16_t want = 0;
    std::memcpy(&want, &h, sizeof want);
    if (round_bits_of_double(d, DType::f16) != want && ++bad <= 5) {
      ADD_FAILURE() << "d=" << d << std::hex << " want 0x" << want << " got 0x" << round_bits_of_double(d, DType::f16);
    }
  }
  EXPECT_EQ(bad, 0);
}
#endif

// ---------------------------------------------------------------------------------------------
// Double rounding

// x = 1 + 2^-8 + 2^-30. Straight to bf16 (quantum 2^-7 at 1): x is above the midpoint 1 + 2^-8,
// so it rounds up to 1 + 2^-7. Via f32 first, the 2^-30 is lost (< half an f32 ulp), leaving the
// exact midpoint, which then ties to even = 1.0: wrong. Same construction for f16.
TEST(RoundingDoubleRounding, ViaF32IsWrongStraightIsRight) {
  struct Case {
    DType t;
    int half_quantum_exp;
    std::uint64_t straight, via_f32;
  };
  for (const Case& c : {Case{DType::bf16, -8, 0x3F81, 0x3F80}, Case{DType::f16, -11, 0x3C01, 0x3C00}}) {
    Mp x;
    mpfr_set_ui_2exp(x, 1, -30, MPFR_RNDN);
    mpfr_add_d(x, x, 1.0 + std::ldexp(1.0, c.half_quantum_exp), MPFR_RNDN);

    const std::uint64_t straight = ropecheck::round_to_bits(x, c.t);
    Mp via(24);
    mpfr_set_d(via, ropecheck::round_to_double(x, DType::f32), MPFR_RNDN);
    const std::uint64_t twice = ropecheck::round_to_bits(via, c.t);
    EXPECT_EQ(straight, c.straight);
    EXPECT_EQ(twice, c.via_f32);
    ASSERT_NE(straight, twice);

    // The straight result is the nearer of the two to x, so it is the correct one.
    Mp d1, d2;
    mpfr_sub_d(d1, x, ropecheck::bits_to_double(straight, c.t), MPFR_RNDN);
    mpfr_sub_d(d2, x, ropecheck::bits_to_double(twice, c.t), MPFR_RNDN);
    EXPECT_LT(mpfr_cmpabs(d1, d2), 0);
  }
}

// ---------------------------------------------------------------------------------------------
// ulp, convenience wrappers, thread safety

TEST(RoundingUlp, KnownSpacings) {
  using ropecheck::ulp;
  EXPECT_EQ(ulp(1.0, DType::f32), std::ldexp(1.0, -23));
  EXPECT_EQ(ulp(1.0, DType::bf16), std::ldexp(1.0, -7));
  EXPECT_EQ(ulp(1.0, DType::f16), std::ldexp(1.0, -10));
  EXPECT_EQ(ulp(1.0, DType::f64), std::numeric_limits<double>::epsilon());
  EXPECT_EQ(ulp(-1.5, DType::bf16), std::ldexp(1.0, -7));
  EXPECT_EQ(ulp(0.99, DType::bf16), std::ldexp(1.0, -8));  // binade [1/2, 1)
  EXPECT_EQ(ulp(65504.0, DType::f16), 32.0);
  EXPECT_EQ(ulp(300.0, DType::bf16), 2.0);   // research notes: 256-511 -> spacing 2
  EXPECT_EQ(ulp(5000.0, DType::bf16), 32.0);
  EXPECT_EQ(ulp(0.0, DType::f16), std::ldexp(1.0, -24));
  EXPECT_EQ(ulp(-0.0, DType::bf16), std::ldexp(1.0, -133));
  EXPECT_EQ(ulp(std::ldexp(1.0, -20), DType::f16), std::ldexp(1.0, -24));  // subnormal range
  EXPECT_EQ(ulp(std::ldexp(1.0, -14), DType::f16), std::ldexp(1.0, -24));  // min normal
  EXPECT_EQ(ulp(std::numeric_limits<double>::denorm_min(), DType::f64), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(ulp(std::numeric_limits<double>::max(), DType::f64), std::ldexp(1.0, 971));
  EXPECT_EQ(ulp(1e6, DType::f16), std::ldexp(1.0, 19 - 10));  // beyond max finite: unbounded exponent
  EXPECT_TRUE(std::isnan(ulp(std::numeric_limits<double>::infinity(), DType::f32)));
  EXPECT_TRUE(std::isnan(ulp(std::nan(""), DType::f32)));
  // f32 agrees with nextafter.
  for (float v : {1.0f, 3.0f, 1e-40f, 1e30f, std::numeric_limits<float>::min()}) {
    EXPECT_EQ(ulp(static_cast<double>(v), DType::f32),
              static_cast<double>(std::nextafter(v, std::numeric_limits<float>::infinity()) - v))
        << v;
  }
}

TEST(RoundingWrappers, BoostOverloads) {
  using boost::multiprecision::mpfr_float;
  mpfr_float third = 1;
  third /= 3;  // at the default precision (50 digits), far more than 53 bits
  EXPECT_EQ(ropecheck::to_f64(third), 1.0 / 3.0);
  EXPECT_EQ(ropecheck::to_f32(third), 1.0f / 3.0f);
  EXPECT_EQ(ropecheck::to_f16_bits(third), 0x3555U);
  EXPECT_EQ(ropecheck::to_bf16_bits(third), 0x3EABU);  // 1.0101010|1010... rounds up
  EXPECT_EQ(ropecheck::round_to_bits(third, DType::f32), 0x3EAAAAABU);
  EXPECT_EQ(ropecheck::round_to_double(third, DType::bf16), ropecheck::bits_to_double(0x3EAB, DType::bf16));
  mpfr_float big = 70000;
  EXPECT_EQ(ropecheck::to_f16_bits(big), 0x7C00U);
  EXPECT_EQ(ropecheck::to_f16_bits(boost::multiprecision::mpfr_float(-big)), 0xFC00U);
  const float fl = ropecheck::to_f32(mpfr_float(-0.0));
  EXPECT_TRUE(fl == 0.0f && std::signbit(fl));
}

// Conversions run concurrently give the same answers and leave MPFR's exponent range alone.
TEST(RoundingThreads, ConcurrentAndNoGlobalState) {
  const mpfr_exp_t emin = mpfr_get_emin();
  const mpfr_exp_t emax = mpfr_get_emax();
  auto work = [](std::uint64_t seed, std::vector<std::uint64_t>& out) {
    std::uint64_t rng = seed;
    Mp x(80);
    for (int i = 0; i < 20000; ++i) {
      mpfr_set_d(x, double_from(splitmix64(rng)), MPFR_RNDN);
      mpfr_mul_2si(x, x, static_cast<long>(splitmix64(rng) % 64) - 32, MPFR_RNDN);
      for (DType t : kAllTypes) out.push_back(ropecheck::round_to_bits(x, t));
    }
  };
  std::vector<std::uint64_t> serial;
  work(5, serial);
  std::vector<std::vector<std::uint64_t>> results(4);
  std::vector<std::thread> threads;
  for (auto& r : results) threads.emplace_back(work, 5, std::ref(r));
  for (auto& th : threads) th.join();
  for (const auto& r : results) EXPECT_EQ(r, serial);
  EXPECT_EQ(mpfr_get_emin(), emin);
  EXPECT_EQ(mpfr_get_emax(), emax);
}

}  // namespace

// load_element reads a stored element of every dtype exactly (what the targets read kernel outputs with).
TEST(LoadElement, DecodesEveryDtypeExactly) {
  const double d = -0x1.23456789abcdfp-3;
  EXPECT_EQ(load_element(&d, DType::f64), d);
  const float f = 0x1.fffffep+100f;
  EXPECT_EQ(load_element(&f, DType::f32), static_cast<double>(f));
  const std::uint16_t h = 0x3555, hsub = 0x0001, b = 0xC049;  // f16 0.33325195..., f16 2^-24, bf16 -3.140625
  EXPECT_EQ(load_element(&h, DType::f16), 0x1.554p-2);
  EXPECT_EQ(load_element(&hsub, DType::f16), 0x1p-24);
  EXPECT_EQ(load_element(&b, DType::bf16), -3.140625);
  const std::uint16_t bnan = 0x7FC1;
  EXPECT_TRUE(std::isnan(load_element(&bnan, DType::bf16)));
}
