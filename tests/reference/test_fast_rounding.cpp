// Tests for the fast correct-rounding path (reference/fast_rounding.hpp).
//
// Oracles never come from the code under test:
//   - round_dd: whenever it returns a value, both ends of the interval [hi+lo-err, hi+lo+err]
//     (computed exactly in MPFR) must round, with round_to_double, to that same value (rounding
//     is monotonic, so every point between does too); with err == 0 it must answer and agree
//     with round_to_double of the exact hi + lo.
//   - sin/cos in DD: the claimed error bound is checked against MPFR at 400 bits.
//   - engines: every output value is compared bit for bit with the straightforward reference
//     (rope_frequencies / rope_cos_sin / rope_apply / sinusoidal_row at high precision, then
//     round_to_double), for presets and the extra variant specs of the mpmath cross-check.
#include <gtest/gtest.h>

#include "test_paths.hpp"
#include "test_scale.hpp"
#include <mpfr.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ropecheck/reference/fast_rounding.hpp"
#include "ropecheck/reference/mpfr_value.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"
#include "ropecheck/core/spec_json.hpp"

namespace {

using namespace ropecheck;

constexpr std::array<DType, 4> kAllTypes = {DType::f64, DType::f32, DType::f16, DType::bf16};

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
double uniform01(std::uint64_t& s) { return static_cast<double>(splitmix64(s) >> 11) * 0x1p-53; }

std::uint64_t bits(double d) { return std::bit_cast<std::uint64_t>(d); }

using Mp = MpfrValue;
using ropecheck::test::scaled;

// Random samples per test: a twentieth at the small test scale (the sanitizer run; same code paths).
int samples(int full) { return scaled(full, full / 20); }

// Exact hi + lo + k * err for k in {-1, 0, 1} (2300 bits cover any three doubles exactly).
void exact_sum(mpfr_ptr out, double hi, double lo, double err, int k) {
  mpfr_set_d(out, hi, MPFR_RNDN);
  mpfr_add_d(out, out, lo, MPFR_RNDN);
  if (k != 0) mpfr_add_d(out, out, k * err, MPFR_RNDN);
}

struct RoundDdTally {
  long decided = 0, refused = 0;
};

// Checks one round_dd call against round_to_double; returns whether it decided.
bool check_round_dd(double hi, double lo, double err, DType t, RoundDdTally* tally = nullptr) {
  const std::optional<double> r = round_dd(hi, lo, err, t);
  Mp lo_end(2300), mid(2300), hi_end(2300);
  exact_sum(lo_end.get(), hi, lo, err, -1);
  exact_sum(mid.get(), hi, lo, err, 0);
  exact_sum(hi_end.get(), hi, lo, err, 1);
  const double want_mid = round_to_double(mid.get(), t);
  const double a = std::fabs(hi + lo);
  if (err == 0.0 && ((a >= 0x1p-960 && a <= 0x1p1000) || a == 0.0)) {
    EXPECT_TRUE(r.has_value()) << "exact value refused: " << hi << " + " << lo << " (" << to_string(t) << ")";
  }
  if (tally) ++(r ? tally->decided : tally->refused);
  if (!r) return false;
  const double want_lo = round_to_double(lo_end.get(), t), want_hi = round_to_double(hi_end.get(), t);
  EXPECT_EQ(bits(*r), bits(want_mid)) << std::hexfloat << "hi " << hi << " lo " << lo << " err " << err << " "
                                      << to_string(t) << " got " << *r << " want " << want_mid;
  EXPECT_EQ(bits(*r), bits(want_lo)) << std::hexfloat << "hi " << hi << " lo " << lo << " err " << err << " "
                                     << to_string(t) << " lower end rounds to " << want_lo;
  EXPECT_EQ(bits(*r), bits(want_hi)) << std::hexfloat << "hi " << hi << " lo " << lo << " err " << err << " "
                                     << to_string(t) << " upper end rounds to " << want_hi;
  return true;
}

// A random finite value of format t with magnitude in [2^emin, 2^emax].
double random_value_of(DType t, std::uint64_t& s, int emin, int emax) {
  const FormatInfo& f = format_info(t);
  const int e = emin + static_cast<int>(splitmix64(s) % static_cast<std::uint64_t>(emax - emin + 1));
  const std::uint64_t frac = splitmix64(s) & ((std::uint64_t{1} << (f.precision - 1)) - 1);
  const int qe = std::max(e, f.min_normal_exp) - f.precision + 1;
  double v =
      std::ldexp(static_cast<double>(frac | (e >= f.min_normal_exp ? std::uint64_t{1} << (f.precision - 1) : 0)), qe);
  if (e < f.min_normal_exp) v = std::ldexp(static_cast<double>(frac), qe);  // subnormal
  return (splitmix64(s) & 1) ? -v : v;
}

// MpfrValue (mpfr_value.hpp): the precision it was made with, and a value set through get() reads
// back through the const get().
// triple_double_of (mpfr_value.hpp): the parts add up to pi to 2^-150 relative and each part is the
// double nearest to what the parts before it leave.
TEST(TripleDouble, PartsSumToTheValue) {
  ropecheck::MpfrValue pi(600), sum(600), err(600);
  mpfr_const_pi(pi.get(), MPFR_RNDN);
  const std::array<double, 3> t = ropecheck::triple_double_of(pi.get(), 664);
  EXPECT_EQ(t[0], 3.141592653589793);
  EXPECT_LT(std::fabs(t[1]), 0x1p-52);
  EXPECT_LT(std::fabs(t[2]), std::fabs(t[1]) * 0x1p-52);
  mpfr_set_d(sum.get(), t[0], MPFR_RNDN);
  mpfr_add_d(sum.get(), sum.get(), t[1], MPFR_RNDN);
  mpfr_add_d(sum.get(), sum.get(), t[2], MPFR_RNDN);
  mpfr_sub(err.get(), pi.get(), sum.get(), MPFR_RNDN);
  EXPECT_LT(std::fabs(mpfr_get_d(err.get(), MPFR_RNDN)), 0x1p-150);
}

TEST(fast_rounding_mpfr_value, KeepsPrecisionAndValue) {
  MpfrValue v(77);
  EXPECT_EQ(mpfr_get_prec(v.get()), 77);
  mpfr_set_ui(v.get(), 3, MPFR_RNDN);
  mpfr_div_ui(v.get(), v.get(), 7, MPFR_RNDN);
  const MpfrValue& c = v;
  MpfrValue w(200);
  mpfr_set_ui(w.get(), 3, MPFR_RNDN);
  mpfr_div_ui(w.get(), w.get(), 7, MPFR_RNDN);
  EXPECT_NE(mpfr_cmp(c.get(), w.get()), 0);  // 3/7 at 77 bits is not 3/7 at 200 bits
  mpfr_prec_round(w.get(), 77, MPFR_RNDN);
  EXPECT_EQ(mpfr_cmp(c.get(), w.get()), 0);
}

// MpfrThreadCaches (mpfr_value.hpp): a thread that fills MPFR's caches (pi, the mpz pool of mpfr_sin_cos)
// holds bytes after its values are cleared, and gives every one back when the guard ends. GMP's
// allocator is counted meanwhile.
std::atomic<long long> g_mpfr_live_bytes{0};
void* counted_alloc(std::size_t n) {
  g_mpfr_live_bytes += static_cast<long long>(n);
  return std::malloc(n);
}
void* counted_realloc(void* p, std::size_t old_n, std::size_t n) {
  g_mpfr_live_bytes += static_cast<long long>(n) - static_cast<long long>(old_n);
  return std::realloc(p, n);
}
void counted_free(void* p, std::size_t n) {
  g_mpfr_live_bytes -= static_cast<long long>(n);
  std::free(p);
}

TEST(fast_rounding_mpfr_thread_caches, WorkerThreadGivesBackEveryByte) {
  void* (*old_alloc)(std::size_t);
  void* (*old_realloc)(void*, std::size_t, std::size_t);
  void (*old_free)(void*, std::size_t);
  mp_get_memory_functions(&old_alloc, &old_realloc, &old_free);
  mp_set_memory_functions(counted_alloc, counted_realloc, counted_free);
  g_mpfr_live_bytes = 0;
  long long held = -1, after = -1;
  std::thread([&] {
    {
      const MpfrThreadCaches caches;
      {
        MpfrValue x(2000), s(2000), c(2000);
        mpfr_const_pi(x.get(), MPFR_RNDN);
        mpfr_mul_ui(x.get(), x.get(), 12345, MPFR_RNDN);
        mpfr_sin_cos(s.get(), c.get(), x.get(), MPFR_RNDN);
      }
      held = g_mpfr_live_bytes.load();  // the values are cleared; the thread's caches are not
    }
    after = g_mpfr_live_bytes.load();
  }).join();
  mp_set_memory_functions(old_alloc, old_realloc, old_free);
  EXPECT_GT(held, 0);  // what a thread without the guard would lose at its end
  EXPECT_EQ(after, 0);
}

TEST(fast_rounding_round_dd, RandomValuesAllFormats) {
  std::uint64_t s = 1;
  for (DType t : kAllTypes) {
    RoundDdTally tally;
    const int n = samples(20000);
    for (int i = 0; i < n; ++i) {
      const int e = static_cast<int>(splitmix64(s) % 60) - 40;  // |v| in [2^-40, 2^20)
      const double hi = std::ldexp(1.0 + uniform01(s), e) * ((splitmix64(s) & 1) ? -1.0 : 1.0);
      const double lo = (uniform01(s) - 0.5) * std::ldexp(1.0, e - 52);
      const int mode = static_cast<int>(splitmix64(s) % 4);
      const double err = mode == 0 ? 0.0 : std::ldexp(uniform01(s), e - 60 - 20 * mode);
      check_round_dd(hi, lo, err, t, &tally);
    }
    // Errors far below an ulp: almost everything (more than 99.5%) decides on the fast path.
    EXPECT_GT(tally.decided, n - n / 200) << to_string(t);
  }
}

TEST(fast_rounding_round_dd, NearMidpointsAndBinadeEdges) {
  std::uint64_t s = 2;
  for (DType t : kAllTypes) {
    const FormatInfo& f = format_info(t);
    for (int i = 0; i < samples(4000); ++i) {
      const int emin = t == DType::f64 ? -900 : f.min_normal_exp - f.precision + 1;
      const int emax = t == DType::f64 ? 900 : f.max_exp;
      double R = random_value_of(t, s, emin, emax);
      if (i % 5 == 0)
        R = std::copysign(
            std::ldexp(1.0, emin + static_cast<int>(splitmix64(s) % static_cast<std::uint64_t>(emax - emin))), R);
      const double g = ulp(R, t);
      const double sgn = (splitmix64(s) & 1) ? 1.0 : -1.0;
      // Midpoint above |R|, or below it (a quarter gap below a power of two, where the gap halves).
      const bool below = (splitmix64(s) & 1) != 0;
      const bool pow2 = R != 0.0 && std::fabs(R) == std::ldexp(1.0, std::ilogb(R)) && std::ilogb(R) > f.min_normal_exp;
      const double half = (below ? -(pow2 ? g / 4 : g / 2) : g / 2) * (std::signbit(R) ? -1.0 : 1.0);
      const double tiny = std::ldexp(g, -40 - static_cast<int>(splitmix64(s) % 40)) * sgn;
      const double errs[] = {0.0, std::fabs(tiny) / 4, std::fabs(tiny) * 2, g / 8};
      for (double err : errs) {
        if (t == DType::f64) {
          check_round_dd(R, half, err, t);         // exactly at the midpoint
          check_round_dd(R, half + tiny, err, t);  // just off it
        } else {
          const double M = R + half;  // exact: p + 1 <= 53 bits
          check_round_dd(M, 0.0, err, t);
          check_round_dd(M, tiny, err, t);
          check_round_dd(M + tiny, 0.0, err, t);
          check_round_dd(R, tiny, err, t);
        }
      }
    }
  }
}

TEST(fast_rounding_round_dd, SubnormalsOverflowAndZeros) {
  std::uint64_t s = 3;
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    const FormatInfo& f = format_info(t);
    const double sub_q = std::ldexp(1.0, f.min_normal_exp - f.precision + 1);
    const double max_fin = std::ldexp(2.0 - std::ldexp(1.0, 1 - f.precision), f.max_exp);
    const double T = max_fin + std::ldexp(1.0, f.max_exp - f.precision);
    for (double base : {sub_q / 2, sub_q, 1.5 * sub_q, 3 * sub_q / 2 + sub_q, sub_q / 4, sub_q * 37.5,
                        std::ldexp(1.0, f.min_normal_exp), std::ldexp(1.0, f.min_normal_exp) - sub_q / 2, max_fin, T,
                        T - std::ldexp(1.0, f.max_exp - 60), std::ldexp(1.0, f.max_exp + 1), 0x1p900}) {
      for (double sign : {1.0, -1.0}) {
        for (double rel : {0.0, 0x1p-70, -0x1p-70, 0x1p-30, -0x1p-30}) {
          for (double err_rel : {0.0, 0x1p-80, 0x1p-20, 4.0}) {
            const double lo = base * rel;
            check_round_dd(sign * base, sign * lo, std::fabs(base) * err_rel, t);
          }
        }
      }
    }
    for (int i = 0; i < samples(5000); ++i) {  // random subnormals and near-overflow values
      const double v = (i % 2 ? sub_q * 1100 : max_fin * 1.001) * uniform01(s);
      check_round_dd(v, v * (uniform01(s) - 0.5) * 0x1p-53, std::fabs(v) * std::ldexp(uniform01(s), -70), t);
      check_round_dd(v, v * (uniform01(s) - 0.5) * 0x1p-53, 0.0, t);
    }
  }
  // Zeros: exact zeros keep the sign of hi; an interval around zero is refused.
  for (DType t : kAllTypes) {
    EXPECT_EQ(bits(*round_dd(0.0, 0.0, 0.0, t)), bits(0.0));
    EXPECT_EQ(bits(*round_dd(-0.0, 0.0, 0.0, t)), bits(-0.0));
    EXPECT_EQ(bits(*round_dd(1.0, -1.0, 0.0, t)), bits(0.0));
    EXPECT_FALSE(round_dd(0.0, 0.0, 1e-300, t).has_value());
    EXPECT_FALSE(round_dd(1.0, 0.0, 2.0, t).has_value());  // straddles zero
    EXPECT_FALSE(round_dd(std::numeric_limits<double>::infinity(), 0.0, 0.0, t).has_value());
    EXPECT_FALSE(round_dd(std::nan(""), 0.0, 0.0, t).has_value());
    EXPECT_FALSE(round_dd(1.0, 0.0, std::nan(""), t).has_value());
    EXPECT_FALSE(round_dd(1.0, 0.0, -1.0, t).has_value());
  }
  // A huge error is always refused (this is what sends a value to the fallback).
  EXPECT_FALSE(round_dd(0.75, 0.0, 0.1, DType::bf16).has_value());
}

