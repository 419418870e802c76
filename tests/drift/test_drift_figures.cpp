// Known figures reproduced by `ropecheck drift` (sources: ../shared/research/precision.md sections
// 3.5 and 4, measured there independently in float64 / numpy):
//   - f32 angles (hf) at base 1e4, d = 128: max phase error ~2.4e-4 rad below 4096 and ~7.8e-3 rad
//     below 131072 (accepted within a factor 1.5: the sampled maximum depends on which positions
//     are sampled, and precision.md's figure is one exhaustive measurement);
//   - bf16 inverse frequencies destroy the phase: errors of whole radians by 4096;
//   - positions held in bf16: exactly 385 distinct values below 512, 769 below 4096, 1409 below
//     131072; the first collision is 257 (= 256), so bf16-positions breaks fp32-angle by 257;
//   - the accurate recipe stays within about one f32 ulp everywhere up to 2^24.
// Deterministic (input seed 0, fixed sampling plan). Reproduce one: ctest -R DriftFigures --output-on-failure
#include <gtest/gtest.h>

#include "kernel_names.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "ropecheck/drift/sweep.hpp"
#include "ropecheck/reference/presets.hpp"

namespace rd = ropecheck::drift;
using namespace ropecheck;

namespace {

const rd::KernelResult& find(const rd::DriftResult& r, const std::string& name) {
  for (const rd::KernelResult& c : r.kernels)
    if (c.name == name) return c;
  throw std::runtime_error("no candidate " + name);
}

// Largest angle error over the bins that end at or below `end`.
double angle_max_below(const rd::DriftResult& r, const rd::KernelResult& c, std::int64_t end) {
  double m = 0;
  for (std::size_t b = 0; b < r.plan.bins.size(); ++b)
    if (r.plan.bins[b].hi <= end) m = std::max(m, c.bins[b].angle.max);
  return m;
}

std::int64_t distinct_below(const rd::DriftResult& r, const rd::KernelResult& c, std::int64_t edge) {
  for (std::size_t b = 0; b < r.plan.bins.size(); ++b)
    if (r.plan.bins[b].hi == edge) return c.uniqueness->distinct_below[b];
  throw std::runtime_error("no bin ends at " + std::to_string(edge));
}

std::optional<std::int64_t> breakdown(const rd::KernelResult& c, accuracy::AccuracyClass cls) {
  for (const rd::Breakdown& b : c.breakdown)
    if (b.cls == cls) return b.position;
  throw std::runtime_error("no breakdown entry");
}

// One sweep shared by the tests below: llama-2-7b (base 1e4, head_dim 128, no scaling), 0..131071.
const rd::DriftResult& base_sweep() {
  static const rd::DriftResult r = [] {
    rd::DriftOptions o;
    o.sampling.max_pos = 131072;
    o.storage = DType::f32;
    const std::vector<plugin::KernelName> names = ropecheck::test::kernels({"builtin:hf", "builtin:bf16-inv-freq", "builtin:bf16-positions", "builtin:accurate"});
    return rd::run_drift(load_preset("llama-2-7b"), names, o);
  }();
  return r;
}

}  // namespace

TEST(DriftFigures, Fp32PhaseErrorAtBase1e4) {
  const rd::DriftResult& r = base_sweep();
  const rd::KernelResult& hf = find(r, "hf");
  const double below_4096 = angle_max_below(r, hf, 4096);
  const double below_131072 = angle_max_below(r, hf, 131072);
  EXPECT_GT(below_4096, 2.4e-4 / 1.5);
  EXPECT_LT(below_4096, 2.4e-4 * 1.5);
  EXPECT_GT(below_131072, 7.8e-3 / 1.5);
  EXPECT_LT(below_131072, 7.8e-3 * 1.5);
  // The cos / sin of those angles carry the same error (precision.md column (d): 2.3e-4, 7.7e-3).
  EXPECT_LT(hf.total.trig.max, 7.7e-3 * 1.5);
  EXPECT_EQ(hf.total.nonfinite, 0);
}

