// Rotation properties of RoPE: relative shift, the attention-logit view, norms, composition and
// inverse, the matrix view of the target.
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

// ---------------------------------------------------------------- relative shift
// Statement: <f(q,m), f(k,n)> = att^2 q_rot^T R(n-m) k_rot + q_pass^T k_pass (depends on n - m only),
// and shifting both positions by s changes nothing.
// Tolerance: each logit is compared with the exact value L* (MPFR: att <q, f*(k, n-m)> on the rotated
// block, plus the pass-through dot) within dot_tolerance(y, E^y, z, E^z); the shifted pair likewise;
// the two target logits against each other within the sum of both tolerances.
void prop_relative_shift(Ctx& ctx) {
  auto cs = RopeCase::open(ctx);
  if (!cs) return;
  const RopeSpec& r = cs->rope();
  const std::int64_t mx = cs->max_pos();
  const std::int64_t m = *gen::position(mx), n = *gen::position(mx);
  const std::int64_t s = *rc::gen::inRange<std::int64_t>(0, mx - std::max(m, n) + 1);
  const auto q = *gen::bf16_vector(r.head_dim);
  const auto k = *gen::bf16_vector(r.head_dim);
  std::vector<double> q2(q), k2(k);
  q2.insert(q2.end(), q.begin(), q.end());
  k2.insert(k2.end(), k.begin(), k.end());
  const auto y = cs->apply({Position::uniform(m), Position::uniform(m + s)}, 1, q2, Input::q);
  const auto z = cs->apply({Position::uniform(n), Position::uniform(n + s)}, 1, k2, Input::k);
  if (!y || !z) return ctx.skip();
  const RopeExact& e = cs->exact();
  const auto D = static_cast<std::size_t>(r.head_dim);
  double exact = 0;
  {
    ScopedPrecision prec(working_precision_bits(53, rope_max_abs_angle(r, std::nullopt, std::abs(n - m))));
    const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
    std::vector<Real> kr(k.begin(), k.end());
    const std::vector<Real> g = rope_apply<Real>(r, f, Position::uniform(n - m), kr);
    Real L = 0, Lp = 0;
    for (int c = 0; c < e.block; ++c) L += Real(q[static_cast<std::size_t>(c)]) * g[static_cast<std::size_t>(c)];
    for (int c = e.block; c < e.D; ++c) Lp += Real(q[static_cast<std::size_t>(c)]) * g[static_cast<std::size_t>(c)];
    exact = to_f64(f.attention_factor * L + Lp);
  }
  double tol[2], val[2];
  for (std::size_t i = 0; i < 2; ++i) {
    const std::int64_t sh = i == 0 ? 0 : s;
    const auto Ey = cs->element_bounds(Position::uniform(m + sh), q);
    const auto Ez = cs->element_bounds(Position::uniform(n + sh), k);
    val[i] = dot(row(*y, i, D), row(*z, i, D));
    tol[i] = dot_tolerance(row(*y, i, D), Ey, row(*z, i, D), Ez, exact);
  }
  const std::string where = cs->where() + "; q " + vec_brief(q) +
                            ", k " + vec_brief(k) + "; m " + std::to_string(m) + ", n " + std::to_string(n) + ", shift " +
                            std::to_string(s);
  cs->check(ratio(std::fabs(val[0] - exact), tol[0]),
            where + ": <f(q,m),f(k,n)> = " + num(val[0]) + ", exact q^T R(n-m) k = " + num(exact), std::max(m, n));
  cs->check(ratio(std::fabs(val[1] - exact), tol[1]),
            where + ": <f(q,m+s),f(k,n+s)> = " + num(val[1]) + ", exact " + num(exact), std::max(m, n) + s);
  cs->check(ratio(std::fabs(val[0] - val[1]), tol[0] + tol[1]),
            where + ": logit " + num(val[0]) + " changes to " + num(val[1]) + " under the shift", std::max(m, n) + s);
}