// --- sin / cos in DD: the bound holds --------------------------------------------------------

void check_sincos_bound(const SinCosDD& r, mpfr_ptr theta, const char* what) {
  Mp s(400), c(400), d(400);
  mpfr_sin_cos(s.get(), c.get(), theta, MPFR_RNDN);
  for (int k = 0; k < 2; ++k) {
    const DD v = k == 0 ? r.sin : r.cos;
    mpfr_sub_d(d.get(), k == 0 ? s.get() : c.get(), v.hi, MPFR_RNDN);
    mpfr_sub_d(d.get(), d.get(), v.lo, MPFR_RNDN);
    const double e = std::fabs(mpfr_get_d(d.get(), MPFR_RNDU));
    EXPECT_LE(e, r.err) << what << (k == 0 ? " sin" : " cos") << " theta " << mpfr_get_d(theta, MPFR_RNDN);
  }
}

TEST(fast_rounding_sincos_dd, BoundHoldsForScaledAngles) {
  std::uint64_t s = 4;
  Mp inv(400), theta(400), tmp(400);
  for (int i = 0; i < samples(20000); ++i) {
    // inv in [1e-7, 1.6], p integer up to 2^24 (and some up to 2^38)
    mpfr_set_d(inv.get(), std::exp(std::log(1e-7) * uniform01(s)) * 1.6, MPFR_RNDN);
    mpfr_sqrt(inv.get(), inv.get(), MPFR_RNDN);  // a 400-bit value, not a double
    std::array<double, 3> i3{};
    mpfr_set(tmp.get(), inv.get(), MPFR_RNDN);
    for (double& part : i3) {
      part = mpfr_get_d(tmp.get(), MPFR_RNDN);
      mpfr_sub_d(tmp.get(), tmp.get(), part, MPFR_RNDN);
    }
    const double p = std::floor(std::ldexp(uniform01(s), i % 10 == 0 ? 38 : 24));
    mpfr_mul_d(theta.get(), inv.get(), p, MPFR_RNDN);
    const std::optional<SinCosDD> r = sincos_scaled(p, i3, 0x1p-150);
    ASSERT_TRUE(r.has_value()) << p;
    EXPECT_LT(r->err, 0x1p-95);
    check_sincos_bound(*r, theta.get(), "scaled");
  }
}

