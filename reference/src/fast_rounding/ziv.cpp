// The MPFR fallback of the fast correct-rounding path (Ziv's loop): raise the working precision
// until an error interval rounds to one value. See fast_rounding.hpp for the overview.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fast_rounding_internal.hpp"
#include "ropecheck/reference/fast_rounding.hpp"
#include "ropecheck/reference/rounding.hpp"

namespace ropecheck::fast_rounding_detail {
namespace {

ROPECHECK_INLINE bool same_bits(double a, double b) {
  return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

// An error bound 2^e, or exactly zero.
struct Err2 {
  bool zero = true;
  long e = 0;
};
Err2 err_add(Err2 x, Err2 y) {
  if (x.zero) return y;
  if (y.zero) return x;
  return {false, std::max(x.e, y.e) + 1};
}
Err2 err_scale(Err2 x, long k) { return x.zero ? x : Err2{false, x.e + k}; }
Err2 err_pow(long e) { return {false, e}; }
// Rounding error of a w-bit RN result y: <= ulp(y)/2 = 2^(EXP(y) - w - 1) <= 2^(EXP(y) - w);
// zero when the operation was exact (ternary value 0).
Err2 err_round(mpfr_srcptr y, int ternary, mpfr_prec_t w) {
  if (ternary == 0) return {};
  return err_pow(static_cast<long>(mpfr_get_exp(y)) - static_cast<long>(w));
}
// k with |d| < 2^k (d a nonzero finite double).
long exp_of_double(double d) {
  int e = 0;
  (void)std::frexp(d, &e);
  return e;
}

}  // namespace

// Resolves results[i] for every i with need[i] != 0, for the value cos(theta), sin(theta) or
// att * (u cos(theta) + v sin(theta)), theta = p * inv. At precision w every operation is one
// correctly rounded MPFR call; the bound is propagated as a power of two (sin, cos are
// 1-Lipschitz; products scale by 2^EXP of the other factor). The interval [y - 2^e, y + 2^e] is
// widened outward (RNDD / RNDU) and both ends rounded with round_to_double: equal results
// (bitwise, so +0 and -0 differ) prove the rounding, since rounding is monotonic. Returns how
// many values it resolved.
int ziv_round(const ZivInputs& in, ZivQuantity q, double u, double v, std::span<const DType> types, double* results,
              unsigned char* need) {
  int todo = 0;
  for (std::size_t i = 0; i < types.size(); ++i) todo += need[i] ? 1 : 0;
  const int resolved_total = todo;
  if (todo == 0) return 0;

  const bool inv_zero = mpfr_zero_p(in.inv) != 0;
  long theta_exp = 0;
  if (in.p != 0.0 && !inv_zero) theta_exp = exp_of_double(in.p) + static_cast<long>(mpfr_get_exp(in.inv));
  constexpr mpfr_prec_t kMaxW = RopeRoundingEngine::kZivMaxBits;
  mpfr_prec_t w = std::min<mpfr_prec_t>(160 + std::max(0L, theta_exp), kMaxW);
  MpfrValue P(64);
  mpfr_set_d(P.get(), in.p, MPFR_RNDN);  // exact: an integer below 2^64

  for (;; w = std::min<mpfr_prec_t>(2 * w, kMaxW)) {
    MpfrValue th(w), s(w), c(w);
    const int t_th = mpfr_mul(th.get(), P.get(), in.inv, MPFR_RNDN);
    Err2 e_th = err_round(th.get(), t_th, w);
    if (!inv_zero && !mpfr_zero_p(th.get()))  // stored inverse frequency: |theta| 2^-guard <= 2^(EXP+1-guard)
      e_th = err_add(e_th, err_pow(static_cast<long>(mpfr_get_exp(th.get())) + 1 - in.guard_bits));
    const int t_sc = mpfr_sin_cos(s.get(), c.get(), th.get(), MPFR_RNDN);  // returns s + 4c, 0 = exact
    const Err2 e_s = err_add(e_th, err_round(s.get(), t_sc & 3, w));
    const Err2 e_c = err_add(e_th, err_round(c.get(), t_sc >> 2, w));

    MpfrValue y(w);
    Err2 e_y;
    if (q == ZivQuantity::cos) {
      mpfr_set(y.get(), c.get(), MPFR_RNDN);
      e_y = e_c;
    } else if (q == ZivQuantity::sin) {
      mpfr_set(y.get(), s.get(), MPFR_RNDN);
      e_y = e_s;
    } else {
      MpfrValue m1(w), m2(w), xs(w);
      const int t1 = mpfr_mul_d(m1.get(), c.get(), u, MPFR_RNDN);
      const int t2 = mpfr_mul_d(m2.get(), s.get(), v, MPFR_RNDN);
      Err2 e1 = err_round(m1.get(), t1, w), e2 = err_round(m2.get(), t2, w);
      if (u != 0.0) e1 = err_add(e1, err_scale(e_c, exp_of_double(u)));
      if (v != 0.0) e2 = err_add(e2, err_scale(e_s, exp_of_double(v)));
      const int tx = mpfr_add(xs.get(), m1.get(), m2.get(), MPFR_RNDN);
      const Err2 e_x = err_add(err_add(e1, e2), err_round(xs.get(), tx, w));
      if (mpfr_cmp_ui(in.att, 1) == 0 && in.att_exact) {
        mpfr_set(y.get(), xs.get(), MPFR_RNDN);
        e_y = e_x;
      } else {
        const int ty = mpfr_mul(y.get(), in.att, xs.get(), MPFR_RNDN);
        const long att_exp = static_cast<long>(mpfr_get_exp(in.att));
        e_y = err_add(err_scale(e_x, att_exp), err_round(y.get(), ty, w));
        if (!in.att_exact) {
          // |att_true - att| |x_true| with |x_true| <= |xs| + e_x < 2^(max(EXP(xs), e_x) + 1).
          long x_exp = mpfr_zero_p(xs.get()) ? LONG_MIN / 4 : static_cast<long>(mpfr_get_exp(xs.get()));
          if (!e_x.zero) x_exp = std::max(x_exp, e_x.e);
          if (!(mpfr_zero_p(xs.get()) && e_x.zero)) e_y = err_add(e_y, err_pow(att_exp + x_exp + 1 - in.guard_bits));
        }
      }
    }

    if (e_y.zero) {
      for (std::size_t i = 0; i < types.size(); ++i)
        if (need[i]) {
          results[i] = round_to_double(y.get(), types[i]);
          need[i] = 0;
        }
      return resolved_total;
    }
    MpfrValue eps(8), lo(w + 8), hi(w + 8);
    mpfr_set_ui_2exp(eps.get(), 1, static_cast<mpfr_exp_t>(e_y.e), MPFR_RNDN);
    mpfr_sub(lo.get(), y.get(), eps.get(), MPFR_RNDD);
    mpfr_add(hi.get(), y.get(), eps.get(), MPFR_RNDU);
    for (std::size_t i = 0; i < types.size(); ++i) {
      if (!need[i]) continue;
      const double rl = round_to_double(lo.get(), types[i]);
      const double rh = round_to_double(hi.get(), types[i]);
      if (same_bits(rl, rh)) {
        results[i] = rl;
        need[i] = 0;
        --todo;
      }
    }
    if (todo == 0) return resolved_total;
    if (w >= kMaxW)
      throw std::runtime_error("ropecheck: correct rounding not settled at " + std::to_string(kMaxW) +
                               " bits (an exact midpoint?); please report this value");
  }
}

}  // namespace ropecheck::fast_rounding_detail