// ---------------------------------------------------------------- attention-logit view
// Statement: the score matrix S_ij = <f(q_i, p0 + i), f(k_j, p0 + j)> of an 8-token sequence does
// not change when every position is shifted by s (what AnchorAttention measures in bf16).
// Tolerance: entry by entry, dot_tolerance of the unshifted plus that of the shifted entry.
void prop_attention_shift(Ctx& ctx) {
  auto cs = RopeCase::open(ctx);
  if (!cs) return;
  const RopeSpec& r = cs->rope();
  constexpr int T = 8;
  const std::int64_t mx = cs->max_pos();
  const std::int64_t p0 = std::min(*gen::position(mx), mx - T);
  const std::int64_t s = std::min(*gen::position(mx), mx - T - p0);
  const auto D = static_cast<std::size_t>(r.head_dim);
  const auto Q = *gen::bf16_vector(T * r.head_dim);
  const auto K = *gen::bf16_vector(T * r.head_dim);
  std::vector<Position> pos, pos_s;
  for (int i = 0; i < T; ++i) {
    pos.push_back(Position::uniform(p0 + i));
    pos_s.push_back(Position::uniform(p0 + s + i));
  }
  const auto y = cs->apply(pos, 1, Q, Input::q), z = cs->apply(pos, 1, K, Input::k);
  const auto ys = cs->apply(pos_s, 1, Q, Input::q), zs = cs->apply(pos_s, 1, K, Input::k);
  if (!y || !z || !ys || !zs) return ctx.skip();
  std::vector<std::vector<double>> Ey, Ez, Eys, Ezs;
  for (std::size_t i = 0; i < T; ++i) {
    Ey.push_back(cs->element_bounds(pos[i], row(Q, i, D)));
    Ez.push_back(cs->element_bounds(pos[i], row(K, i, D)));
    Eys.push_back(cs->element_bounds(pos_s[i], row(Q, i, D)));
    Ezs.push_back(cs->element_bounds(pos_s[i], row(K, i, D)));
  }
  double worst = 0, wd = 0;
  std::size_t wi = 0, wj = 0;
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = 0; j < T; ++j) {
      const double S = dot(row(*y, i, D), row(*z, j, D)), Ss = dot(row(*ys, i, D), row(*zs, j, D));
      const double tol = dot_tolerance(row(*y, i, D), Ey[i], row(*z, j, D), Ez[j], 0) +
                         dot_tolerance(row(*ys, i, D), Eys[i], row(*zs, j, D), Ezs[j], 0);
      const double mg = ratio(std::fabs(S - Ss), tol);
      if (!(mg <= worst)) worst = mg, wi = i, wj = j, wd = S - Ss;
    }
  cs->check(worst,
            cs->where() + "; 8 tokens at " + std::to_string(p0) +
                "..; shift " + std::to_string(s) + ": score[" + std::to_string(wi) + "][" + std::to_string(wj) +
                "] changes by " + num(wd),
            p0 + s);
}

// ---------------------------------------------------------------- norms
// Statement: ||(y_a, y_b)|| = att ||(x_a, x_b)|| for every pair; pass-through channels unchanged.
// Tolerance: angle-free (ERROR_MODEL.md section 14): the output is att R(θ̂) x plus errors bounded by the
// class bound without its angle term E0, and a rotation by any θ̂ keeps the norm, so the pair's norm is
// off by at most E0_a + E0_b (triangle inequality); the check's own arithmetic (squares, sqrt, att) adds
// <= 4 u64 M. (pair_norm_margin, below; the same check as attention_factor.) Unlike the per-element
// bound it does not grow with the position: a norm 10% off is caught at 2^20 and beyond.
void prop_norm(Ctx& ctx) {
  auto cs = RopeCase::open(ctx);
  if (!cs) return;
  const RopeSpec& r = cs->rope();
  const std::int64_t m = *gen::position(cs->max_pos());
  const auto x = *gen::bf16_vector(r.head_dim);
  const auto y = cs->apply({Position::uniform(m)}, 1, x);
  if (!y) return ctx.skip();
  const auto [worst, what] = pair_norm_margin(ctx.target, r, x, *y);
  cs->check(worst, cs->where() + "; x " + vec_brief(x) + "; m " +
                       std::to_string(m) + ": " + what,
            m);
}

