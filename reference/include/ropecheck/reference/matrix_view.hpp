// The matrix view (Eigen over any scalar, MPFR included): RoPE's rotation R(m) as a dense
// block-diagonal matrix in either layout, and the sinusoidal shift map A_k with
// PE(t + k) = A_k PE(t) for every t.
#pragma once

#include <Eigen/Dense>
#include <boost/multiprecision/eigen.hpp>

#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"

namespace ropecheck {

template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
template <class T>
using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;

// R(m), head_dim x head_dim: a 2x2 rotation [[c, -s], [s, c]] on each pair's channels,
// identity on pass-through channels. The attention factor is not included (it is a scalar).
template <class T>
Matrix<T> rotation_matrix(const RopeSpec& r, const RopeFrequencies<T>& f, const Position& pos) {
  Matrix<T> R = Matrix<T>::Identity(r.head_dim, r.head_dim);
  std::vector<T> c, s;
  rope_cos_sin(r, f, pos, c, s);
  for (int j = 0; j < rope_pairs(r); ++j) {
    const auto [a, b] = pair_channels(r, j);
    const T& cj = c[static_cast<std::size_t>(j)];
    const T& sj = s[static_cast<std::size_t>(j)];
    R(a, a) = cj;
    R(a, b) = -sj;
    R(b, a) = sj;
    R(b, b) = cj;
  }
  return R;
}

// Permutation P with P * x_interleaved = x_half_split for a block of `channels` channels
// (interleaved channel 2j + c maps to half-split channel c * channels/2 + j; the Meta -> HF
// weight permutation). Channels past `channels` map to themselves.
template <class T>
Matrix<T> interleaved_to_half_split(int head_dim, int channels) {
  Matrix<T> P = Matrix<T>::Zero(head_dim, head_dim);
  const int half = channels / 2;
  for (int i = 0; i < head_dim; ++i) {
    const int to = i < channels ? (i % 2) * half + i / 2 : i;
    P(to, i) = T(1);
  }
  return P;
}

// A_k, d_model x d_model, with PE(t + k) = A_k PE(t): on each (sin, cos) column pair of
// frequency w the map (sin, cos) -> (sin cos(kw) + cos sin(kw), cos cos(kw) - sin sin(kw));
// identity on zero columns. Throws SpecError where a sine column has no cosine partner
// (odd d_model with Vaswani frequencies): no t-independent linear map exists there.
template <class T>
Matrix<T> sinusoidal_shift_map(const SinusoidalSpec& s, const std::vector<T>& w, std::int64_t k) {
  using std::cos;
  using std::sin;
  const int d = s.d_model;
  Matrix<T> A = Matrix<T>::Zero(d, d);
  std::vector<int> sin_col(w.size(), -1), cos_col(w.size(), -1);
  for (int c = 0; c < d; ++c) {
    const SinusoidalColumn col = sinusoidal_column(s, c);
    if (col.kind == SinusoidalKind::zero) A(c, c) = T(1);
    if (col.kind == SinusoidalKind::sine) sin_col[static_cast<std::size_t>(col.frequency)] = c;
    if (col.kind == SinusoidalKind::cosine) cos_col[static_cast<std::size_t>(col.frequency)] = c;
  }
  const T kk = from_int<T>(k);
  for (std::size_t i = 0; i < w.size(); ++i) {
    const int cs = sin_col[i], cc = cos_col[i];
    if (cs < 0 || cc < 0)
      throw SpecError("sinusoidal shift map undefined: column " + std::to_string(cs < 0 ? cc : cs) +
                      " has no sine/cosine partner (odd d_model = " + std::to_string(d) +
                      " with vaswani frequencies)");
    const T ck = cos(kk * w[i]), sk = sin(kk * w[i]);
    A(cs, cs) = ck;
    A(cs, cc) = sk;
    A(cc, cc) = ck;
    A(cc, cs) = -sk;
  }
  return A;
}

}  // namespace ropecheck