TEST(fast_rounding_sincos_dd, BoundHoldsNearMultiplesOfHalfPi) {
  std::uint64_t s = 5;
  Mp pi(600), theta(600), tmp(600);
  mpfr_const_pi(pi.get(), MPFR_RNDN);
  for (int i = 0; i < samples(5000); ++i) {
    const long k = static_cast<long>(splitmix64(s) % 2000000) - 1000000;
    mpfr_mul_si(theta.get(), pi.get(), k, MPFR_RNDN);
    mpfr_div_2ui(theta.get(), theta.get(), 1, MPFR_RNDN);
    // offset of 2^-60 .. 2^-2
    const double off = std::ldexp(uniform01(s) - 0.5, -2 - static_cast<int>(splitmix64(s) % 58));
    mpfr_add_d(theta.get(), theta.get(), off, MPFR_RNDN);
    const double hi = mpfr_get_d(theta.get(), MPFR_RNDN);
    mpfr_sub_d(tmp.get(), theta.get(), hi, MPFR_RNDN);
    const double lo = mpfr_get_d(tmp.get(), MPFR_RNDN);
    mpfr_set_d(theta.get(), hi, MPFR_RNDN);
    mpfr_add_d(theta.get(), theta.get(), lo, MPFR_RNDN);  // the DD's exact value
    const std::optional<SinCosDD> r = sincos_dd(hi, lo, 0.0);
    if (!r) continue;  // tiny reduced angles may be refused
    check_sincos_bound(*r, theta.get(), "near k pi/2");
  }
  // Exact zero angle
  const std::optional<SinCosDD> z = sincos_scaled(-3.0, {0.0, 0.0, 0.0}, 0.0);
  ASSERT_TRUE(z.has_value());
  EXPECT_EQ(bits(z->sin.hi), bits(-0.0));
  EXPECT_EQ(z->cos.hi, 1.0);
  EXPECT_EQ(z->err, 0.0);
  EXPECT_FALSE(sincos_scaled(0x1p45, {1.0, 0.0, 0.0}, 0.0).has_value());  // beyond the fast range
}