// ---------------------------------------------------------------- composition and inverse
// Statement: f(f(x, a), b) = att f(x, a + b) on the rotated block (R(a) R(b) = R(a + b)), the
// pass-through channels unchanged; with negative positions, f(f(x, a), -a) = att^2 x (R(-a) undoes R(a)).
// The second call's input v is the first output rounded to f32 (bf16 for table classes / 16-bit
// outputs): the target's input contract. Derivation: f*(v, b) = att R(b) v, v = att R(a) x + e_y + r
// (r the rounding, known exactly), so g - att h = e_g + att R(b)(e_y + r) - att e_h and per pair
//   ||.|| <= (E^g_a + E^g_b) + att (E^y_a + E^y_b + |r_a| + |r_b|) + att (E^h_a + E^h_b) + 2 u64 att |h|.
std::optional<std::pair<double, std::string>> composition_margin(RopeCase& cs, const std::vector<double>& x, std::int64_t a,
                                                                std::int64_t bpos, Input which) {
  const RopeSpec& r = cs.rope();
  const auto y = cs.apply({Position::uniform(a)}, 1, x, which);
  if (!y) return std::nullopt;
  std::vector<double> v(y->size()), rr(y->size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = to_input(cs.ctx().target, (*y)[i]), rr[i] = v[i] - (*y)[i];
  const auto g = cs.apply({Position::uniform(bpos)}, 1, v, which);
  const auto h = cs.apply({Position::uniform(a + bpos)}, 1, x, which);
  if (!g || !h) return std::nullopt;
  const RopeExact& e = cs.exact();
  const auto Ey = cs.element_bounds(Position::uniform(a), x);
  const auto Eg = cs.element_bounds(Position::uniform(bpos), v);
  const auto Eh = cs.element_bounds(Position::uniform(a + bpos), x);
  double worst = 0;
  std::string what;
  for (int j = 0; j < e.P; ++j) {
    const auto [ia, ib] = pair_channels(r, j);
    const auto p = static_cast<std::size_t>(ia), q = static_cast<std::size_t>(ib);
    const double d = std::hypot((*g)[p] - e.att * (*h)[p], (*g)[q] - e.att * (*h)[q]);
    const double tol = Eg[p] + Eg[q] + e.att * (Ey[p] + Ey[q] + std::fabs(rr[p]) + std::fabs(rr[q])) +
                       e.att * (Eh[p] + Eh[q]) + 4 * kU64 * e.att * (std::fabs((*h)[p]) + std::fabs((*h)[q]));
    const double mg = ratio(d, tol);
    if (!(mg <= worst)) worst = mg, what = "pair " + std::to_string(j) + " differs by " + num(d);
  }
  for (int c = e.block; c < e.D; ++c) {
    const auto cc = static_cast<std::size_t>(c);
    const double mg = ratio(std::fabs((*g)[cc] - (*h)[cc]), Eg[cc] + std::fabs(rr[cc]) + Ey[cc] + Eh[cc]);
    if (!(mg <= worst)) worst = mg, what = "pass-through channel " + std::to_string(c);
  }
  return std::make_pair(worst, what);
}

void composition_case(Ctx& ctx, bool inverse) {
  auto cs = RopeCase::open(ctx);
  if (!cs) return;
  const std::int64_t mx = cs->max_pos();
  const std::int64_t a = *gen::position(mx);
  const std::int64_t bpos = inverse ? -a : *rc::gen::inRange<std::int64_t>(0, mx - a + 1);
  const auto x = *gen::bf16_vector(cs->rope().head_dim);
  const auto m = composition_margin(*cs, x, a, bpos, Input::any);
  if (!m) return ctx.skip();
  cs->check(m->first,
            cs->where() + "; x " + vec_brief(x) + "; " +
                (inverse ? "f(f(x," + std::to_string(a) + ")," + std::to_string(bpos) + ") vs att^2 x"
                         : "f(f(x," + std::to_string(a) + ")," + std::to_string(bpos) + ") vs att f(x," +
                               std::to_string(a + bpos) + ")") +
                ": " + m->second,
            a + std::max<std::int64_t>(bpos, 0));
}
void prop_composition(Ctx& ctx) { composition_case(ctx, false); }
void prop_inverse(Ctx& ctx) {
  if (!ctx.target.info().negative_positions) return ctx.decline(), ctx.skip();  // a capability it lacks
  composition_case(ctx, true);
}

// ---------------------------------------------------------------- matrix view of the target
// Statement: the target's own matrix C(m) (columns f(e_i, m), rows of the rotated block divided by
// att) is orthogonal, det C = 1, and f(x, m) = C(m) x (the elementwise view equals the matrix view).
// Tolerance: column i has error vector bounded by Ê_i (the element bounds of input e_i, divided by
// att on the block): |(C^T C - I)_ij| <= ||Ê_i|| + ||Ê_j|| + ||Ê_i|| ||Ê_j|| + 2 (D + 2) u64 sum |C_ki C_kj|;
// det(R + E) = det(I + R^T E) with ||R^T E||_2 <= ||E||_F: |det C - 1| <= (1 + ||Ê||_F)^D - 1 + 16 D u64;
// |f(x)_k - (C x)_k| <= E^x_k + sum_i |x_i| E^C_ki s_k + 2 (D + 2) u64 sum_i |C_ki x_i| s_k (s_k = att or 1).
void prop_matrix_orthogonal(Ctx& ctx) {
  auto cs = RopeCase::open(ctx);
  if (!cs) return;
  const RopeSpec& r = cs->rope();
  const std::int64_t m = *gen::position(cs->max_pos());
  const int D = r.head_dim;
  const auto Du = static_cast<std::size_t>(D);
  std::vector<double> I(Du * Du, 0.0);
  for (std::size_t i = 0; i < Du; ++i) I[i * Du + i] = 1.0;
  const auto x = *gen::bf16_vector(D);
  const auto cols = cs->apply({Position::uniform(m)}, D, I);
  const auto y = cs->apply({Position::uniform(m)}, 1, x);
  if (!cols || !y) return ctx.skip();
  const RopeExact& e = cs->exact();
  Eigen::MatrixXd C(D, D), EC(D, D);
  std::vector<double> scale(Du);
  for (std::size_t k = 0; k < Du; ++k) scale[k] = static_cast<int>(k) < e.block ? e.att : 1.0;
  for (std::size_t i = 0; i < Du; ++i) {
    const auto Ei = cs->element_bounds(Position::uniform(m), row(I, i, Du));
    for (std::size_t k = 0; k < Du; ++k) {
      C(static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(i)) = (*cols)[i * Du + k] / scale[k];
      EC(static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(i)) = Ei[k] / scale[k];
    }
  }
  const std::string where = cs->where() + "; m " + std::to_string(m);
  // C^T C = I
  const Eigen::MatrixXd G = C.transpose() * C;
  const Eigen::MatrixXd Gabs = C.cwiseAbs().transpose() * C.cwiseAbs();
  Eigen::VectorXd en(D);
  for (Eigen::Index i = 0; i < D; ++i) en(i) = EC.col(i).norm();
  double worst = 0;
  std::string what;
  for (Eigen::Index i = 0; i < D; ++i)
    for (Eigen::Index j = 0; j < D; ++j) {
      const double tol = en(i) + en(j) + en(i) * en(j) + 2.0 * (D + 2) * kU64 * Gabs(i, j) + 4 * kU64;
      const double mg = ratio(std::fabs(G(i, j) - (i == j ? 1.0 : 0.0)), tol);
      if (!(mg <= worst)) worst = mg, what = "(C^T C)[" + std::to_string(i) + "][" + std::to_string(j) + "] = " + num(G(i, j));
    }
  cs->check(worst, where + ": " + what, m);
  // det C = 1
  const double ef = EC.norm();
  const double det = C.partialPivLu().determinant();
  const double det_tol = std::expm1(D * std::log1p(ef)) + 16.0 * D * kU64;
  cs->check(ratio(std::fabs(det - 1), det_tol), where + ": det C(m) = " + num(det), m);
  // f(x) = C x
  const auto Ex = cs->element_bounds(Position::uniform(m), x);
  worst = 0;
  for (std::size_t k = 0; k < Du; ++k) {
    double cx = 0, abs_sum = 0, et = 0;
    for (std::size_t i = 0; i < Du; ++i) {
      const double cki = C(static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(i));
      cx += cki * x[i];
      abs_sum += std::fabs(cki * x[i]);
      et += std::fabs(x[i]) * EC(static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(i));
    }
    const double tol = Ex[k] + scale[k] * (et + 2.0 * (D + 2) * kU64 * abs_sum);
    const double mg = ratio(std::fabs((*y)[k] - scale[k] * cx), tol);
    if (!(mg <= worst)) worst = mg, what = "channel " + std::to_string(k) + ": f(x) = " + num((*y)[k]) + ", C x = " + num(scale[k] * cx);
  }
  cs->check(worst, where + "; x " + vec_brief(x) + ": " + what, m);
}

}  // namespace ropecheck::props::detail
