// The matrix view agrees with the elementwise view, layouts agree under the channel
// permutation, and the maps are orthogonal, all to the working precision.
//
// Error model (MPFR at p bits, every operation correctly rounded, u = 2^-p):
// - R(m) x vs rope_apply: both form a*c - b*s and b*c + a*s from the same c, s; at most a
//   rounding of each product and of the sum differs: |diff| <= 4u (|a| + |b|).
// - R^T R = I: each entry is c^2 + s^2 (or c*s - s*c) with c, s within u of the truth:
//   |entry - I| <= 8u.
// - R(a) R(b) = R(a + b): the angle a*w carries a relative error of ~2u, i.e. an absolute
//   error <= 2u |angle|; cos/sin add u; products and sums add 4u: tolerance 8u (1 + |angle|).
// - PE(t + k) = A_k PE(t): each output is one 2-term dot product of such values: 8u (1 + |angle|).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "ropecheck/reference/matrix_view.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "test_scale.hpp"

namespace ropecheck {
namespace {

// A small valid RoPE spec of any layout, partial rotary and scaling that needs no extra lists; head_dim
// up to 32 (up to 8 at the small test scale: the dense MPFR matrix products cost head_dim^3).
rc::Gen<RopeSpec> gen_rope_spec() {
  return rc::gen::exec([] {
    RopeSpec r;
    r.head_dim = 2 * *rc::gen::inRange(1, test::scaled(17, 5));
    r.rotary_dim = 2 * *rc::gen::inRange(1, r.head_dim / 2 + 1);
    r.base = *rc::gen::element(1.5, 100.0, 10000.0, 500000.0, 1e6, 5e6);
    r.layout = *rc::gen::element(RopeLayout::half_split, RopeLayout::interleaved);
    r.max_position_embeddings = 4096;
    const int kind = *rc::gen::inRange(0, 4);
    if (kind == 1) {
      r.scaling.type = ScalingType::linear;
      r.scaling.factor = *rc::gen::element(0.5, 2.0, 8.0);
    } else if (kind == 2) {
      r.scaling.type = ScalingType::yarn;
      r.scaling.factor = *rc::gen::element(4.0, 32.0);
      r.scaling.original_max_position_embeddings = 1024;
    } else if (kind == 3) {
      r.scaling.type = ScalingType::proportional;
    }
    return r;
  });
}

rc::Gen<std::int64_t> gen_position() {
  return rc::gen::oneOf(rc::gen::inRange<std::int64_t>(-300, 300),
                        rc::gen::inRange<std::int64_t>(-(std::int64_t{1} << 24), (std::int64_t{1} << 24) + 1));
}

double to_d(const Real& v) { return v.convert_to<double>(); }

struct Env {
  unsigned bits;
  double u;
};

Env precision_for(double max_angle) {
  const unsigned bits = working_precision_bits(53, max_angle);
  return {bits, std::ldexp(1.0, -static_cast<int>(bits))};
}

RC_GTEST_PROP(MatrixView, RotationMatrixEqualsElementwise, ()) {
  const RopeSpec r = *gen_rope_spec();
  const std::int64_t m = *gen_position();
  const Env env = precision_for(rope_max_abs_angle(r, std::nullopt, m));
  ScopedPrecision prec(env.bits);
  const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
  RopeFrequencies<Real> no_att = f;
  no_att.attention_factor = Real(1);
  std::vector<Real> x;
  for (int i = 0; i < r.head_dim; ++i) x.push_back(Real(*rc::gen::inRange(-64, 65)) / 8);
  const std::vector<Real> y = rope_apply<Real>(r, no_att, Position::uniform(m), x);
  const Matrix<Real> R = rotation_matrix(r, f, Position::uniform(m));
  Vector<Real> xv(r.head_dim);
  for (int i = 0; i < r.head_dim; ++i) xv(i) = x[static_cast<std::size_t>(i)];
  const Vector<Real> yv = R * xv;
  for (int j = 0; j < rope_pairs(r); ++j) {
    const auto [a, b] = pair_channels(r, j);
    const double scale = to_d(abs(xv(a)) + abs(xv(b)));
    RC_ASSERT(to_d(abs(yv(a) - y[static_cast<std::size_t>(a)])) <= 4 * env.u * scale);
    RC_ASSERT(to_d(abs(yv(b) - y[static_cast<std::size_t>(b)])) <= 4 * env.u * scale);
  }
  for (int c = rope_block_channels(r); c < r.head_dim; ++c) RC_ASSERT(yv(c) == x[static_cast<std::size_t>(c)]);
}

// The complex view (Su et al.): the pair as x_a + i x_b multiplied by att e^{i theta}, evaluated in polar
// form att r e^{i(phi + theta)} (r = |x|, phi = atan2(x_b, x_a)), equals the elementwise view. (Moved
// here from the property suite's `reference_views`, which never called its target.)
// Tolerance, MPFR at p bits (u = 2^-p), the same theta in both: atan2 (pi u), the sum phi + theta
// (u (pi + |theta|)), cos / sin (u), the modulus (2 u), att and the products (2 u), the elementwise
// view's own products and sum (4 u): (16 + |theta|) u M, M = att (|x_a| + |x_b|), with pi < 4.
RC_GTEST_PROP(MatrixView, ComplexPolarViewEqualsElementwise, ()) {
  const RopeSpec r = *gen_rope_spec();
  const std::int64_t m = *gen_position();
  const Env env = precision_for(rope_max_abs_angle(r, std::nullopt, m));
  ScopedPrecision prec(env.bits);
  const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
  std::vector<Real> x;
  for (int i = 0; i < r.head_dim; ++i) x.push_back(Real(*rc::gen::inRange(-64, 65)) / 8);
  const std::vector<Real> y = rope_apply<Real>(r, f, Position::uniform(m), x);
  for (int j = 0; j < rope_pairs(r); ++j) {
    const auto [ia, ib] = pair_channels(r, j);
    const auto a = static_cast<std::size_t>(ia), b = static_cast<std::size_t>(ib);
    const Real theta = rope_angle(r, f, Position::uniform(m), j);
    const Real rad = sqrt(x[a] * x[a] + x[b] * x[b]);
    const Real phi = atan2(x[b], x[a]);
    const Real za = f.attention_factor * rad * cos(phi + theta), zb = f.attention_factor * rad * sin(phi + theta);
    const double M = to_d(f.attention_factor * (abs(x[a]) + abs(x[b])));
    const double tol = (16 + std::fabs(to_d(theta))) * env.u * M;
    RC_ASSERT(to_d(abs(za - y[a])) <= tol);
    RC_ASSERT(to_d(abs(zb - y[b])) <= tol);
  }
}

// A complex view that rotates by the wrong angle is caught by the same comparison (the test can fail).
TEST(MatrixView, ComplexPolarViewComparisonHasTeeth) {
  RopeSpec r;
  r.head_dim = 4;
  r.rotary_dim = 4;
  r.base = 10000;
  ScopedPrecision prec(128);
  const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
  const std::vector<Real> x = {Real(1), Real(0.5), Real(-0.25), Real(2)};
  const std::vector<Real> y = rope_apply<Real>(r, f, Position::uniform(3), x);
  const auto [ia, ib] = pair_channels(r, 0);
  const auto a = static_cast<std::size_t>(ia), b = static_cast<std::size_t>(ib);
  const Real wrong = rope_angle(r, f, Position::uniform(4), 0);  // position 4 instead of 3
  const Real rad = sqrt(x[a] * x[a] + x[b] * x[b]), phi = atan2(x[b], x[a]);
  const double tol = (16 + 4.0) * std::ldexp(1.0, -128) * to_d(abs(x[a]) + abs(x[b]));
  EXPECT_GT(to_d(abs(rad * cos(phi + wrong) - y[a])), 1e6 * tol);
}

RC_GTEST_PROP(MatrixView, RotationIsOrthogonalWithUnitDeterminant, ()) {
  const RopeSpec r = *gen_rope_spec();
  const std::int64_t m = *gen_position();
  const Env env = precision_for(rope_max_abs_angle(r, std::nullopt, m));
  ScopedPrecision prec(env.bits);
  const Matrix<Real> R = rotation_matrix(r, rope_frequencies<Real>(r), Position::uniform(m));
  const Matrix<Real> E = R.transpose() * R - Matrix<Real>::Identity(r.head_dim, r.head_dim);
  RC_ASSERT(to_d(E.cwiseAbs().maxCoeff()) <= 8 * env.u);
  // det of a block-diagonal rotation = product of the 2x2 determinants c^2 + s^2.
  RC_ASSERT(to_d(abs(R.determinant() - 1)) <= 8 * env.u * r.head_dim);
}

RC_GTEST_PROP(MatrixView, InterleavedEqualsHalfSplitUnderPermutation, ()) {
  RopeSpec half = *gen_rope_spec();
  half.layout = RopeLayout::half_split;
  RopeSpec inter = half;
  inter.layout = RopeLayout::interleaved;
  const std::int64_t m = *gen_position();
  ScopedPrecision prec(precision_for(rope_max_abs_angle(half, std::nullopt, m)).bits);
  const RopeFrequencies<Real> f = rope_frequencies<Real>(half);
  const Matrix<Real> P = interleaved_to_half_split<Real>(half.head_dim, rope_block_channels(half));
  const Matrix<Real> Rh = rotation_matrix(half, f, Position::uniform(m));
  const Matrix<Real> Ri = rotation_matrix(inter, f, Position::uniform(m));
  // Permuting by 0/1 matrices is exact: the two layouts are the same rotation bit for bit.
  RC_ASSERT(Rh == P * Ri * P.transpose());
}

RC_GTEST_PROP(MatrixView, RotationsCompose, ()) {
  const RopeSpec r = *gen_rope_spec();
  const std::int64_t a = *gen_position(), b = *gen_position();
  const double max_angle = rope_max_abs_angle(r, std::nullopt, std::abs(a) + std::abs(b));
  const Env env = precision_for(max_angle);
  ScopedPrecision prec(env.bits);
  const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
  const Matrix<Real> lhs = rotation_matrix(r, f, Position::uniform(a)) * rotation_matrix(r, f, Position::uniform(b));
  const Matrix<Real> rhs = rotation_matrix(r, f, Position::uniform(a + b));
  RC_ASSERT(to_d((lhs - rhs).cwiseAbs().maxCoeff()) <= 8 * env.u * (1 + max_angle));
  // R(-m) undoes R(m).
  const Matrix<Real> back = rotation_matrix(r, f, Position::uniform(-a)) * rotation_matrix(r, f, Position::uniform(a));
  RC_ASSERT(to_d((back - Matrix<Real>::Identity(r.head_dim, r.head_dim)).cwiseAbs().maxCoeff()) <= 8 * env.u);
}

RC_GTEST_PROP(MatrixView, MultimodalWithEqualStreamsIsOneDimensional, ()) {
  RopeSpec r = *gen_rope_spec();
  const int pairs = rope_pairs(r);
  const int t = *rc::gen::inRange(0, pairs + 1);
  const int h = *rc::gen::inRange(0, pairs - t + 1);
  RopeSpec mm = r;
  mm.mrope = *rc::gen::element(MropeMode::chunked, MropeMode::interleaved);
  mm.mrope_section = {t, h, pairs - t - h};
  const std::int64_t m = *gen_position();
  ScopedPrecision prec(precision_for(rope_max_abs_angle(r, std::nullopt, m)).bits);
  const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
  RC_ASSERT(rotation_matrix(mm, f, Position::uniform(m)) == rotation_matrix(r, f, Position::uniform(m)));
}

rc::Gen<SinusoidalSpec> gen_sinusoidal_spec(bool even_only) {
  return rc::gen::exec([even_only] {
    SinusoidalSpec s;
    s.d_model = *rc::gen::inRange(2, test::scaled(40, 12));  // 2 .. 39 (11 at the small test scale)
    s.frequencies = *rc::gen::element(SinusoidalFrequencies::vaswani, SinusoidalFrequencies::half_dim_minus_one);
    if (even_only && s.frequencies == SinusoidalFrequencies::vaswani && s.d_model % 2) ++s.d_model;
    s.layout = *rc::gen::element(SinusoidalLayout::interleaved, SinusoidalLayout::concatenated);
    s.base = *rc::gen::element(100.0, 10000.0, 1e6);
    s.position_offset = *rc::gen::element<std::int64_t>(0, 2);
    return s;
  });
}

RC_GTEST_PROP(MatrixView, SinusoidalShiftMapIsLinearAndOrthogonal, ()) {
  const SinusoidalSpec s = *gen_sinusoidal_spec(true);
  const std::int64_t t = *rc::gen::inRange<std::int64_t>(0, std::int64_t{1} << 24);
  const std::int64_t k = *rc::gen::inRange<std::int64_t>(-100000, 100000);
  const double max_angle = sinusoidal_max_abs_angle(s, t + std::abs(k));
  const Env env = precision_for(max_angle);
  ScopedPrecision prec(env.bits);
  const std::vector<Real> w = sinusoidal_frequencies<Real>(s);
  const Matrix<Real> A = sinusoidal_shift_map(s, w, k);
  const std::vector<Real> pt = sinusoidal_row(s, w, t), ptk = sinusoidal_row(s, w, t + k);
  Vector<Real> v(s.d_model);
  for (int i = 0; i < s.d_model; ++i) v(i) = pt[static_cast<std::size_t>(i)];
  const Vector<Real> mapped = A * v;
  for (int i = 0; i < s.d_model; ++i)
    RC_ASSERT(to_d(abs(mapped(i) - ptk[static_cast<std::size_t>(i)])) <= 8 * env.u * (1 + max_angle));
  const Matrix<Real> E = A.transpose() * A - Matrix<Real>::Identity(s.d_model, s.d_model);
  RC_ASSERT(to_d(E.cwiseAbs().maxCoeff()) <= 8 * env.u);
}

TEST(MatrixView, ShiftMapUndefinedForUnpairedSine) {
  SinusoidalSpec s;
  s.d_model = 7;
  s.layout = SinusoidalLayout::interleaved;
  s.frequencies = SinusoidalFrequencies::vaswani;
  const std::vector<double> w = sinusoidal_frequencies<double>(s);
  EXPECT_THROW(sinusoidal_shift_map(s, w, 3), SpecError);
}

TEST(MatrixView, RotationMatrixKnownValues) {
  // head_dim 4, half-split: pairs (0, 2) and (1, 3); base 100 so inv = [1, 0.1].
  RopeSpec r;
  r.head_dim = r.rotary_dim = 4;
  r.base = 100;
  const RopeFrequencies<double> f = rope_frequencies<double>(r);
  const Matrix<double> R = rotation_matrix(r, f, Position::uniform(2));
  EXPECT_DOUBLE_EQ(R(0, 0), std::cos(2.0));
  EXPECT_DOUBLE_EQ(R(0, 2), -std::sin(2.0));
  EXPECT_DOUBLE_EQ(R(2, 0), std::sin(2.0));
  EXPECT_DOUBLE_EQ(R(1, 3), -std::sin(0.2));
  EXPECT_DOUBLE_EQ(R(0, 1), 0.0);
  const Matrix<double> P = interleaved_to_half_split<double>(4, 4);
  EXPECT_EQ(P(2, 1), 1.0);  // interleaved channel 1 = (pair 0, second) -> half-split channel 2
  EXPECT_EQ(P(1, 2), 1.0);
}

}  // namespace
}  // namespace ropecheck
