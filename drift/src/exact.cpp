#include "ropecheck/drift/exact.hpp"

#include <mpfr.h>

#include <cmath>

#include "ropecheck/kernels/scalar_recipes.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/scalar.hpp"

namespace ropecheck::drift {

namespace {

// Working precision of the constructor and of the fallback: frequencies to 400 bits leave the
// triple-double split (relative error <= 2^-159) as the only loss.
constexpr mpfr_prec_t kBits = 400;
// Relative error of the triple-double inverse frequency handed to sincos_scaled.
constexpr double kInvRelErr = 0x1p-150;

// An mpfr_t with an explicit precision, cleared on scope exit.
struct Mp {
  mpfr_t v;
  explicit Mp(mpfr_prec_t bits) { mpfr_init2(v, bits); }
  ~Mp() { mpfr_clear(v); }
  Mp(const Mp&) = delete;
  Mp& operator=(const Mp&) = delete;
};

std::array<double, 3> triple_of(mpfr_srcptr x) {
  Mp t(kBits + 64);
  mpfr_set(t.v, x, MPFR_RNDN);
  std::array<double, 3> out{};
  for (double& part : out) {
    part = mpfr_get_d(t.v, MPFR_RNDN);
    mpfr_sub_d(t.v, t.v, part, MPFR_RNDN);  // exact at this precision
  }
  return out;
}

DD dd_of(mpfr_srcptr x) {
  Mp t(kBits + 64);
  const double hi = mpfr_get_d(x, MPFR_RNDN);
  mpfr_sub_d(t.v, x, hi, MPFR_RNDN);
  return {hi, mpfr_get_d(t.v, MPFR_RNDN)};
}

}  // namespace

ExactRope::ExactRope(const RopeSpec& rope, std::optional<std::int64_t> seq_len) : spec_(rope) {
  ScopedPrecision prec(static_cast<unsigned>(kBits));
  const RopeFrequencies<Real> f = rope_frequencies<Real>(rope, seq_len);
  inv3_.reserve(f.inv_freq.size());
  for (const Real& w : f.inv_freq) inv3_.push_back(triple_of(w.backend().data()));
  att_ = dd_of(f.attention_factor.backend().data());
  long_factors_ = f.long_factors;
}

void ExactRope::cos_sin(const Position& p, int j, DD& cos_out, DD& sin_out) const {
  const auto& inv = inv3_[static_cast<std::size_t>(j)];
  const auto pos = static_cast<double>(stream_position(spec_, p, j));
  if (const std::optional<SinCosDD> r = sincos_scaled(pos, inv, kInvRelErr)) {
    cos_out = r->cos;
    sin_out = r->sin;
    return;
  }
  // Outside the fast path's range (tiny angles of near-zero frequencies): MPFR at kBits bits, the
  // angle p * (i0 + i1 + i2) formed exactly.
  Mp w(kBits), theta(kBits), s(kBits), c(kBits);
  mpfr_set_d(w.v, inv[0], MPFR_RNDN);
  mpfr_add_d(w.v, w.v, inv[1], MPFR_RNDN);
  mpfr_add_d(w.v, w.v, inv[2], MPFR_RNDN);
  mpfr_mul_d(theta.v, w.v, pos, MPFR_RNDN);
  mpfr_sin_cos(s.v, c.v, theta.v, MPFR_RNDN);
  cos_out = dd_of(c.v);
  sin_out = dd_of(s.v);
}

void ExactRope::cos_sin_row(const Position& p, std::span<DD> cos_out, std::span<DD> sin_out) const {
  for (int j = 0; j < pairs(); ++j)
    cos_sin(p, j, cos_out[static_cast<std::size_t>(j)], sin_out[static_cast<std::size_t>(j)]);
}

double wrapped_angle_error(double kernel, const DD& c, const DD& s) {
  if (!std::isfinite(kernel)) return std::nan("");
  // sin(x - t) = sin x cos t - cos x sin t, cos(x - t) = cos x cos t + sin x sin t. sin x and cos x
  // of a double x come from libm (within an ulp); the exact side contributes its DD head and tail.
  const double sx = std::sin(kernel), cx = std::cos(kernel);
  const double ct = c.hi + c.lo, st = s.hi + s.lo;
  const double sd = std::fma(sx, ct, -cx * st);
  const double cd = std::fma(cx, ct, sx * st);
  return std::atan2(sd, cd);
}

RotatedPair exact_rotation(double a, double b, const DD& c, const DD& s, const DD& att) {
  // a c - b s and b c + a s in DD (a, b exact doubles), then the attention factor.
  const DD ya = dd::add(dd::mul(c, a), dd::neg(dd::mul(s, b)));
  const DD yb = dd::add(dd::mul(c, b), dd::mul(s, a));
  return {dd::mul(ya, att), dd::mul(yb, att)};
}

}  // namespace ropecheck::drift
