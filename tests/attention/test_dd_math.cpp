// The fast path's double-double exp, expm1, tanh and division against MPFR at 320 bits: every error
// within its proven bound (the worst ratio printed; the analyses leave a margin, so it stays well
// below 1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>

#include "ropecheck/attention/dd_math.hpp"
#include "ropecheck/reference/mpfr_value.hpp"

namespace ropecheck::attention::detail {
namespace {

// A normalized DD near `hi` with a random low part.
DD random_dd(double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  return dd::two_sum(hi, hi * 0x1p-53 * u(rng));
}

// |exact - (v.hi + v.lo)| for the exact value held in e.
double error_of(mpfr_srcptr e, DD v) {
  MpfrValue d(320);
  mpfr_sub_d(d.get(), e, v.hi, MPFR_RNDN);
  mpfr_sub_d(d.get(), d.get(), v.lo, MPFR_RNDN);
  return std::fabs(mpfr_get_d(d.get(), MPFR_RNDN));
}

void set_dd(MpfrValue& m, DD x) {
  mpfr_set_d(m.get(), x.hi, MPFR_RNDN);
  mpfr_add_d(m.get(), m.get(), x.lo, MPFR_RNDN);  // exact at 320 bits
}

// Samples x = s * 2^e with e uniform in [lo_exp, hi_exp], both signs; returns the worst error / bound.
double worst_ratio(int lo_exp, int hi_exp, double max_abs, std::uint64_t seed,
                   const std::function<double(DD, MpfrValue&, DD&)>& eval) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> m(1.0, 2.0);
  std::uniform_int_distribution<int> e(lo_exp, hi_exp);
  double worst = 0;
  for (int i = 0; i < 20000; ++i) {
    double hi = std::ldexp(m(rng), e(rng)) * (i % 2 ? -1.0 : 1.0);
    if (std::fabs(hi) > max_abs) hi = std::copysign(max_abs, hi);
    const DD x = random_dd(hi, rng);
    MpfrValue exact(320);
    DD out;
    const double bound = eval(x, exact, out);
    if (bound < 0) continue;  // outside the function's range
    const double err = error_of(exact.get(), out);
    EXPECT_LE(err, bound) << "x = " << x.hi << " + " << x.lo;
    worst = std::max(worst, err / bound);
  }
  return worst;
}

TEST(DDMath, ExpWithinItsBound) {
  const double w = worst_ratio(-60, 10, 700.0, 1, [](DD x, MpfrValue& exact, DD& out) {
    if (!exp_dd(x, out)) return -1.0;
    set_dd(exact, x);
    mpfr_exp(exact.get(), exact.get(), MPFR_RNDN);
    return kExpRel * std::fabs(out.hi) + 0x1p-1070;
  });
  std::printf("exp_dd (seed 1): worst error / bound %.3g\n", w);
  EXPECT_GT(w, 0.0);
  DD out;
  EXPECT_FALSE(exp_dd({-700.0, 0.0}, out));
  EXPECT_FALSE(exp_dd({710.0, 0.0}, out));
  ASSERT_TRUE(exp_dd({0.0, 0.0}, out));
  EXPECT_EQ(out.hi, 1.0);
}

TEST(DDMath, Expm1WithinItsBound) {
  const double w = worst_ratio(-1000, 9, 700.0, 2, [](DD x, MpfrValue& exact, DD& out) {
    if (!expm1_dd(x, out)) return -1.0;
    set_dd(exact, x);
    mpfr_expm1(exact.get(), exact.get(), MPFR_RNDN);
    return kExpm1Rel * std::fabs(out.hi) * (1 + 0x1p-50);
  });
  std::printf("expm1_dd (seed 2): worst error / bound %.3g\n", w);
}

TEST(DDMath, TanhWithinItsBound) {
  const double w = worst_ratio(-1000, 7, 1e300, 3, [](DD x, MpfrValue& exact, DD& out) {
    const double err = tanh_dd(x, out);
    set_dd(exact, x);
    mpfr_tanh(exact.get(), exact.get(), MPFR_RNDN);
    return err == 0 ? 0x1p-1074 : err;
  });
  std::printf("tanh_dd (seed 3): worst error / bound %.3g\n", w);
  DD out;
  EXPECT_EQ(tanh_dd({0.0, 0.0}, out), 0.0);
  EXPECT_EQ(out.hi, 0.0);
}

TEST(DDMath, DivisionWithinItsBound) {
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<double> m(1.0, 2.0);
  std::uniform_int_distribution<int> e(-300, 300);
  double worst = 0;
  for (int i = 0; i < 20000; ++i) {
    const DD x = random_dd(std::ldexp(m(rng), e(rng)) * (i % 2 ? -1 : 1), rng);
    const DD y = random_dd(std::ldexp(m(rng), e(rng)) * (i % 3 ? -1 : 1), rng);
    const DD q = div(x, y);
    MpfrValue a(320), b(320);
    set_dd(a, x);
    set_dd(b, y);
    mpfr_div(a.get(), a.get(), b.get(), MPFR_RNDN);
    const double bound = kDivRel * std::fabs(q.hi) * (1 + 0x1p-50);
    const double err = error_of(a.get(), q);
    EXPECT_LE(err, bound);
    worst = std::max(worst, err / bound);
  }
  std::printf("div (seed 4): worst error / bound %.3g\n", worst);
}

}  // namespace
}  // namespace ropecheck::attention::detail