TEST(DriftFigures, Bf16InverseFrequenciesDestroyThePhase) {
  const rd::DriftResult& r = base_sweep();
  const rd::KernelResult& c = find(r, "bf16-inv-freq");
  EXPECT_GE(angle_max_below(r, c, 4096), 1.0) << "whole radians by 4096";
  EXPECT_GT(angle_max_below(r, c, 4096), 100 * angle_max_below(r, find(r, "hf"), 4096));
  // Broken by a few positions already (the error is position x 3.65e-3 relative).
  ASSERT_TRUE(breakdown(c, accuracy::AccuracyClass::fp32_angle));
  EXPECT_LE(*breakdown(c, accuracy::AccuracyClass::fp32_angle), 16);
}

TEST(DriftFigures, Bf16PositionsCollapse) {
  const rd::DriftResult& r = base_sweep();
  const rd::KernelResult& c = find(r, "bf16-positions");
  ASSERT_TRUE(c.uniqueness);
  EXPECT_EQ(c.uniqueness->positions, 131072);
  EXPECT_EQ(c.uniqueness->distinct, 1409);
  EXPECT_EQ(distinct_below(r, c, 512), 385);
  EXPECT_EQ(distinct_below(r, c, 4096), 769);
  EXPECT_EQ(distinct_below(r, c, 131072), 1409);
  ASSERT_TRUE(c.uniqueness->first_collision);
  EXPECT_EQ(*c.uniqueness->first_collision, 257);
  EXPECT_EQ(*c.uniqueness->collides_with, 256);
  ASSERT_TRUE(breakdown(c, accuracy::AccuracyClass::fp32_angle));
  EXPECT_LE(*breakdown(c, accuracy::AccuracyClass::fp32_angle), 257);
  // Exact below 257: every position up to 256 is a bf16 integer.
  EXPECT_EQ(angle_max_below(r, c, 256), angle_max_below(r, find(r, "hf"), 256));
  // The fp32 recipes keep every position distinct.
  EXPECT_EQ(find(r, "hf").uniqueness->distinct, 131072);
  EXPECT_FALSE(find(r, "hf").uniqueness->first_collision);
}

TEST(DriftFigures, AccurateWithinAboutOneUlpUpTo2e24) {
  // Sparse sampling up to 2^24 - 1 (windows of 16, 16 per octave); f32 storage.
  rd::DriftOptions o;
  o.sampling.max_pos = std::int64_t{1} << 24;
  o.sampling.window = 16;
  o.sampling.per_octave = 16;
  o.storage = DType::f32;
  o.uniqueness = false;
  const std::vector<plugin::KernelName> names = ropecheck::test::kernels({"builtin:accurate"});
  const rd::DriftResult r = rd::run_drift(load_preset("llama-3.1-8b"), names, o);
  const rd::KernelResult& c = r.kernels.at(0);
  const double u32 = std::ldexp(1.0, -24);
  // cos / sin in [-1, 1]: one ulp is at most 2^-23 (values in [1, 2) only at exactly 1).
  EXPECT_LE(c.total.trig.max, 2 * u32) << "cos / sin error " << c.total.trig.max / u32 << " x 2^-24";
  // Rotated values stored in f32: f32 sin / cos, the rotation and one rounding, a few u relative to M.
  EXPECT_LE(c.total.rot_rel.max, 4 * u32) << "rotated error " << c.total.rot_rel.max / u32 << " x 2^-24 M";
  EXPECT_FALSE(breakdown(c, accuracy::AccuracyClass::fp32_angle)) << "accurate broke fp32-angle";
  EXPECT_EQ(c.total.nonfinite, 0);
  // Its error does not grow with position: the last octave is no worse than twice the first ones.
  EXPECT_LE(c.bins.back().trig.max, 2 * u32);
}

TEST(DriftFigures, MetaAndHfShareTheAngle) {
  // The same f32 angle (w_j and theta as hf): identical angle errors at every sampled position.
  rd::DriftOptions o;
  o.sampling.max_pos = 8192;
  o.uniqueness = false;
  const std::vector<plugin::KernelName> names = ropecheck::test::kernels({"builtin:hf", "builtin:meta"});
  const rd::DriftResult r = rd::run_drift(load_preset("llama-3.1-8b"), names, o);
  for (std::size_t i = 0; i < r.plan.positions.size(); ++i)
    ASSERT_EQ(r.kernels[0].positions[i].angle.max, r.kernels[1].positions[i].angle.max)
        << "position " << r.plan.positions[i];
}
