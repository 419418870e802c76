#include "ball.hpp"

#include "ropecheck/reference/rounding.hpp"

namespace ropecheck::attention::detail {
namespace {

// r += 2^(EXP(c) - w) >= ulp(c) / 2 when the operation that produced c was inexact.
void add_rounding(Ball& b, int ternary) {
  if (ternary == 0 || mpfr_zero_p(b.c())) return;
  MpfrValue e(8);
  mpfr_set_ui_2exp(e.get(), 1, mpfr_get_exp(b.c()) - b.precision(), MPFR_RNDU);
  mpfr_add(b.r(), b.r(), e.get(), MPFR_RNDU);
}

// An upper bound of |v| with 53 bits.
void abs_up(MpfrValue& out, mpfr_srcptr v) { mpfr_abs(out.get(), v, MPFR_RNDU); }

}  // namespace

void ball_set_d(Ball& out, double x) {
  const int t = mpfr_set_d(out.c(), x, MPFR_RNDN);
  mpfr_set_zero(out.r(), 1);
  add_rounding(out, t);  // exact for w >= 53
}

void ball_set(Ball& out, const Ball& x) {
  const int t = mpfr_set(out.c(), x.c(), MPFR_RNDN);
  mpfr_set(out.r(), x.r(), MPFR_RNDU);
  add_rounding(out, t);
}

void ball_set_stored(Ball& out, mpfr_srcptr v, bool exact, long guard_bits) {
  const int t = mpfr_set(out.c(), v, MPFR_RNDN);
  if (exact) {
    mpfr_set_zero(out.r(), 1);
  } else {
    mpfr_abs(out.r(), v, MPFR_RNDU);
    mpfr_div_2si(out.r(), out.r(), guard_bits, MPFR_RNDU);
  }
  add_rounding(out, t);
}

void ball_add(Ball& out, const Ball& x, const Ball& y) {
  const int t = mpfr_add(out.c(), x.c(), y.c(), MPFR_RNDN);
  mpfr_add(out.r(), x.r(), y.r(), MPFR_RNDU);
  add_rounding(out, t);
}

void ball_sub(Ball& out, const Ball& x, const Ball& y) {
  const int t = mpfr_sub(out.c(), x.c(), y.c(), MPFR_RNDN);
  mpfr_add(out.r(), x.r(), y.r(), MPFR_RNDU);
  add_rounding(out, t);
}

// |x' y' - x y| <= |x| ry + |y| rx + rx ry.
void ball_mul(Ball& out, const Ball& x, const Ball& y) {
  const int t = mpfr_mul(out.c(), x.c(), y.c(), MPFR_RNDN);
  MpfrValue ax(53), ay(53), p(53);
  abs_up(ax, x.c());
  abs_up(ay, y.c());
  mpfr_mul(out.r(), ax.get(), y.r(), MPFR_RNDU);
  mpfr_mul(p.get(), ay.get(), x.r(), MPFR_RNDU);
  mpfr_add(out.r(), out.r(), p.get(), MPFR_RNDU);
  mpfr_mul(p.get(), x.r(), y.r(), MPFR_RNDU);
  mpfr_add(out.r(), out.r(), p.get(), MPFR_RNDU);
  add_rounding(out, t);
}

void ball_mul_d(Ball& out, const Ball& x, double d) {
  const int t = mpfr_mul_d(out.c(), x.c(), d, MPFR_RNDN);
  mpfr_mul_d(out.r(), x.r(), std::abs(d), MPFR_RNDU);
  add_rounding(out, t);
}

void ball_div_d(Ball& out, const Ball& x, double d) {
  const int t = mpfr_div_d(out.c(), x.c(), d, MPFR_RNDN);
  mpfr_div_d(out.r(), x.r(), std::abs(d), MPFR_RNDU);
  add_rounding(out, t);
}

// |x'/y' - xc/yc| <= (rx + |xc/yc| ry) / (|yc| - ry), with |xc/yc| <= 2^EXP(c) (c its rounding).
bool ball_div(Ball& out, const Ball& x, const Ball& y) {
  MpfrValue den(53), q(53), p(53);
  mpfr_abs(den.get(), y.c(), MPFR_RNDD);
  mpfr_sub(den.get(), den.get(), y.r(), MPFR_RNDD);
  if (mpfr_sgn(den.get()) <= 0) return false;
  const int t = mpfr_div(out.c(), x.c(), y.c(), MPFR_RNDN);
  if (mpfr_zero_p(out.c()))
    mpfr_set_zero(q.get(), 1);
  else
    mpfr_set_ui_2exp(q.get(), 1, mpfr_get_exp(out.c()), MPFR_RNDU);
  mpfr_mul(p.get(), q.get(), y.r(), MPFR_RNDU);
  mpfr_add(p.get(), p.get(), x.r(), MPFR_RNDU);
  mpfr_div(out.r(), p.get(), den.get(), MPFR_RNDU);
  add_rounding(out, t);
  return true;
}

void ball_sin_cos(Ball& s, Ball& c, const Ball& x) {
  const int t = mpfr_sin_cos(s.c(), c.c(), x.c(), MPFR_RNDN);  // s + 4c; 0 = both exact
  mpfr_set(s.r(), x.r(), MPFR_RNDU);
  mpfr_set(c.r(), x.r(), MPFR_RNDU);
  add_rounding(s, t & 3);
  add_rounding(c, t >> 2);
}

void ball_tanh(Ball& out, const Ball& x) {
  const int t = mpfr_tanh(out.c(), x.c(), MPFR_RNDN);
  mpfr_set(out.r(), x.r(), MPFR_RNDU);
  add_rounding(out, t);
}

// |e^(c+t) - e^c| = e^c |e^t - 1| <= e^c (e^r - 1) for |t| <= r.
void ball_exp(Ball& out, const Ball& x) {
  const int t = mpfr_exp(out.c(), x.c(), MPFR_RNDN);
  if (x.exact()) {
    mpfr_set_zero(out.r(), 1);
  } else {
    MpfrValue e(53), m(53);
    mpfr_exp(e.get(), x.c(), MPFR_RNDU);
    mpfr_expm1(m.get(), x.r(), MPFR_RNDU);
    mpfr_mul(out.r(), e.get(), m.get(), MPFR_RNDU);
  }
  add_rounding(out, t);
}

void ball_rec_sqrt_d(Ball& out, double d) {
  MpfrValue v(64);
  mpfr_set_d(v.get(), d, MPFR_RNDN);
  const int t = mpfr_rec_sqrt(out.c(), v.get(), MPFR_RNDN);
  mpfr_set_zero(out.r(), 1);
  add_rounding(out, t);
}

bool ball_round(const Ball& x, DType t, double& result) {
  if (x.exact()) {
    result = mpfr_zero_p(x.c()) ? 0.0 : round_to_double(x.c(), t);
    return true;
  }
  const mpfr_prec_t w = x.precision() + 64;
  MpfrValue lo(w), hi(w);
  mpfr_sub(lo.get(), x.c(), x.r(), MPFR_RNDD);
  mpfr_add(hi.get(), x.c(), x.r(), MPFR_RNDU);
  const double a = round_to_double(lo.get(), t), b = round_to_double(hi.get(), t);
  if (std::signbit(a) != std::signbit(b) || !(a == b)) return false;
  result = a;
  return true;
}

}  // namespace ropecheck::attention::detail