// --- engines against the straightforward reference --------------------------------------------

constexpr unsigned kRefBits = 320;  // >= 53 + log2(2^40 angle) + 64 guard bits, with room

struct Case {
  std::string name;
  EncodingSpec spec;
  std::optional<std::int64_t> seq_len;
};

std::vector<Position> test_positions(const RopeSpec& r, std::uint64_t seed) {
  std::vector<Position> ps;
  for (std::int64_t p : {std::int64_t{0}, std::int64_t{1}, std::int64_t{4095}, std::int64_t{131071},
                         std::int64_t{1} << 20, (std::int64_t{1} << 24) - 1, std::int64_t{-77}})
    ps.push_back(Position::uniform(p));
  std::uint64_t s = seed;
  for (int i = 0; i < 3; ++i) ps.push_back(Position::uniform(static_cast<std::int64_t>(splitmix64(s) % (1u << 24))));
  ps.push_back(Position::uniform((std::int64_t{1} << 41) + 12345));  // beyond the fast range for inv ~ 1
  if (r.mrope != MropeMode::none) {
    ps.push_back({100, 7, 3});
    ps.push_back({0, 5, 9});
    ps.push_back({131071, std::int64_t{1} << 20, 1});
    ps.push_back({(std::int64_t{1} << 24) - 1, 0, 4095});
  }
  return ps;
}

