// Sinusoidal properties: the shift map and the dot product of two rows.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <stdexcept>

#include <Eigen/Dense>
#include <rapidcheck.h>

#include "common.hpp"
#include "ropecheck/props/generators.hpp"
#include "ropecheck/reference/matrix_view.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"

namespace ropecheck::props::detail {

// ---------------------------------------------------------------- sinusoidal shift map
// Statement: PE(t + k) = A_k PE(t) with the exact A_k (independent of t: two different t), and the
// target's rows have (sin, cos) pairs of length 1 (what A_k's orthogonality asks of them).
// Tolerance: (A_k PE(t))_c is a 2-term combination with coefficients |cos|, |sin| <= 1:
// |PE(t+k)_c - (A_k PE(t))_c| <= E_c(t+k) + sum_i |A_ci| E_i(t) + 4 u64 sum_i |A_ci PE_i(t)|
// (A_k's entries are rounded once to binary64).
void prop_sinusoidal_shift(Ctx& ctx) {
  const auto spec = sinusoidal_spec_for(ctx, true);
  if (!spec) return ctx.skip();
  const SinusoidalSpec& s = spec->sinusoidal;
  const SinExact e = sin_exact(s);
  if (!sine_cosine_paired(e)) return ctx.skip();  // odd Vaswani width: no t-independent map exists
  const std::int64_t mx = max_pos(ctx);
  const std::int64_t t1 = *gen::position(mx), t2 = *gen::position(mx);
  const std::int64_t k = *rc::gen::inRange<std::int64_t>(0, mx - std::max(t1, t2) + 1);
  const auto pe = call_sin(ctx, *spec, {t1, t1 + k, t2, t2 + k});
  if (!pe) return ctx.skip();
  // A_k (reference/matrix_view.hpp, sinusoidal_shift_map) built from its exact entries cos(k w_i),
  // sin(k w_i), each rounded once to binary64.
  Eigen::MatrixXd A = Eigen::MatrixXd::Zero(e.d, e.d);
  {
    ScopedPrecision prec(working_precision_bits(53, sinusoidal_max_abs_angle(s, k)));
    const std::vector<Real> w = sinusoidal_frequencies<Real>(s);
    std::vector<int> sc(w.size(), -1), cc(w.size(), -1);
    for (int c = 0; c < e.d; ++c) {
      const SinusoidalColumn& col = e.cols[static_cast<std::size_t>(c)];
      if (col.kind == SinusoidalKind::zero) A(c, c) = 1;
      if (col.kind == SinusoidalKind::sine) sc[static_cast<std::size_t>(col.frequency)] = c;
      if (col.kind == SinusoidalKind::cosine) cc[static_cast<std::size_t>(col.frequency)] = c;
    }
    const Real kk = from_int<Real>(k);
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double ck = to_f64(cos(kk * w[i])), sk = to_f64(sin(kk * w[i]));
      A(sc[i], sc[i]) = ck;
      A(sc[i], cc[i]) = sk;
      A(cc[i], cc[i]) = ck;
      A(cc[i], sc[i]) = -sk;
    }
  }
  const Bounds b = bounds_of(ctx.target);
  const auto d = static_cast<std::size_t>(e.d);
  const std::string where = describe_spec(*spec) + "; d_model " + std::to_string(e.d) + "; k " + std::to_string(k);
  for (std::size_t pass = 0; pass < 2; ++pass) {
    const std::int64_t t = pass == 0 ? t1 : t2;
    const auto Et = sin_bounds(b, s, e, t), Etk = sin_bounds(b, s, e, t + k);
    const auto pt = row(*pe, 2 * pass, d), ptk = row(*pe, 2 * pass + 1, d);
    double worst = 0;
    std::string what;
    for (std::size_t c = 0; c < d; ++c) {
      double v = 0, et = 0, abs_sum = 0;
      for (std::size_t i = 0; i < d; ++i) {
        const double aci = A(static_cast<Eigen::Index>(c), static_cast<Eigen::Index>(i));
        v += aci * pt[i];
        et += std::fabs(aci) * Et[i];
        abs_sum += std::fabs(aci * pt[i]);
      }
      const double mg = ratio(std::fabs(ptk[c] - v), Etk[c] + et + 4 * kU64 * abs_sum);
      if (!(mg <= worst)) worst = mg, what = "column " + std::to_string(c) + ": PE(t+k) = " + num(ptk[c]) + ", A_k PE(t) = " + num(v);
    }
    ctx.check(worst, where + "; t " + std::to_string(t) + ": " + what, t + k, *spec);
  }
  // A_k is orthogonal, so the map preserves each (sin, cos) pair's length; what that requires of the
  // target is that every such pair of its rows has length 1. (A check of A_k^T A_k = I itself would test
  // this function's own MPFR matrix, never the target: audit-2 L1.) Tolerance: the pair's error vector
  // has 2-norm <= E_sin + E_cos; the check's squares and sqrt add 4 u64.
  double worst_len = 0;
  std::string what_len;
  std::int64_t len_pos = t1;
  for (std::size_t r = 0; r < 4; ++r) {
    const std::int64_t t = r == 0 ? t1 : (r == 1 ? t1 + k : (r == 2 ? t2 : t2 + k));
    const auto Et = sin_bounds(b, s, e, t);
    const auto pr = row(*pe, r, d);
    std::vector<int> sc(e.w.size(), -1), cc(e.w.size(), -1);
    for (int c = 0; c < e.d; ++c) {
      const SinusoidalColumn& col = e.cols[static_cast<std::size_t>(c)];
      if (col.kind == SinusoidalKind::sine) sc[static_cast<std::size_t>(col.frequency)] = c;
      if (col.kind == SinusoidalKind::cosine) cc[static_cast<std::size_t>(col.frequency)] = c;
    }
    for (std::size_t i = 0; i < e.w.size(); ++i) {
      const auto a = static_cast<std::size_t>(sc[i]), c = static_cast<std::size_t>(cc[i]);
      const double mg = ratio(std::fabs(std::hypot(pr[a], pr[c]) - 1.0), Et[a] + Et[c] + 4 * kU64);
      if (!(mg <= worst_len))
        worst_len = mg, len_pos = t,
        what_len = "t " + std::to_string(t) + ", frequency " + std::to_string(i) + ": |(sin, cos)| = " + num(std::hypot(pr[a], pr[c]));
    }
  }
  ctx.check(worst_len, where + ": a (sin, cos) pair of the target's rows is not of length 1 (A_k orthogonal): " + what_len,
            len_pos, *spec);
}

