// The certified fallback: logits and output rows in MPFR ball arithmetic (ball.hpp) at 2^k times the
// start precision until every requested value's ball rounds to one value (Ziv's loop).
//
// The logit in its relative form (exactly the rotated one: <R(a) q, R(b) k> = <q, R(b - a) k>):
//   s = scale (att^2 sum_j [A_j cos(d_j w_j) + B_j sin(d_j w_j)] + sum_pass q_c k_c),
//   A_j = q_a k_a + q_b k_b,  B_j = q_b k_a - q_a k_b,  d_j = key position - query position (pair j's stream),
// so a pair at distance 0 contributes A_j exactly and a pair with A_j = B_j = 0 nothing; exact inputs
// stay exact as far as the mathematics allows (a diagonal logit with a rational scale, a zero query).
// The output row: e_j = exp(t_j - t_r), t_r the largest centre (e_r = 1 exactly), e_sink = exp(z - t_r),
// o_c = sum_j e_j V_jc / (sum_j e_j + e_sink).
#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ball.hpp"
#include "engine_impl.hpp"

namespace ropecheck::attention::detail {
namespace {

long next_precision(long w) {
  if (w >= AttentionEngine::kZivMaxBits)
    throw std::runtime_error("ropecheck: attention value not settled at " + std::to_string(AttentionEngine::kZivMaxBits) +
                             " bits (please report this input)");
  return std::min<long>(2 * w, AttentionEngine::kZivMaxBits);
}

// The logit of query head q at qp against key k at kp, as a ball at precision w.
void logit_ball(const Impl& m, const Position& qp, const double* q, const Position& kp, const double* k, long w,
                Ball& out) {
  Ball acc(w), A(w), B(w), t1(w), t2(w), x(w), th(w), s(w), c(w);
  for (int j = 0; j < m.P; ++j) {
    const auto [ia, ib] = m.channels[static_cast<std::size_t>(j)];
    ball_set_d(x, q[ia]);
    ball_mul_d(t1, x, k[ia]);
    ball_set_d(x, q[ib]);
    ball_mul_d(t2, x, k[ib]);
    ball_add(A, t1, t2);  // q_a k_a + q_b k_b
    ball_set_d(x, q[ib]);
    ball_mul_d(t1, x, k[ia]);
    ball_set_d(x, q[ia]);
    ball_mul_d(t2, x, k[ib]);
    ball_sub(B, t1, t2);  // q_b k_a - q_a k_b
    const bool zero = A.exact() && B.exact() && mpfr_zero_p(A.c()) && mpfr_zero_p(B.c());
    const std::int64_t d = m.stream_position(kp, j) - m.stream_position(qp, j);
    if (zero) continue;
    if (d == 0 || mpfr_zero_p(m.inv_mp[static_cast<std::size_t>(j)]->get())) {
      ball_add(t1, acc, A);
    } else {
      ball_set_stored(x, m.inv_mp[static_cast<std::size_t>(j)]->get(), m.inv_exact[static_cast<std::size_t>(j)] != 0,
                      kStoredGuardBits);
      mpfr_set_si(s.c(), static_cast<long>(d), MPFR_RNDN);  // exact: w >= 64 bits
      mpfr_set_zero(s.r(), 1);
      ball_mul(th, x, s);
      ball_sin_cos(s, c, th);
      ball_mul(t1, A, c);
      ball_mul(t2, B, s);
      ball_add(x, t1, t2);
      ball_add(t1, acc, x);
    }
    ball_set(acc, t1);
  }
  if (!m.att_one) {
    ball_set_stored(x, m.att_mp->get(), m.att_exact, kStoredGuardBits);
    ball_mul(t1, x, x);
    ball_mul(t2, acc, t1);
    ball_set(acc, t2);
  }
  for (int ch : m.passthrough) {
    ball_set_d(x, q[ch]);
    ball_mul_d(t1, x, k[ch]);
    ball_add(t2, acc, t1);
    ball_set(acc, t2);
  }
  ball_set_stored(x, m.scale_mp->get(), m.scale_exact, kStoredGuardBits);
  if (!m.cap) {
    ball_mul(out, acc, x);
    return;
  }
  ball_mul(t1, acc, x);
  ball_div_d(t2, t1, *m.cap);
  ball_tanh(t1, t2);
  ball_mul_d(out, t1, *m.cap);
}

}  // namespace

void ziv_logit(const Impl& m, const Position& qp, const double* q, const Position& kp, const double* k,
               std::span<const DType> dtypes, double* results, unsigned char* need) {
  for (long w = m.start_bits;; w = next_precision(w)) {
    Ball t(w);
    logit_ball(m, qp, q, kp, k, w, t);
    bool all = true;
    for (std::size_t d = 0; d < dtypes.size(); ++d) {
      if (need[d] && ball_round(t, dtypes[d], results[d])) need[d] = 0;
      all = all && !need[d];
    }
    if (all) return;
  }
}

void ziv_row(const Impl& m, const Position& qp, const double* q, std::span<const Position> key_pos, const double* k,
             const double* v, const double* sink, std::span<const DType> dtypes, double* results,
             unsigned char* need) {
  const std::size_t n = key_pos.size(), nd = dtypes.size(), dv = static_cast<std::size_t>(m.Dv);
  for (long w = m.start_bits;; w = next_precision(w)) {
    std::vector<std::unique_ptr<Ball>> t, e;
    std::size_t r = 0;
    for (std::size_t j = 0; j < n; ++j) {
      t.push_back(std::make_unique<Ball>(w));
      logit_ball(m, qp, q, key_pos[j], k + j * static_cast<std::size_t>(m.D), w, *t.back());
      if (mpfr_cmp(t[j]->c(), t[r]->c()) > 0) r = j;
    }
    Ball Z(w), x(w), tmp(w), num(w), o(w);
    for (std::size_t j = 0; j < n; ++j) {
      e.push_back(std::make_unique<Ball>(w));
      if (j == r) {
        ball_set_d(*e.back(), 1.0);  // exp(t_r - t_r), exactly
      } else {
        ball_sub(x, *t[j], *t[r]);
        ball_exp(*e.back(), x);
      }
      ball_add(tmp, Z, *e.back());
      ball_set(Z, tmp);
    }
    if (sink) {
      ball_set_d(tmp, *sink);
      ball_sub(x, tmp, *t[r]);
      ball_exp(tmp, x);
      ball_add(x, Z, tmp);
      ball_set(Z, x);
    }
    bool all = true;
    for (std::size_t c = 0; c < dv; ++c) {
      bool any = false;
      for (std::size_t d = 0; d < nd; ++d) any = any || need[c * nd + d];
      if (!any) continue;
      ball_set_d(num, 0.0);
      for (std::size_t j = 0; j < n; ++j) {
        ball_mul_d(x, *e[j], v[j * dv + c]);
        ball_add(tmp, num, x);
        ball_set(num, tmp);
      }
      const bool ok = ball_div(o, num, Z);
      for (std::size_t d = 0; d < nd; ++d) {
        unsigned char& nd_flag = need[c * nd + d];
        if (nd_flag && ok && ball_round(o, dtypes[d], results[c * nd + d])) nd_flag = 0;
        all = all && !nd_flag;
      }
    }
    if (all) return;
  }
}

}  // namespace ropecheck::attention::detail