// Head vectors: head 0 bf16-representable values (as golden inputs), head 1 arbitrary doubles
// with zeros of both signs and a fully zero pair.
std::vector<double> test_vectors(int D, std::uint64_t seed) {
  std::vector<double> x(static_cast<std::size_t>(2 * D));
  std::uint64_t s = seed;
  for (int i = 0; i < D; ++i) {
    const double v = (uniform01(s) - 0.5) * 8.0;
    x[static_cast<std::size_t>(i)] = static_cast<double>(std::ldexp(std::round(std::ldexp(v, 5)), -5));
    x[static_cast<std::size_t>(D + i)] =
        (uniform01(s) - 0.5) * std::ldexp(1.0, static_cast<int>(splitmix64(s) % 20) - 10);
  }
  auto set = [&](int i, double v) {  // head 1 only, small heads keep what fits
    if (i >= D && i < 2 * D) x[static_cast<std::size_t>(i)] = v;
  };
  set(D + 0, 0.0);
  set(D + 1, -0.0);
  set(D + 2, -0.0);
  set(D + D / 2 + 2, 0.0);
  set(D + D - 1, -0.0);
  // f16 overflow boundary: 65520 = 65504 + ulp/2 rounds (tie) to inf, 65519 to 65504.
  if (D >= 16) {
    set(D + 3, 65520.0);
    set(D + 4, -65519.0);
    set(D + D / 2 + 4, 70000.0);
  }
  return x;
}

struct RopeOutputs {
  std::array<std::vector<double>, 4> cos, sin, rot;
};

