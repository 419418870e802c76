// Score-level properties of RoPE, run on the target's own outputs: the scores s = σ <Q̂_m, K̂_n> of its
// rotated q (input "q") and k (input "k"), shift invariance of those scores at long shifts, the RoFormer
// decay bound on the exact scores and on the target's, and cached keys rotated again.
//
// The target's score is computed here from its output values by a compensated dot product, so the only
// error beyond the target's is this file's own, bounded below (own_error). Its class allows the score
// the propagated bound of ERROR_MODEL.md section 16.3 (accuracy::score_bound's `propagated`: the
// rotations' per-element class bounds through the dot product with the exact condition numbers), not
// the attention arithmetic of a score class (the dot product here is not the target's). A score whose
// bound reaches its magnitude σ Σ |Q_c| |K_c| is saturated: the case counts as not tested.
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>

#include <rapidcheck.h>

#include "common.hpp"
#include "ropecheck/accuracy/attention_bounds.hpp"
#include "ropecheck/attention/exact.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/props/generators.hpp"
#include "ropecheck/reference/double_double.hpp"
#include "ropecheck/reference/scalar.hpp"

namespace ropecheck::props::detail {
namespace {

// The softmax scale every score here uses: 1 / sqrt(head_dim) rounded to binary64 and then taken as
// exact (attention::AttentionSpec::scale), so the exact scores and the target's carry the same σ.
double score_scale(const RopeSpec& r) { return 1.0 / std::sqrt(static_cast<double>(r.head_dim)); }

// σ <y, z> by Dot2 (Ogita, Rump and Oishi 2005, Algorithm 5.3, in reference/double_double.hpp's
// contraction-safe steps): the products exactly (2Prod), their sum in double-double (AccurateDWPlusDW:
// relative error <= 3 u^2 of each partial sum), rounded once to binary64 and multiplied by σ once.
// own_error below bounds the difference from σ <y, z> in exact arithmetic.
double compensated_score(std::span<const double> y, std::span<const double> z, double sigma) {
  DD acc{};
  for (std::size_t c = 0; c < y.size(); ++c) acc = dd::add(acc, dd::two_prod(y[c], z[c]));
  return sigma * (acc.hi + acc.lo);
}

// |compensated_score - σ <y, z>| <= σ (3 n u^2 Σ|y z| + u |<y,z>|) + u |σ <y, z>| (the partial sums are
// at most Σ |y_c z_c|, the final rounding and the product by σ one u each): below 4 u64 σ Σ |y_c z_c|
// for any n < 2^49.
double own_error(std::span<const double> y, std::span<const double> z, double sigma) {
  double abs_sum = 0;
  for (std::size_t c = 0; c < y.size(); ++c) abs_sum += std::fabs(y[c] * z[c]);
  return 4 * kU64 * sigma * abs_sum * (1 + 4 * kU64);
}

// The exact rotated head att R(p) x (MPFR, rounded once to binary64): what score_bound weighs each
// channel's error with.
std::vector<double> exact_rotated(const RopeSpec& r, const Position& p, std::span<const double> x) {
  const auto mag = [](std::int64_t v) { return v < 0 ? -v : v; };
  const std::int64_t far = std::max({mag(p.t), mag(p.h), mag(p.w)});
  ScopedPrecision prec(working_precision_bits(53, rope_max_abs_angle(r, std::nullopt, far)));
  const std::vector<Real> xr(x.begin(), x.end());
  const std::vector<Real> y = rope_apply<Real>(r, rope_frequencies<Real>(r), p, xr);
  std::vector<double> out;
  for (const Real& v : y) out.push_back(to_f64(v));
  return out;
}

// The class's tolerance on the target's score of q at qp and k at kp (yq, zk its rotated heads): the
// propagated score bound of ERROR_MODEL.md 16.3 over the class's element bounds (accuracy::
// rotated_errors, the target's class and output dtype) plus this file's own_error; its saturation is
// noted at `position` (Ctx::note_saturation; a zero magnitude, q or k all zero, is no case of it).
double score_tolerance(RopeCase& cs, std::span<const double> q, const Position& qp, std::span<const double> k,
                       const Position& kp, std::span<const double> yq, std::span<const double> zk, std::int64_t position) {
  const RopeSpec& r = cs.rope();
  const TargetInfo& info = cs.ctx().target.info();
  const double sigma = score_scale(r);
  const auto Q = exact_rotated(r, qp, q), K = exact_rotated(r, kp, k);
  const RopeGeometry& g = *cs.exact().geometry;
  const auto Eq = rotated_errors(g, info.accuracy, info.dtype, qp, q);
  const auto Ek = rotated_errors(g, info.accuracy, info.dtype, kp, k);
  const ScoreBound b = score_bound(info.accuracy, DType::f64, Q, Eq, K, Ek, sigma, std::nullopt, 0.0);
  const double tol = b.propagated + own_error(yq, zk, sigma);
  if (b.magnitude > 0) cs.ctx().note_saturation(!(tol < b.magnitude), position);
  return tol;
}

}  // namespace

// ---------------------------------------------------------------- score shift invariance
// Statement: the target's score of q at m and k at n equals its score at m + Δ and n + Δ, Δ up to the
// position range (long shifts: 2^20 and beyond where the class's score bound is not saturated).
// Tolerance: each score is within its class tolerance T of the same exact score σ att^2 q^T R(n - m) k
// (+ the pass-through dot), so |s(m, n) - s(m + Δ, n + Δ)| <= T(m, n) + T(m + Δ, n + Δ) (score_tolerance).
void prop_score_shift(Ctx& ctx) {
  auto cs = RopeCase::open(ctx);
  if (!cs) return;
  const RopeSpec& r = cs->rope();
  const std::int64_t mx = cs->max_pos();
  const std::int64_t m = *gen::position(mx), n = *gen::position(mx);
  const std::int64_t room = mx - std::max(m, n);
  const std::int64_t delta = room > 0 ? *gen::position(room) : 0;
  const auto q = *gen::bf16_vector(r.head_dim), k = *gen::bf16_vector(r.head_dim);
  std::vector<double> q2(q), k2(k);
  q2.insert(q2.end(), q.begin(), q.end());
  k2.insert(k2.end(), k.begin(), k.end());
  const Position pq[2] = {Position::uniform(m), Position::uniform(m + delta)};
  const Position pk[2] = {Position::uniform(n), Position::uniform(n + delta)};
  const auto y = cs->apply({pq[0], pq[1]}, 1, q2, Input::q);
  const auto z = cs->apply({pk[0], pk[1]}, 1, k2, Input::k);
  if (!y || !z) return ctx.skip();
  const auto D = static_cast<std::size_t>(r.head_dim);
  double s[2], tol[2];
  for (std::size_t i = 0; i < 2; ++i) {
    s[i] = compensated_score(row(*y, i, D), row(*z, i, D), score_scale(r));
    tol[i] = score_tolerance(*cs, q, pq[i], k, pk[i], row(*y, i, D), row(*z, i, D), std::max(m, n) + (i ? delta : 0));
  }
  cs->check(ratio(std::fabs(s[0] - s[1]), tol[0] + tol[1]),
            cs->where() + "; q " + vec_brief(q) + ", k " + vec_brief(k) + "; m " + std::to_string(m) + ", n " +
                std::to_string(n) + ", shift " + std::to_string(delta) + ": score " + num(s[0]) + " changes to " + num(s[1]) +
                " (tolerance " + num(tol[0] + tol[1]) + ")",
            std::max(m, n) + delta);
}

// ---------------------------------------------------------------- RoFormer decay bound on scores
namespace {

// The exact score and RoFormer's bound on it (Su et al., RoFormer, section 3.4.3: Abel summation),
// with what evaluating both costs. For query q at m and key k at n (δ = n - m), per pair j the complex
// h_j = A_j - i B_j (A = q_a k_a + q_b k_b, B = q_b k_a - q_a k_b), so that
//   s* = σ (att^2 Re Σ_j h_j e^{i δ w_j} + Σ_pass q_c k_c)      (attention::relative_logit)
// and with S_j = Σ_{k<j} e^{i δ w_k} (S_0 = 0), h_P = 0: Σ_j h_j e^{i δ w_j} = -Σ_{j<P} S_{j+1} (h_{j+1} - h_j), so
//   |s*| <= B* = σ (att^2 max_j |h_{j+1} - h_j| Σ_{j=1..P} |S_j| + |Σ_pass q_c k_c|).
// Both in MPFR at >= 53 + kGuardBits bits (reference/scalar.hpp; the sin / cos keep that many after the
// angle's reduction), every one of the N = 16 P + 2 D + 16 operations within 2^-116 of the magnitude
// Mb = σ (att^2 P (P + 1) Σ_j |h_j| + Σ |q_c k_c|) that bounds every intermediate (|S_j| <= j, |h_{j+1} - h_j|
// <= |h_{j+1}| + |h_j|), then each rounded once to binary64: slack = u64 (|s*| + B*) + N 2^-116 Mb.
struct DecayExact {
  double score = 0, bound = 0, slack = 0;
};

DecayExact decay_exact(const RopeSpec& r, std::span<const double> q, std::int64_t m, std::span<const double> k, std::int64_t n) {
  const std::int64_t delta = n - m;
  // (the relative form's angles are delta w_j: relative_logit)
  ScopedPrecision prec(working_precision_bits(53, rope_max_abs_angle(r, std::nullopt, delta < 0 ? -delta : delta)));
  attention::AttentionSpec a;
  a.scale = score_scale(r);
  const attention::ExactAttention<Real> e = attention::exact_attention<Real>(r, std::nullopt, a);
  const std::vector<Real> qr(q.begin(), q.end()), kr(k.begin(), k.end());
  DecayExact out;
  out.score = to_f64(attention::relative_logit<Real>(r, e, Position::uniform(m), qr, Position::uniform(n), kr));
  std::vector<Real> c, s;
  rope_cos_sin<Real>(r, e.freq, Position::uniform(delta), c, s);
  const int P = rope_pairs(r);
  Real re = 0, im = 0, sum_S = 0, H = 0, pass = 0, prev_a = 0, prev_b = 0, abs_h = 0, abs_qk = 0;
  for (int j = 0; j <= P; ++j) {
    Real ha = 0, hb = 0;  // h_j = ha + i hb (h_P = 0)
    if (j < P) {
      const auto [ia, ib] = pair_channels(r, j);
      const Real qa = q[static_cast<std::size_t>(ia)], qb = q[static_cast<std::size_t>(ib)];
      const Real ka = k[static_cast<std::size_t>(ia)], kb = k[static_cast<std::size_t>(ib)];
      ha = qa * ka + qb * kb;
      hb = -(qb * ka - qa * kb);
      re += c[static_cast<std::size_t>(j)];
      im += s[static_cast<std::size_t>(j)];
      sum_S += sqrt(re * re + im * im);
      abs_h += sqrt(ha * ha + hb * hb);
    }
    if (j > 0) {
      const Real da = ha - prev_a, db = hb - prev_b, dist = sqrt(da * da + db * db);
      if (dist > H) H = dist;
    }
    prev_a = ha, prev_b = hb;
  }
  for (int ch = 0; ch < r.head_dim; ++ch) {
    abs_qk += abs(Real(q[static_cast<std::size_t>(ch)]) * k[static_cast<std::size_t>(ch)]);
    if (ch >= rope_block_channels(r)) pass += Real(q[static_cast<std::size_t>(ch)]) * k[static_cast<std::size_t>(ch)];
  }
  const Real att2 = e.freq.attention_factor * e.freq.attention_factor;
  out.bound = to_f64(e.scale * (att2 * H * sum_S + abs(pass)));
  const double Mb = to_f64(e.scale * (att2 * P * (P + 1) * abs_h + abs_qk));
  const double N = 16.0 * P + 2.0 * r.head_dim + 16;
  out.slack = kU64 * (std::fabs(out.score) + out.bound) + N * 0x1p-116 * Mb;
  return out;
}

// RoFormer's extremal input: q pair j = ((P - j) 2^-k, 0) with 2^k >= P, k pair j = (1, 0), so h_j - h_{j+1}
// is the same for every j and at distance 0 the bound is attained (|s*| = B* without pass-through).
// Exact in bf16 for P <= 256 (nullopt beyond: the caller draws generic inputs).
std::optional<std::pair<std::vector<double>, std::vector<double>>> extremal_inputs(const RopeSpec& r) {
  const int P = rope_pairs(r);
  if (P > 256) return std::nullopt;
  const double unit = std::exp2(-std::ceil(std::log2(static_cast<double>(P))));
  std::vector<double> q(static_cast<std::size_t>(r.head_dim), 0.0), k(q);
  for (int j = 0; j < P; ++j) {
    const auto [ia, ib] = pair_channels(r, j);
    (void)ib;
    q[static_cast<std::size_t>(ia)] = (P - j) * unit;
    k[static_cast<std::size_t>(ia)] = 1.0;
  }
  return std::make_pair(q, k);
}

}  // namespace

// Statement: RoFormer's long-range decay bound |s| <= B (above) holds for the exact score of q at m
// and k at n (the MPFR evaluation within its slack), and for the target's own score within the
// class's score tolerance T: a correct target has |ŝ - s*| <= T and |s*| <= B, so |ŝ| <= B + T.
// Inputs: generic bf16 vectors, or RoFormer's extremal ones (where B is attained at distance 0, so an
// inflated score shows: half of their cases are at distance 0); distances from 0 to the position range.
// Tolerance: exact: |s*| - B* <= slack; target: |ŝ| - B* <= T + slack (score_tolerance, decay_exact).
void prop_score_decay(Ctx& ctx) {
  auto cs = RopeCase::open(ctx);
  if (!cs) return;
  const RopeSpec& r = cs->rope();
  const std::int64_t mx = cs->max_pos();
  const auto extremal = *rc::gen::element(false, true) ? extremal_inputs(r) : std::nullopt;
  // The extremal input at distance 0 half of its cases: there the bound is attained, at any position n.
  const std::int64_t d = extremal && *rc::gen::element(true, false) ? 0 : *gen::position(mx);
  const std::int64_t n = mx - d > 0 ? *gen::position(mx - d) : 0, m = n + d;  // the query d after the key
  const auto q = extremal ? extremal->first : *gen::bf16_vector(r.head_dim);
  const auto k = extremal ? extremal->second : *gen::bf16_vector(r.head_dim);
  const auto y = cs->apply({Position::uniform(m)}, 1, q, Input::q);
  const auto z = cs->apply({Position::uniform(n)}, 1, k, Input::k);
  if (!y || !z) return ctx.skip();
  const DecayExact ex = decay_exact(r, q, m, k, n);
  const double s = compensated_score(*y, *z, score_scale(r));
  const double tol = score_tolerance(*cs, q, Position::uniform(m), k, Position::uniform(n), *y, *z, m);
  const std::string where = cs->where() + "; q " + vec_brief(q) + ", k " + vec_brief(k) + "; m " + std::to_string(m) +
                            ", n " + std::to_string(n) + " (distance " + std::to_string(d) + ")";
  cs->check(ratio(std::max(0.0, std::fabs(ex.score) - ex.bound), ex.slack),
            where + ": exact score " + num(ex.score) + " exceeds the RoFormer bound " + num(ex.bound), m);
  cs->check(ratio(std::max(0.0, std::fabs(s) - ex.bound), tol + ex.slack),
            where + ": score " + num(s) + " exceeds the RoFormer bound " + num(ex.bound) + " by more than " +
                num(tol + ex.slack) + " (exact score " + num(ex.score) + ")",
            m);
}

// ---------------------------------------------------------------- cached keys rotated again
// Statement: a key the target rotated to position m (its k path), stored as the target's input format
// (a KV cache) and rotated by Δ with the k path, equals the key the k path rotates to m + Δ, times att:
// f_k(f_k(k, m), Δ) = att f_k(k, m + Δ); Δ up to the position range and, for targets that accept negative
// positions, down to -m (the cached key rotated back; at Δ = -m, att^2 k: the inverse property's statement
// on the k path).
// Tolerance: composition's (rotation.cpp, composition_margin): per pair E^g + att (E^y + |rounding of the
// cached key|) + att E^h + 4 u64 att |h|, every E the class's element bound at its own position.
void prop_cached_key_rotation(Ctx& ctx) {
  auto cs = RopeCase::open(ctx);
  if (!cs) return;
  const std::int64_t mx = cs->max_pos();
  const std::int64_t m = *gen::position(mx);
  const bool back = ctx.target.info().negative_positions && *rc::gen::element(false, true);
  const std::int64_t delta =
      back ? -*rc::gen::inRange<std::int64_t>(0, m + 1) : (mx - m > 0 ? *gen::position(mx - m) : 0);
  const auto x = *gen::bf16_vector(cs->rope().head_dim);
  const auto mg = composition_margin(*cs, x, m, delta, Input::k);
  if (!mg) return ctx.skip();
  cs->check(mg->first,
            cs->where() + "; k " + vec_brief(x) + "; key cached at " + std::to_string(m) + " rotated by " +
                std::to_string(delta) + " vs rotated at " + std::to_string(m + delta) + ": " + mg->second,
            m + std::max<std::int64_t>(delta, 0));
}

}  // namespace ropecheck::props::detail
