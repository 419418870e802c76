// Worked numbers from variants.md / precision.md, reproduced by the exact reference.
#include <gtest/gtest.h>

#include <cmath>

#include "ropecheck/formulas/decay.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"

namespace ropecheck {
namespace {

// Working precision for these tests: plenty for 30-digit comparisons.
class ReferenceTest : public ::testing::Test {
 protected:
  ScopedPrecision precision_{256};
};

double d(const Real& v) { return v.convert_to<double>(); }

TEST_F(ReferenceTest, Llama31BandsAre29_6_29) {
  const auto b = llama3_band_counts<Real>(load_preset("llama-3.1-8b").rope);
  EXPECT_EQ(b[0], 29);
  EXPECT_EQ(b[1], 6);
  EXPECT_EQ(b[2], 29);
}

TEST_F(ReferenceTest, Llama32BandsAre15_3_14AndFactor32) {
  const RopeSpec r = load_preset("llama-3.2-1b").rope;
  const auto b = llama3_band_counts<Real>(r);
  EXPECT_EQ(b[0], 15);
  EXPECT_EQ(b[1], 3);
  EXPECT_EQ(b[2], 14);
  // The lowest frequency is divided by 32 (not the 8 Meta's reference hard-codes).
  const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
  const Real unscaled = pow(Real(500000), -Real(62) / Real(64));
  EXPECT_EQ(f.inv_freq.back(), unscaled / 32);
}

TEST_F(ReferenceTest, Llama3SmoothedBandInterpolates) {
  const RopeSpec r = load_preset("llama-3.1-8b").rope;
  const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
  for (int j = 0; j < 64; ++j) {
    const Real inv = pow(Real(500000), -Real(2 * j) / Real(128));
    const Real& got = f.inv_freq[static_cast<std::size_t>(j)];
    switch (llama3_band(r, inv)) {
      case 0: EXPECT_EQ(got, inv) << j; break;
      case 2: EXPECT_EQ(got, inv / 8) << j; break;
      default:
        EXPECT_LT(got, inv) << j;
        EXPECT_GT(got, inv / 8) << j;
    }
  }
}

TEST_F(ReferenceTest, DeepSeekV3YarnRangeAndMscale) {
  const RopeSpec r = load_preset("deepseek-v3").rope;
  const YarnRange<Real> yr = yarn_correction_range<Real>(r);
  EXPECT_EQ(yr.low, Real(10));
  EXPECT_EQ(yr.high, Real(23));
  EXPECT_NEAR(d(yarn_get_mscale(Real(40), Real(1))), 1.368888, 5e-7);
  // mscale == mscale_all_dim: cos/sin are not scaled.
  EXPECT_EQ(rope_frequencies<Real>(r).attention_factor, Real(1));
}

TEST_F(ReferenceTest, GptOssYarnUntruncated) {
  const RopeSpec r = load_preset("gpt-oss-20b").rope;
  const YarnRange<Real> yr = yarn_correction_range<Real>(r);
  EXPECT_NEAR(d(yr.low), 8.092779, 5e-7);
  EXPECT_NEAR(d(yr.high), 17.398025, 5e-7);
  EXPECT_NEAR(d(rope_frequencies<Real>(r).attention_factor), 1.346574, 5e-7);
}

TEST_F(ReferenceTest, Qwen25YarnRecipe) {
  const RopeSpec r = load_preset("qwen2.5-7b-yarn").rope;
  const YarnRange<Real> yr = yarn_correction_range<Real>(r);
  EXPECT_EQ(yr.low, Real(23));
  EXPECT_EQ(yr.high, Real(40));
  EXPECT_NEAR(d(rope_frequencies<Real>(r).attention_factor), 1.138629, 5e-7);
}

TEST_F(ReferenceTest, YarnFrequenciesLieBetweenInterpolatedAndOriginal) {
  for (const char* name : {"deepseek-v3", "gpt-oss-20b", "qwen2.5-7b-yarn"}) {
    const RopeSpec r = load_preset(name).rope;
    const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
    const Real factor = Real(effective_factor(r));
    const YarnRange<Real> yr = yarn_correction_range<Real>(r);
    for (int j = 0; j < rope_pairs(r); ++j) {
      const Real inv = pow(Real(r.base), -Real(2 * j) / Real(r.rotary_dim));
      const Real& got = f.inv_freq[static_cast<std::size_t>(j)];
      EXPECT_LE(got, inv) << name << " pair " << j;
      EXPECT_GE(got, inv / factor) << name << " pair " << j;
      if (Real(j) <= yr.low) {
        EXPECT_EQ(got, inv) << name << " pair " << j;
      }
      if (Real(j) >= yr.high) {
        EXPECT_EQ(got, inv / factor) << name << " pair " << j;
      }
    }
  }
}

TEST_F(ReferenceTest, Phi3LongropeAttentionFactor) {
  const RopeSpec r = load_preset("phi-3.5-mini").rope;
  EXPECT_EQ(effective_factor(r), 32.0);
  const Real expected = sqrt(Real(17) / Real(12));  // sqrt(1 + ln 32 / ln 4096)
  EXPECT_LT(d(abs(longrope_attention_factor<Real>(r) - expected)), 1e-70);
  EXPECT_NEAR(d(expected), 1.1902380714, 5e-11);
}

TEST_F(ReferenceTest, LongropeSwitchesListsAfterOriginalContext) {
  const RopeSpec r = load_preset("phi-3.5-mini").rope;
  const auto short_f = rope_frequencies<Real>(r, 4096);
  const auto long_f = rope_frequencies<Real>(r, 4097);
  EXPECT_FALSE(short_f.long_factors);
  EXPECT_TRUE(long_f.long_factors);
  for (int j = 0; j < 48; ++j) {
    const Real base_pow = pow(Real(10000), Real(2 * j) / Real(96));
    EXPECT_LT(d(abs(short_f.inv_freq[static_cast<std::size_t>(j)] * Real(r.scaling.short_factor[static_cast<std::size_t>(j)]) * base_pow - 1)), 1e-70);
    EXPECT_LT(d(abs(long_f.inv_freq[static_cast<std::size_t>(j)] * Real(r.scaling.long_factor[static_cast<std::size_t>(j)]) * base_pow - 1)), 1e-70);
  }
}

TEST_F(ReferenceTest, FairseqLowestFrequencyIsExactly1e4) {
  const SinusoidalSpec s = load_preset("fairseq-transformer").sinusoidal;
  const std::vector<Real> w = sinusoidal_frequencies<Real>(s);
  ASSERT_EQ(w.size(), 256u);
  EXPECT_LT(d(abs(w.back() - Real(1) / 10000)), 1e-70);
  // Vaswani's lowest for d = 512 is 10000^(-510/512) = 1.0366e-4.
  const std::vector<Real> v = sinusoidal_frequencies<Real>(load_preset("transformer-base").sinusoidal);
  EXPECT_NEAR(d(v.back()), 1.0366e-4, 5e-9);
}

TEST_F(ReferenceTest, FairseqPositionsStartAtPaddingIdxPlusOne) {
  const SinusoidalSpec s = load_preset("fairseq-transformer").sinusoidal;
  const std::vector<Real> w = sinusoidal_frequencies<Real>(s);
  const std::vector<Real> row = sinusoidal_row(s, w, 0);
  EXPECT_EQ(row[0], sin(Real(2) * w[0]));    // first real token: angle uses padding_idx + 1 = 2
  EXPECT_EQ(row[256], cos(Real(2) * w[0]));  // concatenated: cos half starts at d/2
}

TEST_F(ReferenceTest, RoformerRelativeUpperBoundTable) {
  // precision.md 3.2, d = 128: 32.5 at 0, 31.54 at 1, 17.95 at 10, 10.23 at 100, 7.02 at 275.
  EXPECT_EQ(roformer_relative_upper_bound<Real>(128, 10000, 0), Real(32.5));
  EXPECT_NEAR(d(roformer_relative_upper_bound<Real>(128, 10000, 1)), 31.54, 0.005);
  EXPECT_NEAR(d(roformer_relative_upper_bound<Real>(128, 10000, 10)), 17.95, 0.005);
  EXPECT_NEAR(d(roformer_relative_upper_bound<Real>(128, 10000, 100)), 10.23, 0.005);
  EXPECT_NEAR(d(roformer_relative_upper_bound<Real>(128, 10000, 275)), 7.02, 0.005);
  // d = 64 and 256 rows of the same table.
  EXPECT_NEAR(d(roformer_relative_upper_bound<Real>(64, 10000, 100)), 7.47, 0.005);
  EXPECT_NEAR(d(roformer_relative_upper_bound<Real>(256, 10000, 200)), 13.83, 0.005);
}

TEST_F(ReferenceTest, SinusoidalDotProductIsCosineSum) {
  const SinusoidalSpec s = load_preset("transformer-base").sinusoidal;
  const std::vector<Real> w = sinusoidal_frequencies<Real>(s);
  for (std::int64_t t : {0, 17, 4096}) {
    for (std::int64_t k : {0, 1, 100}) {
      const auto a = sinusoidal_row(s, w, t), b = sinusoidal_row(s, w, t + k);
      Real dot = 0;
      for (std::size_t i = 0; i < a.size(); ++i) dot += a[i] * b[i];
      EXPECT_LT(d(abs(dot - cosine_sum<Real>(512, 10000, k))), 1e-60) << t << " " << k;
    }
  }
  EXPECT_EQ(cosine_sum<Real>(512, 10000, 0), Real(256));
}

TEST_F(ReferenceTest, ProportionalUsesFullHeadDimAndZeroFrequencies) {
  RopeSpec r;
  r.head_dim = 16;
  r.rotary_dim = 8;
  r.base = 1e6;
  r.scaling.type = ScalingType::proportional;
  r.scaling.factor = 2.0;
  const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
  ASSERT_EQ(f.inv_freq.size(), 8u);
  for (int j = 0; j < 8; ++j) {
    const Real expected = j < 4 ? pow(Real(1e6), -Real(2 * j) / 16) / 2 : Real(0);
    EXPECT_EQ(f.inv_freq[static_cast<std::size_t>(j)], expected) << j;
  }
  // Pairs are (j, j + 8) over the whole head; zero-frequency pairs are identity.
  EXPECT_EQ(pair_channels(r, 7), (std::pair<int, int>{7, 15}));
  std::vector<Real> x(16);
  for (int i = 0; i < 16; ++i) x[static_cast<std::size_t>(i)] = Real(i + 1);
  const auto y = rope_apply<Real>(r, f, Position::uniform(12345), x);
  EXPECT_EQ(y[7], x[7]);
  EXPECT_EQ(y[15], x[15]);
  EXPECT_NE(y[0], x[0]);
}

TEST_F(ReferenceTest, DynamicNtkRaisesBaseOnlyPastContext) {
  RopeSpec r;
  r.head_dim = r.rotary_dim = 64;
  r.base = 10000;
  r.max_position_embeddings = 4096;
  r.scaling.type = ScalingType::dynamic;
  r.scaling.factor = 2.0;
  const auto at_init = rope_frequencies<Real>(r);
  const auto short_seq = rope_frequencies<Real>(r, 1000);
  const auto long_seq = rope_frequencies<Real>(r, 8192);
  const Real plain = pow(Real(10000), -Real(2) / 64);
  EXPECT_LT(d(abs(at_init.inv_freq[1] - plain)), 1e-70);
  EXPECT_LT(d(abs(short_seq.inv_freq[1] - plain)), 1e-70);
  // base' = base * (2 * 8192/4096 - 1)^(64/62) = base * 3^(64/62)
  const Real new_base = Real(10000) * pow(Real(3), Real(64) / 62);
  EXPECT_LT(d(abs(long_seq.inv_freq[1] / pow(new_base, -Real(2) / 64) - 1)), 1e-70);
}

TEST_F(ReferenceTest, AttentionFactorScalesRotatedChannelsOnly) {
  RopeSpec r;
  r.head_dim = 8;
  r.rotary_dim = 4;
  r.base = 10000;
  r.max_position_embeddings = 4096;
  r.scaling.type = ScalingType::yarn;
  r.scaling.factor = 4.0;
  r.scaling.attention_factor = 1.5;
  const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
  EXPECT_EQ(f.attention_factor, Real(1.5));
  std::vector<Real> x = {1, 2, 3, 4, 5, 6, 7, 8};
  const auto y = rope_apply<Real>(r, f, Position::uniform(0), x);
  EXPECT_EQ(y[0], Real(1.5));  // position 0: identity rotation, times the factor
  EXPECT_EQ(y[3], Real(6));
  EXPECT_EQ(y[4], Real(5));  // pass-through copied unscaled
  EXPECT_EQ(y[7], Real(8));
}

TEST_F(ReferenceTest, InterleavedAndHalfSplitPairChannels) {
  RopeSpec r;
  r.head_dim = 10;
  r.rotary_dim = 6;
  r.layout = RopeLayout::interleaved;
  EXPECT_EQ(pair_channels(r, 2), (std::pair<int, int>{4, 5}));
  r.layout = RopeLayout::half_split;
  EXPECT_EQ(pair_channels(r, 2), (std::pair<int, int>{2, 5}));
}

TEST_F(ReferenceTest, MultimodalStreamsDriveTheirPairs) {
  const RopeSpec r = load_preset("qwen2-vl-7b").rope;
  const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
  const Position p{100, 7, 3};
  EXPECT_EQ(rope_angle(r, f, p, 15), Real(100) * f.inv_freq[15]);
  EXPECT_EQ(rope_angle(r, f, p, 16), Real(7) * f.inv_freq[16]);
  EXPECT_EQ(rope_angle(r, f, p, 40), Real(3) * f.inv_freq[40]);
}

TEST(WorkingPrecision, GrowsWithTheAngle) {
  EXPECT_EQ(working_precision_bits(53, 0.0), 128u);
  EXPECT_EQ(working_precision_bits(53, 1.0), 128u);
  // 2^24 - 1 rad needs 24 more bits: 53 + 24 + 64 = 141.
  EXPECT_EQ(working_precision_bits(53, 16777215.0), 141u);
  EXPECT_EQ(working_precision_bits(150, 0.0), 214u);
  {
    ScopedPrecision p(300);
    EXPECT_GE(current_precision_bits(), 300u);
    {
      ScopedPrecision q(140);
      EXPECT_GE(current_precision_bits(), 140u);
      EXPECT_LT(current_precision_bits(), 300u);
    }
    EXPECT_GE(current_precision_bits(), 300u);
  }
}

TEST(WorkingPrecision, LongPositionsStayExact) {
  // cos(2^24 - 1) and cos(2^53) against values computed with twice the precision.
  for (std::int64_t p : {std::int64_t{16777215}, std::int64_t{1} << 40, kMaxPosition}) {
    Real lo, hi;
    {
      ScopedPrecision prec(working_precision_bits(53, static_cast<double>(p)));
      lo = cos(from_int<Real>(p));
    }
    {
      ScopedPrecision prec(2 * working_precision_bits(53, static_cast<double>(p)));
      hi = cos(from_int<Real>(p));
    }
    EXPECT_LT(d(abs(lo - hi)), std::ldexp(1.0, -100)) << p;
  }
}

TEST(DoubleInstantiation, SameMathRunsInDouble) {
  // The templates compile and agree with MPFR to double accuracy for a plain spec.
  const RopeSpec r = load_preset("llama-3.1-8b").rope;
  const auto fd = rope_frequencies<double>(r);
  ScopedPrecision p(200);
  const auto fr = rope_frequencies<Real>(r);
  for (std::size_t j = 0; j < fd.inv_freq.size(); ++j)
    EXPECT_NEAR(fd.inv_freq[j] / d(fr.inv_freq[j]), 1.0, 1e-14) << j;
}

}  // namespace
}  // namespace ropecheck