RopeOutputs run_engine(const RopeRoundingEngine& eng, const Position& pos, const std::vector<double>& x, int heads,
                       RoundingStats& stats) {
  RopeOutputs o;
  std::array<RoundedOut, 4> outs;
  for (std::size_t d = 0; d < 4; ++d) {
    o.cos[d].assign(static_cast<std::size_t>(eng.pairs()), std::nan(""));
    o.sin[d].assign(static_cast<std::size_t>(eng.pairs()), std::nan(""));
    o.rot[d].assign(x.size(), std::nan(""));
    outs[d] = {o.cos[d].data(), o.sin[d].data(), heads > 0 ? o.rot[d].data() : nullptr};
  }
  eng.evaluate(pos, x, heads, kAllTypes, outs, stats);
  return o;
}

void compare_rope(const Case& c, const EngineOptions& opt, RoundingStats* total = nullptr) {
  const RopeSpec& r = c.spec.rope;
  const RopeRoundingEngine eng(r, c.seq_len, std::int64_t{1} << 24, opt);
  ScopedPrecision prec(kRefBits);
  const RopeFrequencies<Real> f = rope_frequencies<Real>(r, c.seq_len);
  const int D = r.head_dim, P = rope_pairs(r);
  const std::vector<double> x = test_vectors(D, 17);
  RoundingStats stats;
  for (const Position& pos : test_positions(r, 99)) {
    const RopeOutputs got = run_engine(eng, pos, x, 2, stats);
    std::vector<Real> cr, sr;
    rope_cos_sin(r, f, pos, cr, sr);
    std::vector<std::vector<Real>> rot;
    for (int h = 0; h < 2; ++h) {
      std::vector<Real> xh;
      for (int i = 0; i < D; ++i) xh.emplace_back(x[static_cast<std::size_t>(h * D + i)]);
      rot.push_back(rope_apply<Real>(r, f, pos, xh));
    }
    for (std::size_t d = 0; d < 4; ++d) {
      const DType t = kAllTypes[d];
      const std::string where = c.name + " pos (" + std::to_string(pos.t) + "," + std::to_string(pos.h) + "," +
                                std::to_string(pos.w) + ") " + std::string(to_string(t));
      for (int j = 0; j < P; ++j) {
        const auto jj = static_cast<std::size_t>(j);
        ASSERT_EQ(bits(got.cos[d][jj]), bits(round_to_double(cr[jj], t))) << where << " cos pair " << j;
        ASSERT_EQ(bits(got.sin[d][jj]), bits(round_to_double(sr[jj], t))) << where << " sin pair " << j;
      }
      for (int h = 0; h < 2; ++h)
        for (int i = 0; i < D; ++i)
          ASSERT_EQ(bits(got.rot[d][static_cast<std::size_t>(h * D + i)]),
                    bits(round_to_double(rot[static_cast<std::size_t>(h)][static_cast<std::size_t>(i)], t)))
              << where << " rot head " << h << " channel " << i << " x " << x[static_cast<std::size_t>(h * D + i)];
    }
  }
  if (total) *total += stats;
}

void compare_sinusoidal(const Case& c, const EngineOptions& opt, RoundingStats* total = nullptr) {
  const SinusoidalSpec& sp = c.spec.sinusoidal;
  const SinusoidalRoundingEngine eng(sp, std::int64_t{1} << 24, opt);
  ScopedPrecision prec(kRefBits);
  const std::vector<Real> w = sinusoidal_frequencies<Real>(sp);
  RoundingStats stats;
  std::uint64_t s = 7;
  std::vector<std::int64_t> ps = {
      0, 1, 2, -1, -2, 4095, 131071, std::int64_t{1} << 20, (std::int64_t{1} << 24) - 1, (std::int64_t{1} << 41) + 5};
  for (int i = 0; i < 3; ++i) ps.push_back(static_cast<std::int64_t>(splitmix64(s) % (1u << 24)));
  for (std::int64_t p : ps) {
    std::array<std::vector<double>, 4> rows;
    std::array<double*, 4> ptrs{};
    for (std::size_t d = 0; d < 4; ++d) {
      rows[d].assign(static_cast<std::size_t>(sp.d_model), std::nan(""));
      ptrs[d] = rows[d].data();
    }
    eng.evaluate(p, kAllTypes, ptrs, stats);
    const std::vector<Real> ref = sinusoidal_row(sp, w, p);
    for (std::size_t d = 0; d < 4; ++d)
      for (int col = 0; col < sp.d_model; ++col)
        ASSERT_EQ(bits(rows[d][static_cast<std::size_t>(col)]),
                  bits(round_to_double(ref[static_cast<std::size_t>(col)], kAllTypes[d])))
            << c.name << " position " << p << " column " << col << " " << to_string(kAllTypes[d]);
  }
  if (total) *total += stats;
}

