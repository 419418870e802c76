// The score and output bounds of accuracy/attention_bounds.hpp (ERROR_MODEL.md section 16) against
// brute-force worst cases: rotations perturbed to the edge of their class (every channel's error at its
// bound, signs aligned to the other vector: the first-order worst case), random perturbations inside the
// class, logits perturbed to their bounds against each output channel; the classes nest; saturation.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "attention_util.hpp"
#include "ropecheck/reference/presets.hpp"

namespace ropecheck::attention::test {
namespace {

using accuracy::AccuracyClass;

constexpr std::array<AccuracyClass, 5> kInexact = {AccuracyClass::fp64_angle, AccuracyClass::f32_reduced,
                                                   AccuracyClass::fp32_angle, AccuracyClass::f16_table,
                                                   AccuracyClass::bf16_table};

double sgn(double x) { return x < 0 ? -1.0 : 1.0; }

// sum (Qh K + Q Kh - Q K) for Qh = Q + eq, Kh = K + ek, as sum (eq K + Q ek + eq ek): no cancellation.
double dot_change(std::span<const double> Q, std::span<const double> eq, std::span<const double> K,
                  std::span<const double> ek) {
  double s = 0;
  for (std::size_t c = 0; c < Q.size(); ++c) s += eq[c] * K[c] + Q[c] * ek[c] + eq[c] * ek[c];
  return s;
}

TEST(ScoreBound, RotationsAtTheEdgeOfTheirClassReachTheBoundAndNoFurther) {
  std::mt19937_64 rng(7);
  double worst_aligned = 0, least_aligned = 2, worst_random = 0;
  for (const char* preset : {"llama-3.1-8b", "gpt-oss-20b", "phi-3.5-mini", "gpt-neox-20b", "qwen2-vl-7b"}) {
    const RopeSpec rope = load_preset(preset).rope;
    const accuracy::RopeGeometry geo = geometry_of(rope);
    const RopeRoundingEngine eng(rope, std::nullopt, 1 << 21);
    const std::size_t D = static_cast<std::size_t>(rope.head_dim);
    const double scale = 1 / std::sqrt(static_cast<double>(D));
    std::uint64_t seed = 1;
    for (std::int64_t m : {0, 1, 4096, 131071, 1 << 20})
      for (std::int64_t dist : {0, 1, 977}) {
        const Position pq = Position::uniform(m + dist), pk = Position::uniform(m);
        const std::vector<double> q = storable_inputs(D, seed++), k = storable_inputs(D, seed++);
        const std::vector<double> Q = exact_rotated(eng, pq, q, 1), K = exact_rotated(eng, pk, k, 1);
        for (AccuracyClass c : kInexact)
          for (DType dt : {DType::f32, DType::bf16}) {
            const std::vector<double> Eq = accuracy::rotated_errors(geo, c, dt, pq, q);
            const std::vector<double> Ek = accuracy::rotated_errors(geo, c, dt, pk, k);
            const accuracy::ScoreBound b = accuracy::score_bound(c, dt, Q, Eq, K, Ek, scale, std::nullopt, 0.0);
            // The box's worst case: each channel's errors at the corner that moves the sum most.
            std::vector<double> eq(D), ek(D);
            double up = 0, down = 0, second = 0;
            for (std::size_t i = 0; i < D; ++i) {
              double hi = -1e300, lo = 1e300;
              for (double a : {-Eq[i], Eq[i]})
                for (double b2 : {-Ek[i], Ek[i]}) {
                  const double f = a * K[i] + Q[i] * b2 + a * b2;
                  hi = std::max(hi, f);
                  lo = std::min(lo, f);
                }
              up += hi;
              down += lo;
              second += Eq[i] * Ek[i];
            }
            const double aligned = scale * std::max(up, -down) / b.propagated;
            EXPECT_LE(aligned, 1.0) << preset << " m " << m << " " << accuracy::to_string(c);
            worst_aligned = std::max(worst_aligned, aligned);
            if (scale * second < 0.01 * b.propagated) least_aligned = std::min(least_aligned, aligned);
            std::uniform_real_distribution<double> u(-1, 1);
            for (int trial = 0; trial < 20; ++trial) {
              for (std::size_t i = 0; i < D; ++i) {
                eq[i] = Eq[i] * u(rng);
                ek[i] = Ek[i] * u(rng);
              }
              const double r = scale * std::fabs(dot_change(Q, eq, K, ek)) / b.propagated;
              EXPECT_LE(r, 1.0);
              worst_random = std::max(worst_random, r);
            }
          }
      }
  }
  std::printf("score (seed 7): worst-case perturbations reach %.4f .. %.4f of the propagated bound (first-order "
              "cases), random ones %.3f\n",
              least_aligned, worst_aligned, worst_random);
  EXPECT_GT(least_aligned, 0.94);  // the bound is the worst case (to first order, within 1 + g), not more
}

// A softmax row in double: p (keys), p_sink, o over channels.
struct Row {
  std::vector<double> p;
  double p_sink = 0;
  std::vector<double> o;
};
Row softmax_row(const std::vector<double>& t, const double* sink, const std::vector<double>& v, std::size_t dv) {
  Row r;
  double mx = sink ? *sink : t[0];
  for (double x : t) mx = std::max(mx, x);
  double z = sink ? std::exp(*sink - mx) : 0.0;
  for (double x : t) {
    r.p.push_back(std::exp(x - mx));
    z += r.p.back();
  }
  for (double& p : r.p) p /= z;
  r.p_sink = sink ? std::exp(*sink - mx) / z : 0.0;
  r.o.assign(dv, 0.0);
  for (std::size_t j = 0; j < t.size(); ++j)
    for (std::size_t c = 0; c < dv; ++c) r.o[c] += r.p[j] * v[j * dv + c];
  return r;
}

TEST(OutputBound, LogitsAtTheirBoundsReachItAndNoFurther) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> nd(0, 1);
  double worst = 0, least_small = 2;
  const std::size_t dv = 8;
  for (std::size_t n : {1, 2, 16, 300})
    for (double level : {1e-9, 1e-5, 1e-2, 0.3, 2.0})
      for (int with_sink = 0; with_sink < 2; ++with_sink)
        for (int trial = 0; trial < 8; ++trial) {
          std::vector<double> t(n), v(n * dv), eps(n);
          for (double& x : t) x = 2 * nd(rng);
          for (double& x : v) x = nd(rng) + (trial % 2 ? 3.0 : 0.0);  // an offset: |V - o| is what counts
          for (double& e : eps) e = level * (0.5 + std::fabs(nd(rng)));
          const double z = nd(rng);
          const double* sink = with_sink ? &z : nullptr;
          const Row ex = softmax_row(t, sink, v, dv);
          double lo = sink ? z : t[0], hi = lo;
          for (double x : t) lo = std::min(lo, x), hi = std::max(hi, x);
          const accuracy::SoftmaxRow row{ex.p, ex.p_sink, eps, hi - lo};
          for (std::size_t c = 0; c < dv; ++c) {
            const accuracy::OutputBound b = accuracy::output_bound(AccuracyClass::fp64_angle, DType::f64, row,
                                                                    {v.data() + c, dv}, ex.o[c]);
            std::vector<double> tp(n);  // adversarial: raise the logits of keys above the output, lower the rest
            for (std::size_t j = 0; j < n; ++j) tp[j] = t[j] + eps[j] * sgn(v[j * dv + c] - ex.o[c]);
            const double got = std::fabs(softmax_row(tp, sink, v, dv).o[c] - ex.o[c]);
            if (got < 1e-12 * (1 + std::fabs(ex.o[c]))) continue;  // below double's own resolution here
            const double r = got / b.propagated;
            EXPECT_LE(r, 1.0) << "n " << n << " level " << level;
            worst = std::max(worst, r);
            if (level <= 1e-5) least_small = std::min(least_small, r);
          }
        }
  std::printf("output (seed 11): adversarial logits reach up to %.4f of the propagated bound (at least %.4f for "
              "small errors)\n",
              worst, least_small);
  EXPECT_GT(least_small, 0.9);
}

TEST(AttentionBounds, ClassesNest) {
  const RopeSpec rope = load_preset("llama-3.1-8b").rope;
  const accuracy::RopeGeometry geo = geometry_of(rope);
  const RopeRoundingEngine eng(rope, std::nullopt, 1 << 21);
  const std::size_t D = 128;
  for (std::int64_t m : {0, 5000, 1 << 20}) {
    const Position p = Position::uniform(m), pk = Position::uniform(m / 2);
    const std::vector<double> q = storable_inputs(D, 3), k = storable_inputs(D, 4);
    const std::vector<double> Q = exact_rotated(eng, p, q, 1), K = exact_rotated(eng, pk, k, 1);
    for (DType dt : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
      double prev_score = 0, prev_out = 0;
      for (AccuracyClass c : accuracy::kAccuracyClasses) {
        const std::vector<double> Eq = accuracy::rotated_errors(geo, c, dt, p, q), Ek = accuracy::rotated_errors(geo, c, dt, pk, k);
        const accuracy::ScoreBound s = accuracy::score_bound(c, dt, Q, Eq, K, Ek, 0.1, 50.0, 0.3);
        const std::vector<double> pr = {0.25, 0.75}, v = {1.0, -2.0}, eps = {s.internal, s.internal};
        const accuracy::OutputBound o = accuracy::output_bound(c, dt, {pr, 0.0, eps, 1.1}, {v.data(), 1}, -1.25);
        EXPECT_GE(s.stored, prev_score) << accuracy::to_string(c) << " " << to_string(dt);
        EXPECT_GE(o.bound, prev_out) << accuracy::to_string(c) << " " << to_string(dt);
        prev_score = s.stored;
        prev_out = o.bound;
      }
    }
  }
}

TEST(AttentionBounds, SaturatedBoundsAreReported) {
  const RopeSpec rope = load_preset("llama-3.1-8b").rope;
  const accuracy::RopeGeometry geo = geometry_of(rope);
  const RopeRoundingEngine eng(rope, std::nullopt, 1 << 25);
  const std::vector<double> q = storable_inputs(128, 5), k = storable_inputs(128, 6);
  auto bound_at = [&](std::int64_t m) {
    const Position p = Position::uniform(m);
    const std::vector<double> Q = exact_rotated(eng, p, q, 1), K = exact_rotated(eng, p, k, 1);
    const auto c = AccuracyClass::fp32_angle;
    return accuracy::score_bound(c, DType::f32, Q, accuracy::rotated_errors(geo, c, DType::f32, p, q), K,
                                 accuracy::rotated_errors(geo, c, DType::f32, p, k), 0.088, std::nullopt, 0.0);
  };
  EXPECT_FALSE(bound_at(4096).saturated);
  const accuracy::ScoreBound far = bound_at((1 << 24) - 1);  // f32 angles of the fast pairs are meaningless
  EXPECT_TRUE(far.saturated);
  EXPECT_GE(far.stored, far.magnitude);
  // An output whose logits may be off by 3 can be anything in V's range: saturated.
  const std::vector<double> pr = {0.5, 0.5}, v = {1.0, 2.0}, eps = {3.0, 3.0};
  EXPECT_TRUE(accuracy::output_bound(AccuracyClass::fp32_angle, DType::f32, {pr, 0.0, eps, 0.0}, {v.data(), 1}, 1.5).saturated);
}

}  // namespace
}  // namespace ropecheck::attention::test
