// ERROR_MODEL.md section 16, evaluated. Sums are taken in double and the results inflated by (1 + g)
// (the second-order slack, which also covers the double evaluation of the bound and exact inputs given
// as their nearest doubles).
#include "ropecheck/accuracy/attention_bounds.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ropecheck::accuracy {
namespace {

constexpr double kG1 = 1 + model::kSecondOrder;
constexpr double kInf = std::numeric_limits<double>::infinity();

// gamma_n = n u / (1 - n u): n roundings in any order (Higham, Accuracy and Stability, 3.1); inf when n u >= 1.
double gamma(double n, double u) { return n * u < 1 ? n * u / (1 - n * u) : kInf; }

}  // namespace

AttentionArithmetic attention_arithmetic(AccuracyClass c) {
  const double u64 = unit_roundoff(DType::f64), u32 = unit_roundoff(DType::f32);
  switch (c) {
    case AccuracyClass::exact:
    case AccuracyClass::fp64_angle: return {u64, u64, min_subnormal(DType::f64)};
    case AccuracyClass::f32_reduced:
    case AccuracyClass::fp32_angle: return {u32, u32, min_subnormal(DType::f32)};
    case AccuracyClass::f16_table: return {u32, unit_roundoff(DType::f16), min_subnormal(DType::f16)};
    case AccuracyClass::bf16_table: return {u32, unit_roundoff(DType::bf16), min_subnormal(DType::f16)};
  }
  return {};
}

std::vector<double> rotated_errors(const RopeGeometry& g, AccuracyClass c, DType dt, const Position& p,
                                   std::span<const double> x) {
  std::vector<double> e(x.size());
  for (int ch = 0; ch < g.head_dim(); ++ch) {
    const Quantity q = g.quantity(ch);
    const int pair = g.pair_of(ch);
    const PairAngle a = pair < 0 ? PairAngle{} : g.angle(g.position(p, pair), pair);
    e[static_cast<std::size_t>(ch)] = class_bound(c, dt, q).allowed(a, g.magnitude(x, ch));
  }
  return e;
}

// 16.3: with Delta = sum (Eq |K| + |Q| Ek + Eq Ek) and C+ = sum (|Q| + Eq)(|K| + Ek),
//   internal = (1 + g) [scale Delta + (gamma_n(u_acc) + 3 u_mid) scale C+ (+ soft-cap arithmetic)] + F,
//   soft-cap arithmetic = u_mid scale C+ + (4 u_acc + 2 u_mid) min(scale C+, cap),
//   stored = internal + (1 + g) u_dt (|t| + internal) + s_min(dt) / 2,  F = (n + 8) max(1, scale) s_min.
ScoreBound score_bound(AccuracyClass c, DType dt, std::span<const double> Q, std::span<const double> Eq,
                       std::span<const double> K, std::span<const double> Ek, double scale, std::optional<double> cap,
                       double logit) {
  ScoreBound b;
  double delta = 0, cplus = 0, mag = 0;
  for (std::size_t i = 0; i < Q.size(); ++i) {
    const double q = std::fabs(Q[i]), k = std::fabs(K[i]);
    delta += Eq[i] * k + q * Ek[i] + Eq[i] * Ek[i];
    cplus += (q + Eq[i]) * (k + Ek[i]);
    mag += q * k;
  }
  const double u_dt = unit_roundoff(dt);
  b.magnitude = cap ? std::min(scale * mag, *cap) : scale * mag;
  b.propagated = kG1 * scale * delta;
  if (c == AccuracyClass::exact) {
    b.stored = u_dt * std::fabs(logit) + 0.5 * min_subnormal(dt);
  } else {
    const AttentionArithmetic a = attention_arithmetic(c);
    const double n = static_cast<double>(Q.size());
    const double sc = scale * cplus;
    double arith = (gamma(n, a.u_acc) + 3 * a.u_mid) * sc;
    if (cap) arith += a.u_mid * sc + (4 * a.u_acc + 2 * a.u_mid) * std::min(sc, *cap);
    b.internal = kG1 * (scale * delta + arith) + (n + 8) * std::max(1.0, scale) * a.s_min;
    b.stored = b.internal + kG1 * u_dt * (std::fabs(logit) + b.internal) + 0.5 * min_subnormal(dt);
  }
  b.saturated = !(b.stored < b.magnitude);
  return b;
}

// 16.4: per key eps'_j = eps_j + u_acc (W + 2E) + 4 u_acc + u_mid, the sink's u_acc (W + 2E) + 4 u_acc
// (E the largest eps, W the logits' spread), E' the largest eps';
//   B0 = sum_k p_k (e^(eps'_k + E') - 1) |V_k - o|,   B1 = e^(2E') [sum_k p_k eps'_k |V_k - o| + E' B0]
// over the keys and the sink (V_sink = 0), B = min(B0, B1);
//   eta = gamma_(N+1)(u_acc) + 2 u_acc + u_mid,  M = sum_j p_j |V_j|,
//   pre = B + eta (|o| + B) + gamma_N(u_acc) (1 + eta) e^(2E') M,
//   bound = (1 + g) [pre + u_dt (|o| + pre)] + (N + 9) s_min (1 + max |V_j|).
OutputBound output_bound(AccuracyClass c, DType dt, const SoftmaxRow& row, Column v, double o) {
  OutputBound b;
  const std::size_t n = row.p.size();
  double vmax = 0;
  for (std::size_t j = 0; j < n; ++j) {
    b.magnitude += row.p[j] * std::fabs(v[j]);
    vmax = std::max(vmax, std::fabs(v[j]));
  }
  const double u_dt = unit_roundoff(dt);
  if (c == AccuracyClass::exact) {
    b.bound = u_dt * std::fabs(o) + 0.5 * min_subnormal(dt);
    b.saturated = !(b.bound < b.magnitude);
    return b;
  }
  const AttentionArithmetic a = attention_arithmetic(c);
  double e_max = 0;
  for (double e : row.eps) e_max = std::max(e_max, e);
  const double shift = a.u_acc * (row.spread + 2 * e_max) + 4 * a.u_acc;
  const double big = e_max + shift + a.u_mid;  // E'
  const bool sink = row.p_sink > 0;
  double b0 = 0, first = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const double ej = row.eps[j] + shift + a.u_mid, dv = std::fabs(v[j] - o);
    b0 += row.p[j] * std::expm1(ej + big) * dv;
    first += row.p[j] * ej * dv;
  }
  if (sink) {
    b0 += row.p_sink * std::expm1(shift + big) * std::fabs(o);
    first += row.p_sink * shift * std::fabs(o);
  }
  const double grow = std::exp(2 * big);
  const double b1 = grow * (first + big * b0);
  b.propagated = kG1 * std::min(b0, b1);
  const double N = static_cast<double>(n);
  const double eta = gamma(N + 1, a.u_acc) + 2 * a.u_acc + a.u_mid;
  const double B = std::min(b0, b1);
  const double pre = B + eta * (std::fabs(o) + B) + gamma(N, a.u_acc) * (1 + eta) * grow * b.magnitude;
  b.bound = kG1 * (pre + u_dt * (std::fabs(o) + pre)) + (N + 9) * a.s_min * (1 + vmax);
  b.saturated = !(b.bound < b.magnitude);
  return b;
}

}  // namespace ropecheck::accuracy