std::vector<Case> preset_cases() {
  std::vector<Case> cs;
  for (const char* name : {"llama-3.1-8b", "gpt-j-6b", "qwen2-vl-7b", "deepseek-v3", "gemma-3-4b-global",
                           "qwen2.5-7b-yarn", "qwen3-vl-8b", "transformer-base", "fairseq-transformer"})
    cs.push_back({name, load_preset(name), std::nullopt});
  cs.push_back({"phi-3.5-mini seq 8192", load_preset("phi-3.5-mini"), 8192});
  cs.push_back({"phi-3.5-mini short", load_preset("phi-3.5-mini"), std::nullopt});
  return cs;
}

std::vector<Case> variant_cases() {
  std::vector<Case> cs;
  const std::filesystem::path dir = ropecheck::test::specs_dir();
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& p : files) {
    const EncodingSpec spec = load_spec_file(p);
    const bool seq_dependent = spec.family == Family::rope && (spec.rope.scaling.type == ScalingType::dynamic ||
                                                               spec.rope.scaling.type == ScalingType::longrope);
    cs.push_back({p.stem().string(), spec, std::nullopt});
    if (seq_dependent) cs.push_back({p.stem().string() + " long", spec, std::int64_t{1} << 20});
  }
  return cs;
}

// Every preset (every fourth at the small test scale).
TEST(fast_rounding_engine, PresetsBitIdenticalToReference) {
  RoundingStats total;
  const std::vector<Case> cases = preset_cases();
  for (std::size_t i = 0; i < cases.size(); i += scaled<std::size_t>(1, 4)) {
    const Case& c = cases[i];
    SCOPED_TRACE(c.name);
    if (c.spec.family == Family::rope)
      compare_rope(c, {}, &total);
    else
      compare_sinusoidal(c, {}, &total);
    if (HasFatalFailure()) return;
  }
  std::printf("presets: %lld fast values, %lld fallback values\n", static_cast<long long>(total.fast_values),
              static_cast<long long>(total.fallback_values));
  EXPECT_GT(total.fast_values, 100 * total.fallback_values);
}

TEST(fast_rounding_engine, VariantSpecsBitIdenticalToReference) {
  const std::vector<Case> cases = variant_cases();
  ASSERT_GE(cases.size(), 30u) << "the variant specs of tests/python/specs were not found";
  for (std::size_t i = 0; i < cases.size(); i += scaled<std::size_t>(1, 4)) {  // every fourth, small scale
    const Case& c = cases[i];
    SCOPED_TRACE(c.name);
    if (c.spec.family == Family::rope)
      compare_rope(c, {});
    else
      compare_sinusoidal(c, {});
    if (HasFatalFailure()) return;
  }
}

TEST(fast_rounding_engine, RandomPositionsCosSinLlama) {
  // 400 random positions below 2^24 (and 100 below 2^40), every pair, four dtypes (20 and 5 at the small
  // test scale).
  const EncodingSpec spec = load_preset("llama-3.1-8b");
  const RopeRoundingEngine eng(spec.rope, std::nullopt, std::int64_t{1} << 40);
  ScopedPrecision prec(kRefBits);
  const RopeFrequencies<Real> f = rope_frequencies<Real>(spec.rope);
  std::uint64_t s = 2026;
  RoundingStats st;
  const int n_positions = scaled(500, 25);
  for (int n = 0; n < n_positions; ++n) {
    const Position pos = Position::uniform(
        static_cast<std::int64_t>(splitmix64(s) % (n < n_positions * 4 / 5 ? (1ull << 24) : (1ull << 40))));
    const RopeOutputs got = run_engine(eng, pos, {}, 0, st);
    std::vector<Real> cr, sr;
    rope_cos_sin(spec.rope, f, pos, cr, sr);
    for (std::size_t d = 0; d < 4; ++d)
      for (std::size_t j = 0; j < cr.size(); ++j) {
        ASSERT_EQ(bits(got.cos[d][j]), bits(round_to_double(cr[j], kAllTypes[d]))) << pos.t << " pair " << j;
        ASSERT_EQ(bits(got.sin[d][j]), bits(round_to_double(sr[j], kAllTypes[d]))) << pos.t << " pair " << j;
      }
  }
  EXPECT_EQ(st.fast_values + st.fallback_values, n_positions * 64 * 2 * 4);
}

