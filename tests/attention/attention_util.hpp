// Shared by the attention tests: deterministic inputs and the plain MPFR oracle.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "ropecheck/attention/engine.hpp"
#include "ropecheck/attention/exact.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/reference/scalar.hpp"

namespace ropecheck::attention::test {

// A bf16-exact value nearest a standard normal sample (what activations look like; exact in every
// format the tests use, so the inputs themselves carry no rounding).
inline double bf16_value(double x) {
  float f = static_cast<float>(x);
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&f, &u, 4);
  return static_cast<double>(f);
}

inline std::vector<double> normal_inputs(std::size_t n, std::uint64_t seed, double sigma = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, sigma);
  std::vector<double> out(n);
  for (double& x : out) x = bf16_value(nd(rng));
  return out;
}

inline std::vector<Position> uniform_positions(std::initializer_list<std::int64_t> ps) {
  std::vector<Position> out;
  for (std::int64_t p : ps) out.push_back(Position::uniform(p));
  return out;
}

inline std::vector<Position> block_positions(std::int64_t start, std::int64_t n) {
  std::vector<Position> out;
  for (std::int64_t i = 0; i < n; ++i) out.push_back(Position::uniform(start + i));
  return out;
}

// The plain oracle: exact.hpp's formulas in MPFR at `bits`, each value rounded once to each dtype.
// scores[d] [group][layout.total()], outputs[d] [tokens][group][value_dim].
struct OracleValues {
  std::vector<std::vector<double>> scores, outputs;
};
inline OracleValues oracle(const RopeSpec& rope, const AttentionSpec& a, std::span<const Position> pos,
                           std::span<const double> q, std::span<const double> k, std::span<const double> v,
                           std::span<const DType> dtypes, unsigned bits = 600) {
  ScopedPrecision prec(bits);
  const ExactAttention<Real> e = exact_attention<Real>(rope, std::nullopt, a);
  std::vector<Real> qr(q.begin(), q.end()), kr(k.begin(), k.end()), vr(v.begin(), v.end()), s, o;
  attention_block<Real>(rope, e, a, pos, qr, kr, vr, s, o);
  OracleValues out;
  for (DType t : dtypes) {
    std::vector<double> sd, od;
    for (const Real& x : s) sd.push_back(x == 0 ? 0.0 : round_to_double(x, t));
    for (const Real& x : o) od.push_back(x == 0 ? 0.0 : round_to_double(x, t));
    out.scores.push_back(std::move(sd));
    out.outputs.push_back(std::move(od));
  }
  return out;
}

inline bool same_value(double a, double b) { return a == b; }  // +0 == -0, as the checker compares

}  // namespace ropecheck::attention::test

#include "ropecheck/accuracy/attention_bounds.hpp"
#include "ropecheck/reference/fast_rounding.hpp"

namespace ropecheck::attention::test {

// The spec's geometry for the error model: inverse frequencies and attention factor nearest the exact ones.
inline accuracy::RopeGeometry geometry_of(const RopeSpec& rope) {
  ScopedPrecision prec(256);
  const RopeFrequencies<Real> f = rope_frequencies<Real>(rope, std::nullopt);
  std::vector<double> w;
  for (const Real& x : f.inv_freq) w.push_back(to_f64(x));
  return accuracy::RopeGeometry(rope, w, to_f64(f.attention_factor));
}

// The exact rotated heads of one token (nearest doubles), heads * head_dim values.
inline std::vector<double> exact_rotated(const RopeRoundingEngine& eng, const Position& p, std::span<const double> x,
                                         int heads) {
  std::vector<double> out(x.size());
  const DType t = DType::f64;
  RoundedOut o;
  o.rot = out.data();
  RoundingStats stats;
  eng.evaluate(p, x, heads, std::span<const DType>(&t, 1), std::span<const RoundedOut>(&o, 1), stats);
  return out;
}

// Values exact in bf16, f16 and f32 alike: a normal sample rounded to 8 significant bits, |x| < 2^-14 to 0.
inline std::vector<double> storable_inputs(std::size_t n, std::uint64_t seed, double sigma = 1.0) {
  std::vector<double> v = normal_inputs(n, seed, sigma);
  for (double& x : v)
    if (std::fabs(x) < 0x1p-14) x = 0.0;
  return v;
}

}  // namespace ropecheck::attention::test
