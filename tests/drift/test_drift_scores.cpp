// drift --scores (drift/scores.hpp): the metrics on known perturbations (an error of k half-ulps reads k;
// a logit moved by d moves a two-key softmax by tanh(d / 2)), the compensated dot product, and a run whose
// errors stay within the class that the recipe is in (kernels/RECIPES.md) and order as the recipes do.
// Deterministic (input seed 0). Rerun: ctest -R DriftScores --output-on-failure.
#include <gtest/gtest.h>

#include <cmath>

#include "kernel_names.hpp"
#include "ropecheck/drift/scores.hpp"
#include "ropecheck/drift/scores_writers.hpp"
#include "ropecheck/reference/presets.hpp"

namespace {

namespace rd = ropecheck::drift;
using ropecheck::DType;

TEST(DriftScores, LogitRoundingIsHalfTheSpacingOfTheDtype) {
  EXPECT_EQ(rd::logit_rounding(1.5, DType::f32), std::ldexp(1.0, -24));
  EXPECT_EQ(rd::logit_rounding(-1.5, DType::f32), std::ldexp(1.0, -24));
  EXPECT_EQ(rd::logit_rounding(0.75, DType::f32), std::ldexp(1.0, -25));
  EXPECT_EQ(rd::logit_rounding(1.5, DType::bf16), std::ldexp(1.0, -8));
  EXPECT_EQ(rd::logit_rounding(0.0, DType::f32), std::ldexp(1.0, -150));  // half the smallest subnormal
  // A known perturbation: 3 half-ulps of f32 at 1.5 is 3 units, and 3 / 2^16 units of bf16.
  const double e = 3 * std::ldexp(1.0, -24);
  EXPECT_EQ(e / rd::logit_rounding(1.5, DType::f32), 3.0);
  EXPECT_EQ(e / rd::logit_rounding(1.5, DType::bf16), 3 * std::ldexp(1.0, -16));
}

TEST(DriftScores, CompensatedDotIsExactUnderCancellation) {
  const std::vector<double> a = {1e16, 1.0, -1e16, 3.0}, b = {1.0, 1.0, 1.0, std::ldexp(1.0, -60)};
  EXPECT_EQ(rd::dd_dot(a, b), 1.0 + 3 * std::ldexp(1.0, -60));  // naive: 3 * 2^-60 lost, or 0
}

TEST(DriftScores, SoftmaxRowErrorOfAKnownLogitShift) {
  // Two keys with equal exact logits; the candidate moves the first by d: p^_0 = (1 + tanh(d/2)) / 2, so
  // |p^ - p| / p = tanh(d/2) for both; with v = (1, -1), o = 0, o^ = tanh(d/2) and M = 1.
  for (double d : {1e-7, 1e-3, 0.5}) {
    const std::vector<double> ex = {0.25, 0.25}, cand = {0.25 + d, 0.25}, v = {1.0, -1.0};
    const rd::RowError r = rd::softmax_row_error(ex, cand, v, 1);
    EXPECT_NEAR(r.prob_rel, std::tanh(d / 2), 1e-15 + 1e-9 * std::tanh(d / 2)) << d;
    EXPECT_NEAR(r.out_rel, std::tanh(d / 2), 1e-15 + 1e-9 * std::tanh(d / 2)) << d;
  }
  // A common shift of every logit changes nothing (softmax's invariance).
  const std::vector<double> ex = {1.0, -2.0, 0.5}, cand = {1.5, -1.5, 1.0}, v = {1, 2, 3, 4, 5, 6};
  const rd::RowError r = rd::softmax_row_error(ex, cand, v, 2);
  EXPECT_LT(r.prob_rel, 1e-15);
  EXPECT_LT(r.out_rel, 1e-15);
}

TEST(DriftScores, OctaveBins) {
  EXPECT_EQ(rd::octave_bin(0), 0);
  EXPECT_EQ(rd::octave_bin(1), 1);
  EXPECT_EQ(rd::octave_bin(2), 2);
  EXPECT_EQ(rd::octave_bin(3), 2);
  EXPECT_EQ(rd::octave_bin(4), 3);
  EXPECT_EQ(rd::octave_bin(131071), 17);
}

TEST(DriftScores, BadInputIsRefusedBeforeAnyWork) {
  const ropecheck::EncodingSpec spec = ropecheck::load_preset("llama-3.1-8b");
  rd::ScoresOptions o;
  o.max_pos = 4096;
  EXPECT_GT(rd::check_scores_options(spec, o).pairs.size(), 100u);  // the default pairs parse
  for (const char* bad : {"dist:", "pair:5:x", "pair:16777216:0", "tail:131072:131072"}) {
    o.pairs = bad;
    EXPECT_THROW(rd::check_scores_options(spec, o), ropecheck::SpecError) << bad;
  }
  o.pairs = "pair:4:1";
  o.heads = 0;
  EXPECT_THROW(rd::check_scores_options(spec, o), ropecheck::SpecError);
  o.heads = 1;
  EXPECT_THROW(rd::check_scores_options(ropecheck::load_preset("transformer-base"), o), ropecheck::SpecError);
}

TEST(DriftScores, RecipesStayInTheirClassAndOrderAsTheirRotations) {
  // accurate in f32 storage is in f32-reduced (RECIPES.md): its scores' error stays within that class's
  // propagated bound (ERROR_MODEL.md 16.3); bf16-positions, which rounds the position itself, is far worse.
  const ropecheck::EncodingSpec spec = ropecheck::load_preset("llama-3.1-8b");
  rd::ScoresOptions o;
  o.pairs = "dist:65535:2,tail:65536:2:4093";
  o.max_pos = 65536;
  o.storage = DType::f32;
  o.heads = 2;
  o.bound_class = ropecheck::accuracy::AccuracyClass::f32_reduced;
  const rd::ScoresResult r =
      rd::run_scores(spec, ropecheck::test::kernels({"builtin:accurate", "builtin:bf16-positions"}), o);
  ASSERT_EQ(r.kernels.size(), 2u);
  const rd::ScoresKernel& acc = r.kernels[0];
  EXPECT_EQ(acc.records.size(), static_cast<std::size_t>(r.pair_count * 2));
  EXPECT_EQ(acc.rows.size(), 2u * 2);  // queries 65535 (both sets: one row) and 65534; two heads each
  ASSERT_TRUE(acc.total.bound_max.has_value());
  EXPECT_LE(*acc.total.bound_max, 1.0);
  EXPECT_GT(acc.total.f32_median, 0.0);
  EXPECT_GT(r.kernels[1].total.f32_median, 100 * acc.total.f32_median);
  EXPECT_GT(r.kernels[1].total.prob_rel_max, acc.total.prob_rel_max);
  // The writers: one line per record, one block per kernel and axis in the plot data.
  const std::string csv = rd::scores_pairs_csv(r);
  EXPECT_EQ(static_cast<std::size_t>(std::count(csv.begin(), csv.end(), '\n')), 1 + 2 * acc.records.size());
  EXPECT_NE(rd::scores_gnuplot_script(r).find("index 3 using"), std::string::npos);
  EXPECT_EQ(rd::to_json(r, "cmd")["kernels"][0]["total"]["count"], acc.total.count);
}

}  // namespace