TEST(fast_rounding_engine, ForcedFallbackIsCorrect) {
  EngineOptions force;
  force.force_fallback = true;
  std::vector<Case> cs = {{"llama-3.1-8b", load_preset("llama-3.1-8b"), std::nullopt},
                          {"phi-3.5-mini seq 8192", load_preset("phi-3.5-mini"), 8192},
                          {"deepseek-v3", load_preset("deepseek-v3"), std::nullopt},
                          {"fairseq-transformer", load_preset("fairseq-transformer"), std::nullopt}};
  for (const Case& c : variant_cases())
    if (c.name == "x-proportional" || c.name == "x-yarn-mscale-differ" || c.name == "x-sin-negative-offset")
      cs.push_back(c);
  for (std::size_t i = 0; i < cs.size(); i += scaled<std::size_t>(1, 3)) {  // every third at the small test scale
    const Case& c = cs[i];
    SCOPED_TRACE(c.name);
    RoundingStats st;
    if (c.spec.family == Family::rope)
      compare_rope(c, force, &st);
    else
      compare_sinusoidal(c, force, &st);
    if (HasFatalFailure()) return;
    EXPECT_GT(st.fallback_values, 0);
  }
}

TEST(fast_rounding_engine, StatsCountEveryValue) {
  const EncodingSpec spec = load_preset("llama-3.1-8b");
  const RopeRoundingEngine eng(spec.rope, std::nullopt, 131071);
  const std::vector<double> x = test_vectors(spec.rope.head_dim, 3);
  RoundingStats st;
  (void)run_engine(eng, Position::uniform(1234), x, 2, st);
  EXPECT_EQ(st.fast_values + st.fallback_values, 4 * (2 * 64 + 2 * 128));
  // Only cos/sin requested, two dtypes
  std::vector<double> c(64), s(64);
  const std::array<DType, 2> types = {DType::bf16, DType::f16};
  const std::array<RoundedOut, 2> outs = {RoundedOut{c.data(), nullptr, nullptr},
                                          RoundedOut{nullptr, s.data(), nullptr}};
  RoundingStats st2;
  eng.evaluate(Position::uniform(5), {}, 0, types, outs, st2);
  EXPECT_EQ(st2.fast_values + st2.fallback_values, 128);
  EXPECT_THROW(eng.evaluate(Position::uniform(kMaxPosition + 1), {}, 0, types, outs, st2), std::invalid_argument);
}

TEST(fast_rounding_engine, TwoThreadsGiveIdenticalOutput) {
  const EncodingSpec spec = load_preset("phi-3.5-mini");
  const RopeRoundingEngine eng(spec.rope, 8192, 1 << 20);
  const std::vector<double> x = test_vectors(spec.rope.head_dim, 11);
  std::vector<Position> ps;
  std::uint64_t s = 12;
  for (int i = 0; i < 400; ++i) ps.push_back(Position::uniform(static_cast<std::int64_t>(splitmix64(s) % (1u << 20))));
  std::vector<RopeOutputs> single;
  RoundingStats st;
  for (const Position& p : ps) single.push_back(run_engine(eng, p, x, 2, st));
  std::vector<RopeOutputs> multi(ps.size());
  auto work = [&](std::size_t begin) {
    RoundingStats local;
    for (std::size_t i = begin; i < ps.size(); i += 2) multi[i] = run_engine(eng, ps[i], x, 2, local);
  };
  std::thread t0(work, 0), t1(work, 1);
  t0.join();
  t1.join();
  for (std::size_t i = 0; i < ps.size(); ++i)
    for (std::size_t d = 0; d < 4; ++d) {
      for (std::size_t j = 0; j < single[i].cos[d].size(); ++j) {
        ASSERT_EQ(bits(single[i].cos[d][j]), bits(multi[i].cos[d][j]));
        ASSERT_EQ(bits(single[i].sin[d][j]), bits(multi[i].sin[d][j]));
      }
      for (std::size_t j = 0; j < single[i].rot[d].size(); ++j)
        ASSERT_EQ(bits(single[i].rot[d][j]), bits(multi[i].rot[d][j]));
    }
}

TEST(fast_rounding_engine, ConstructorRestoresBoostPrecision) {
  ScopedPrecision prec(200);
  const unsigned before = current_precision_bits();
  const RopeRoundingEngine eng(load_preset("llama-3.1-8b").rope, std::nullopt, 1000);
  const SinusoidalRoundingEngine seng(load_preset("transformer-base").sinusoidal, 1000);
  EXPECT_EQ(current_precision_bits(), before);
}

}  // namespace
