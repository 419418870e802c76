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
