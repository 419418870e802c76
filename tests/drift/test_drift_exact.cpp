// drift/exact.hpp: the double-double exact side against the MPFR reference, the wrapped angle
// error and the exact rotation.
// Error model: ExactRope's cos / sin are within 2^-100 + 2^-146 |theta| of the truth (fast_rounding.hpp)
// and the MPFR reference at 300 bits within 2^-250 |theta|-relative, so they agree to 1e-28 for
// |theta| <= 2^25; the rotation (products and sums of DD values, ~2^-104 relative each) to 1e-27 M.
// wrapped_angle_error uses libm sin / cos of a double (within an ulp), so it is good to ~4e-16 absolute.
// Random positions come from a fixed SplitMix64 seed (kSeed, printed on failure).
#include <gtest/gtest.h>

#include "test_paths.hpp"

#include <cmath>
#include <numbers>

#include "ropecheck/drift/exact.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/core/spec_json.hpp"

namespace rd = ropecheck::drift;
using namespace ropecheck;

namespace {

constexpr std::uint64_t kSeed = 20261121;

std::uint64_t next(std::uint64_t& s) {
  s += 0x9E3779B97F4A7C15ull;
  std::uint64_t z = s;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double value(const DD& d) { return d.hi + d.lo; }

}  // namespace

TEST(DriftExact, CosSinMatchMpfrOnPresets) {
  for (const char* preset : {"llama-3.1-8b", "llama-2-7b", "qwen2.5-7b-yarn", "phi-3.5-mini", "qwen2-vl-7b", "gemma-3-4b-global"}) {
    const EncodingSpec spec = load_preset(preset);
    const rd::ExactRope ex(spec.rope, std::int64_t{131072});
    ScopedPrecision prec(300);
    const RopeFrequencies<Real> f = rope_frequencies<Real>(spec.rope, std::int64_t{131072});
    EXPECT_NEAR(ex.attention_factor_f64(), static_cast<double>(f.attention_factor), 1e-15) << preset;
    std::uint64_t s = kSeed;
    for (int k = 0; k < 12; ++k) {
      const auto p = static_cast<std::int64_t>(next(s) % (std::uint64_t{1} << 24));
      std::vector<Real> c, sn;
      rope_cos_sin(spec.rope, f, Position::uniform(p), c, sn);
      for (int j = 0; j < ex.pairs(); ++j) {
        DD dc, ds;
        ex.cos_sin(Position::uniform(p), j, dc, ds);
        const Real ec = c[static_cast<std::size_t>(j)] - Real(dc.hi) - Real(dc.lo);
        const Real es = sn[static_cast<std::size_t>(j)] - Real(ds.hi) - Real(ds.lo);
        ASSERT_LT(std::fabs(static_cast<double>(ec)), 1e-28) << preset << " p=" << p << " pair " << j << " seed " << kSeed;
        ASSERT_LT(std::fabs(static_cast<double>(es)), 1e-28) << preset << " p=" << p << " pair " << j << " seed " << kSeed;
      }
    }
  }
}

TEST(DriftExact, ZeroFrequencyPairsAndPositionZero) {
  // Position 0 gives the exact angle 0 for every pair; proportional RoPE's pairs past rope_angles
  // have w = 0 and the exact angle 0 at every position (outside the fast engine's range: MPFR path).
  const EncodingSpec llama = load_preset("llama-3.1-8b");
  const rd::ExactRope ex(llama.rope, std::nullopt);
  for (int j = 0; j < ex.pairs(); ++j) {
    DD c, s;
    ex.cos_sin(Position::uniform(0), j, c, s);
    EXPECT_EQ(value(c), 1.0);
    EXPECT_EQ(value(s), 0.0);
  }
  const EncodingSpec prop = load_spec_file(std::string(ropecheck::test::specs_dir()) + "/x-proportional.json");
  const rd::ExactRope ep(prop.rope, std::nullopt);
  int zero_pairs = 0;
  for (int j = 0; j < ep.pairs(); ++j) {
    if (ep.inv_freq(j) != 0) continue;
    ++zero_pairs;
    DD c, s;
    ep.cos_sin(Position::uniform(123456), j, c, s);
    EXPECT_EQ(value(c), 1.0) << "pair " << j;
    EXPECT_EQ(value(s), 0.0) << "pair " << j;
  }
  EXPECT_GT(zero_pairs, 0);
}

TEST(DriftExact, WrappedAngleError) {
  const double pi = std::numbers::pi;
  std::uint64_t s = kSeed;
  for (int k = 0; k < 2000; ++k) {
    const double theta = std::ldexp(static_cast<double>(next(s) >> 11), -53) * 2e5;  // [0, 2e5) rad
    const double delta = (std::ldexp(static_cast<double>(next(s) >> 11), -53) - 0.5) * std::ldexp(1.0, -(k % 40));
    // Exact cos / sin of theta from MPFR.
    ScopedPrecision prec(200);
    const Real t = Real(theta);
    const DD c{static_cast<double>(cos(t)), static_cast<double>(Real(cos(t) - Real(static_cast<double>(cos(t)))))};
    const DD sn{static_cast<double>(sin(t)), static_cast<double>(Real(sin(t) - Real(static_cast<double>(sin(t)))))};
    // A kernel angle theta + delta, reduced into [-pi, pi] the way a recipe reports it.
    const double cand = std::remainder(theta + delta, 2 * pi);
    const double e = rd::wrapped_angle_error(cand, c, sn);
    // remainder's own rounding and theta + delta's rounding: <= 2 ulp of 2e5 = 6e-11.
    ASSERT_NEAR(e, delta, 1e-10) << "theta " << theta << " delta " << delta << " seed " << kSeed;
  }
  // Half a turn off is +-pi; not finite is NaN.
  const DD one{1.0, 0.0}, zero{0.0, 0.0};
  EXPECT_NEAR(std::fabs(rd::wrapped_angle_error(pi, one, zero)), pi, 1e-15);
  EXPECT_TRUE(std::isnan(rd::wrapped_angle_error(std::nan(""), one, zero)));
  EXPECT_TRUE(std::isnan(rd::wrapped_angle_error(INFINITY, one, zero)));
}

TEST(DriftExact, RotationMatchesReferenceApply) {
  const EncodingSpec spec = load_preset("qwen2.5-7b-yarn");  // attention factor != 1
  const rd::ExactRope ex(spec.rope, std::nullopt);
  ScopedPrecision prec(300);
  const RopeFrequencies<Real> f = rope_frequencies<Real>(spec.rope);
  std::uint64_t s = kSeed;
  for (int k = 0; k < 6; ++k) {
    const auto p = static_cast<std::int64_t>(next(s) % 1000000);
    std::vector<Real> x;
    std::vector<double> xd;
    for (int d = 0; d < spec.rope.head_dim; ++d) {
      const double v = static_cast<double>(static_cast<std::int64_t>(next(s) % 512) - 256) / 64.0;
      xd.push_back(v);
      x.emplace_back(v);
    }
    const std::vector<Real> ref = rope_apply<Real>(spec.rope, f, Position::uniform(p), x);
    for (int j = 0; j < ex.pairs(); ++j) {
      const auto [ia, ib] = pair_channels(spec.rope, j);
      DD c, sn;
      ex.cos_sin(Position::uniform(p), j, c, sn);
      const rd::RotatedPair y = rd::exact_rotation(xd[static_cast<std::size_t>(ia)], xd[static_cast<std::size_t>(ib)], c,
                                                   sn, ex.attention_factor());
      EXPECT_NEAR(static_cast<double>(ref[static_cast<std::size_t>(ia)] - Real(y.a.hi) - Real(y.a.lo)), 0.0, 1e-26)
          << "p=" << p << " pair " << j;
      EXPECT_NEAR(static_cast<double>(ref[static_cast<std::size_t>(ib)] - Real(y.b.hi) - Real(y.b.lo)), 0.0, 1e-26)
          << "p=" << p << " pair " << j;
      // dd_error: the difference of a double and a DD, accurate near agreement.
      EXPECT_EQ(rd::dd_error(y.a.hi, y.a), -y.a.lo);
    }
  }
}