// ---------------------------------------------------------------- sinusoidal dot product
// Statement: PE(t).PE(t+k) = C(k) = sum_i cos(k w_i): independent of t (two t), even in k
// (PE(t).PE(t-k)), and C(0) = d/2 (the number of frequencies).
// Tolerance: dot_tolerance of the two rows (table bounds E, M = 1) + 2 u64 |C(k)|.
void prop_sinusoidal_dot(Ctx& ctx) {
  const auto spec = sinusoidal_spec_for(ctx, true);
  if (!spec) return ctx.skip();
  const SinusoidalSpec& s = spec->sinusoidal;
  const SinExact e = sin_exact(s);
  if (!sine_cosine_paired(e)) return ctx.skip();
  const std::int64_t mx = max_pos(ctx);
  const std::int64_t t1 = *gen::position(mx), t2 = *gen::position(mx);
  const std::int64_t k = *rc::gen::inRange<std::int64_t>(0, mx - std::max(t1, t2) + 1);
  std::vector<std::int64_t> ts = {t1, t1 + k, t2, t2 + k};
  const bool back = t1 >= k;
  if (back) ts.push_back(t1 - k);
  const auto pe = call_sin(ctx, *spec, ts);
  if (!pe) return ctx.skip();
  double Ck = 0;
  {
    ScopedPrecision prec(working_precision_bits(53, sinusoidal_max_abs_angle(s, k)));
    Real sum = 0;
    for (const Real& w : sinusoidal_frequencies<Real>(s)) sum += cos(Real(static_cast<long long>(k)) * w);
    Ck = to_f64(sum);
  }
  const double C0 = static_cast<double>(e.w.size());
  const Bounds b = bounds_of(ctx.target);
  const auto d = static_cast<std::size_t>(e.d);
  const std::string where = describe_spec(*spec) + "; d_model " + std::to_string(e.d) + "; k " + std::to_string(k);
  auto one = [&](std::size_t i, std::size_t j, double exact, const std::string& label) {
    const auto Ei = sin_bounds(b, s, e, ts[i]), Ej = sin_bounds(b, s, e, ts[j]);
    const double v = dot(row(*pe, i, d), row(*pe, j, d));
    ctx.check(ratio(std::fabs(v - exact), dot_tolerance(row(*pe, i, d), Ei, row(*pe, j, d), Ej, exact)),
              where + ": " + label + " = " + num(v) + ", exact " + num(exact), std::max(ts[i], ts[j]), *spec);
  };
  one(0, 1, Ck, "PE(" + std::to_string(t1) + ").PE(t+k)");
  one(2, 3, Ck, "PE(" + std::to_string(t2) + ").PE(t+k)");
  one(0, 0, C0, "PE(t).PE(t)");
  if (back) one(0, 4, Ck, "PE(" + std::to_string(t1) + ").PE(t-k)");
}

}  // namespace ropecheck::props::detail
