// Midpoint-radius ("ball") arithmetic over the raw MPFR C API: the certified fallback's numbers.
//
// A Ball stands for every real within r of its centre c: c is an MPFR value of the working precision w,
// rounded to nearest by each operation; r is a 53-bit MPFR value only ever rounded upward, so that it
// stays an upper bound. Each operation adds to r what it propagates from its operands' radii (through
// the operation's Lipschitz bound on the ball) and, when MPFR reports the result inexact (ternary value
// != 0), the rounding's own error, at most ulp(c)/2 <= 2^(EXP(c) - w). r == 0 means c is exact (every
// operation exact, MPFR's ternary says so), which is how exact values (a logit at distance 0, a
// probability of 1, a mean of dyadic values) reach their exact rounding, ties included. Radii never
// underflow (MPFR's exponent range), unlike a double's. Thread-safe: explicit precisions only.
#pragma once

#include <mpfr.h>

#include "ropecheck/core/dtype.hpp"
#include "ropecheck/reference/mpfr_value.hpp"

namespace ropecheck::attention::detail {

class Ball {
 public:
  explicit Ball(mpfr_prec_t w) : c_(w), r_(53) {
    mpfr_set_zero(c_.get(), 1);
    mpfr_set_zero(r_.get(), 1);
  }
  Ball(const Ball&) = delete;
  Ball& operator=(const Ball&) = delete;

  mpfr_ptr c() { return c_.get(); }
  mpfr_srcptr c() const { return c_.get(); }
  mpfr_ptr r() { return r_.get(); }
  mpfr_srcptr r() const { return r_.get(); }
  mpfr_prec_t precision() const { return mpfr_get_prec(c_.get()); }
  bool exact() const { return mpfr_zero_p(r_.get()) != 0; }

 private:
  MpfrValue c_, r_;
};

// Each out = f(x, y) below may alias neither operand.
void ball_set_d(Ball& out, double x);                  // exact
void ball_set(Ball& out, const Ball& x);               // copy (exact at out's precision or rounded)
// A stored value v known to within 2^-guard_bits |v| of the exact one (exact: r = 0).
void ball_set_stored(Ball& out, mpfr_srcptr v, bool exact, long guard_bits);
void ball_add(Ball& out, const Ball& x, const Ball& y);
void ball_sub(Ball& out, const Ball& x, const Ball& y);
void ball_mul(Ball& out, const Ball& x, const Ball& y);
void ball_mul_d(Ball& out, const Ball& x, double d);   // d exact
void ball_div_d(Ball& out, const Ball& x, double d);   // d exact, != 0
// out = x / y; false when the ball y contains 0.
bool ball_div(Ball& out, const Ball& x, const Ball& y);
// sin and cos (1-Lipschitz).
void ball_sin_cos(Ball& s, Ball& c, const Ball& x);
void ball_tanh(Ball& out, const Ball& x);  // 1-Lipschitz
// e^x: the radius grows by e^(c + r) (e^r - 1) >= |e^(c+t) - e^c| for |t| <= r.
void ball_exp(Ball& out, const Ball& x);
// 1 / sqrt(d) for an exact d > 0.
void ball_rec_sqrt_d(Ball& out, double d);

// The correct rounding of the ball's value to format t when it is decided: both ends of [c - r, c + r] round alike (bitwise, so a ball around 0 is never
// decided unless exact). An exact 0 gives +0. false when undecided.
bool ball_round(const Ball& x, DType t, double& result);

}  // namespace ropecheck::attention::detail
