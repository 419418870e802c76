// The attention formulas of spec.hpp, templated on the scalar: with T = Real (MPFR, reference/scalar.hpp)
// at a high precision they are the plain oracle the engine's correctly rounded values are tested against;
// with T = float or double they are the same computation in that format (what an attention kernel does
// after its rotation: the tests' model of an f32 attention, error_model.hpp's attention classes).
//
// Every operation is written out in the order a straightforward kernel performs it: the dot product left
// to right, the scale after it, the soft-cap as cap * tanh(s / cap), the row's largest logit (and the
// sink's, as Hugging Face's gpt-oss takes the max over both) subtracted before exp, the probabilities
// divided by their sum, then the weighted sum of V left to right.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "ropecheck/attention/spec.hpp"
#include "ropecheck/formulas/rope.hpp"

namespace ropecheck::attention {

template <class T>
struct ExactAttention {
  RopeFrequencies<T> freq;
  T scale = T(1);
  std::optional<T> cap;
  std::vector<T> sinks;  // per query head of the group, or empty
};

template <class T>
ExactAttention<T> exact_attention(const RopeSpec& rope, std::optional<std::int64_t> seq_len, const AttentionSpec& a) {
  using std::sqrt;
  ExactAttention<T> e{rope_frequencies<T>(rope, seq_len), T(1), std::nullopt, {}};
  const int dim = scale_sqrt_dim(a, rope);
  e.scale = dim > 0 ? T(1) / sqrt(T(dim)) : T(*a.scale);
  if (a.softcap) e.cap = T(*a.softcap);
  for (double z : a.sinks) e.sinks.push_back(T(z));
  return e;
}

// The soft-cap (identity without one).
template <class T>
T soft_cap(const ExactAttention<T>& e, const T& s) {
  using std::tanh;
  return e.cap ? *e.cap * tanh(s / *e.cap) : s;
}

// The logit of a rotated query and a rotated key: scale * <Q, K>, soft-capped.
template <class T>
T logit(const ExactAttention<T>& e, std::span<const T> Q, std::span<const T> K) {
  using std::tanh;
  T d = T(0);
  for (std::size_t c = 0; c < Q.size(); ++c) d += Q[c] * K[c];
  return soft_cap(e, d * e.scale);
}

// The same logit from the unrotated query (at qp) and key (at kp) in its relative form,
//   scale (att^2 sum_j [(q_a k_a + q_b k_b) cos(d_j w_j) + (q_b k_a - q_a k_b) sin(d_j w_j)] + sum_pass q_c k_c),
// d_j the key's minus the query's position on pair j's stream: equal to logit(R(qp) q, R(kp) k) in exact
// arithmetic (<R(a) q, R(b) k> = <q, R(b - a) k>), and exact in MPFR where the mathematics is rational
// (distance 0 with a rational scale), which the rotated form is not.
template <class T>
T relative_logit(const RopeSpec& rope, const ExactAttention<T>& e, const Position& qp, std::span<const T> q,
                 const Position& kp, std::span<const T> k) {
  using std::cos;
  using std::sin;
  T rot = T(0);
  std::vector<bool> rotated(q.size(), false);
  for (int j = 0; j < rope_pairs(rope); ++j) {
    const auto [ia, ib] = pair_channels(rope, j);
    const std::size_t a = static_cast<std::size_t>(ia), b = static_cast<std::size_t>(ib);
    rotated[a] = rotated[b] = true;
    const T A = q[a] * k[a] + q[b] * k[b], B = q[b] * k[a] - q[a] * k[b];
    const std::int64_t d = stream_position(rope, kp, j) - stream_position(rope, qp, j);
    if (d == 0) {
      rot += A;
    } else {
      const T theta = from_int<T>(d) * e.freq.inv_freq[static_cast<std::size_t>(j)];
      rot += A * cos(theta) + B * sin(theta);
    }
  }
  T pass = T(0);
  for (std::size_t c = 0; c < q.size(); ++c)
    if (!rotated[c]) pass += q[c] * k[c];
  return soft_cap(e, (e.freq.attention_factor * e.freq.attention_factor * rot + pass) * e.scale);
}

// One output row: out[c] = sum_j p_j V[j][c] over the row's keys, p = softmax(logits, sink), V rows of dv
// values; the probabilities (keys only) into probs when given.
template <class T>
void softmax_output(std::span<const T> logits, const T* sink, std::span<const T> v, int dv, std::span<T> out,
                    std::vector<T>* probs = nullptr) {
  using std::exp;
  T mx = logits[0];
  for (const T& t : logits)
    if (t > mx) mx = t;
  if (sink && *sink > mx) mx = *sink;
  std::vector<T> p(logits.size());
  T z = sink ? exp(*sink - mx) : T(0);
  for (std::size_t j = 0; j < logits.size(); ++j) {
    p[j] = exp(logits[j] - mx);
    z += p[j];
  }
  for (T& x : p) x = x / z;
  for (int c = 0; c < dv; ++c) {
    T acc = T(0);
    for (std::size_t j = 0; j < p.size(); ++j) acc += p[j] * v[j * static_cast<std::size_t>(dv) + static_cast<std::size_t>(c)];
    out[static_cast<std::size_t>(c)] = acc;
  }
  if (probs) *probs = std::move(p);
}

// Scores and outputs of a whole block in T: q [tokens][group][D], k [tokens][D], v [tokens][dv] (empty:
// no outputs). scores [group][layout.total()], outputs [tokens][group][dv]. The logits in their relative
// form (relative_logit), so that exact values stay exact in MPFR.
template <class T>
void attention_block(const RopeSpec& rope, const ExactAttention<T>& e, const AttentionSpec& a,
                     std::span<const Position> positions, std::span<const T> q, std::span<const T> k,
                     std::span<const T> v, std::vector<T>& scores, std::vector<T>& outputs) {
  const std::size_t n = positions.size(), D = static_cast<std::size_t>(rope.head_dim);
  const std::size_t G = static_cast<std::size_t>(a.group), dv = static_cast<std::size_t>(value_dim(a, rope));
  const BlockLayout layout(a, static_cast<std::int64_t>(n));
  scores.assign(G * static_cast<std::size_t>(layout.total()), T(0));
  outputs.assign(v.empty() ? 0 : n * G * dv, T(0));
  std::vector<T> row;
  for (std::size_t h = 0; h < G; ++h) {
    for (std::size_t i = 0; i < n; ++i) {
      const KeyRange kr = layout.keys(static_cast<std::int64_t>(i));
      row.clear();
      for (std::int64_t j = kr.first; j <= kr.last; ++j)
        row.push_back(relative_logit<T>(rope, e, positions[i], q.subspan((i * G + h) * D, D),
                                        positions[static_cast<std::size_t>(j)], k.subspan(static_cast<std::size_t>(j) * D, D)));
      std::copy(row.begin(), row.end(), scores.begin() + static_cast<std::ptrdiff_t>(h * static_cast<std::size_t>(layout.total()) +
                                                                                    static_cast<std::size_t>(layout.offset(static_cast<std::int64_t>(i)))));
      if (v.empty()) continue;
      const T* sink = e.sinks.empty() ? nullptr : &e.sinks[h];
      softmax_output<T>(row, sink, v.subspan(static_cast<std::size_t>(kr.first) * dv, static_cast<std::size_t>(kr.size()) * dv),
                        static_cast<int>(dv), std::span<T>(outputs).subspan((i * G + h) * dv, dv));
    }
  }
}

}  // namespace ropecheck::attention
