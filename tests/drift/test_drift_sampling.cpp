// drift/sampling.hpp: the sampling plan (windows, log-spaced positions, bins) and its JSON.
// Deterministic: no randomness. A failure names N and the options; rerun with
//   ctest -R DriftSampling --output-on-failure
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "ropecheck/drift/sampling.hpp"
#include "ropecheck/drift/sweep.hpp"
#include "ropecheck/reference/presets.hpp"

namespace rd = ropecheck::drift;

namespace {

void expect_valid(const rd::SamplingPlan& p) {
  const std::int64_t N = p.options.max_pos;
  SCOPED_TRACE("N = " + std::to_string(N) + ", window " + std::to_string(p.options.window) + ", per octave " +
               std::to_string(p.options.per_octave) + ", bins per octave " + std::to_string(p.options.bins_per_octave));
  ASSERT_FALSE(p.positions.empty());
  EXPECT_TRUE(std::is_sorted(p.positions.begin(), p.positions.end()));
  EXPECT_EQ(std::adjacent_find(p.positions.begin(), p.positions.end()), p.positions.end()) << "duplicate position";
  EXPECT_EQ(p.positions.front(), 0);
  EXPECT_EQ(p.positions.back(), N - 1);
  // Bins: consecutive, cover [0, N), every sampled position in the bin bin_of says.
  ASSERT_FALSE(p.bins.empty());
  EXPECT_EQ(p.bins.front().lo, 0);
  EXPECT_EQ(p.bins.back().hi, N);
  for (std::size_t i = 0; i < p.bins.size(); ++i) {
    EXPECT_LT(p.bins[i].lo, p.bins[i].hi) << "empty bin " << i;
    if (i > 0) {
      EXPECT_EQ(p.bins[i].lo, p.bins[i - 1].hi) << "gap before bin " << i;
    }
  }
  ASSERT_EQ(p.bin_of.size(), p.positions.size());
  for (std::size_t i = 0; i < p.positions.size(); ++i) {
    const rd::Bin& b = p.bins[static_cast<std::size_t>(p.bin_of[i])];
    EXPECT_TRUE(p.positions[i] >= b.lo && p.positions[i] < b.hi) << "position " << p.positions[i];
  }
  // Every window is sampled densely.
  for (std::int64_t s : p.window_starts)
    for (std::int64_t q = s; q < std::min(N, s + p.options.window); ++q)
      EXPECT_TRUE(std::binary_search(p.positions.begin(), p.positions.end(), q)) << "window at " << s << " misses " << q;
}

}  // namespace

TEST(DriftSampling, DefaultPlanFor131072) {
  const rd::SamplingPlan p = rd::make_sampling_plan({});
  expect_valid(p);
  // Windows at 0, 256, 512, ..., 65536 and the end 130816.
  const std::vector<std::int64_t> starts = {0, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 130816};
  EXPECT_EQ(p.window_starts, starts);
  // One bin per octave: [0,1), [1,2), [2,4), ..., [65536,131072).
  ASSERT_EQ(p.bins.size(), 18u);
  EXPECT_EQ(p.bins[1].lo, 1);
  EXPECT_EQ(p.bins[12].lo, 2048);
  EXPECT_EQ(p.bins[12].hi, 4096);
  // The positions that decide known figures are sampled: 257 (first bf16 collision), the last
  // position before every power of two.
  for (std::int64_t q : {257, 511, 4095, 65535, 131071})
    EXPECT_TRUE(std::binary_search(p.positions.begin(), p.positions.end(), q)) << q;
  EXPECT_EQ(p.bin_index(4095), 12);
  EXPECT_EQ(p.bin_index(131072), -1);
}

TEST(DriftSampling, EdgeSizesAndOptions) {
  for (std::int64_t N : std::vector<std::int64_t>{1, 2, 3, 255, 256, 257, 1000, 4096, 100003, std::int64_t{1} << 24}) {
    rd::SamplingOptions o;
    o.max_pos = N;
    expect_valid(rd::make_sampling_plan(o));
  }
  rd::SamplingOptions o;
  o.max_pos = 50000;
  o.window = 7;
  o.per_octave = 3;
  o.bins_per_octave = 4;
  const rd::SamplingPlan p = rd::make_sampling_plan(o);
  expect_valid(p);
  // Four bins per octave above 1 (edges ceil(2^(k + i/4)), small octaves merge where edges coincide).
  EXPECT_GT(p.bins.size(), 4u * 14u);
}

TEST(DriftSampling, RejectsOutOfRangeOptions) {
  auto bad = [](auto mutate) {
    rd::SamplingOptions o;
    mutate(o);
    EXPECT_THROW(rd::make_sampling_plan(o), std::invalid_argument);
  };
  bad([](rd::SamplingOptions& o) { o.max_pos = 0; });
  bad([](rd::SamplingOptions& o) { o.max_pos = (std::int64_t{1} << 24) + 1; });
  bad([](rd::SamplingOptions& o) { o.window = 0; });
  bad([](rd::SamplingOptions& o) { o.per_octave = 0; });
  bad([](rd::SamplingOptions& o) { o.bins_per_octave = 17; });
  try {
    rd::SamplingOptions o;
    o.max_pos = -5;
    rd::make_sampling_plan(o);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--max-pos"), std::string::npos) << e.what();
  }
}

TEST(DriftSampling, JsonCarriesThePlan) {
  rd::SamplingOptions o;
  o.max_pos = 5000;
  const rd::SamplingPlan p = rd::make_sampling_plan(o);
  const nlohmann::json j = rd::to_json(p);
  EXPECT_EQ(j["max_pos"], 5000);
  EXPECT_EQ(j["window"], 256);
  EXPECT_EQ(j["per_octave"], 64);
  EXPECT_EQ(j["bins_per_octave"], 1);
  EXPECT_EQ(j["position_count"], p.positions.size());
  EXPECT_EQ(j["positions"].size(), p.positions.size());
  EXPECT_EQ(j["bins"].size(), p.bins.size());
  EXPECT_EQ(j["bins"].back()["hi"], 5000);
  EXPECT_EQ(j["window_starts"].size(), p.window_starts.size());
}

// The memory estimate grows with what the run holds (samples x heads x head_dim, kernels, the
// uniqueness pass over every position), is above what a default run measures (~100 MB peak RSS for
// llama-3.1-8b to 2^20, two recipes; DRIFT.md), and require_memory refuses above --max-memory only.
TEST(DriftMemory, EstimateGrowsWithTheRunAndRefusesAboveTheLimit) {
  const ropecheck::EncodingSpec spec = ropecheck::load_preset("llama-3.1-8b");
  rd::DriftOptions o;
  o.sampling.max_pos = 1 << 20;
  const std::uint64_t base = rd::estimate_memory_bytes(spec, o, 2);
  EXPECT_GT(base, std::uint64_t{100} << 20);
  EXPECT_LT(base, std::uint64_t{1} << 30);
  EXPECT_GT(rd::estimate_memory_bytes(spec, o, 8), base);
  rd::DriftOptions more = o;
  more.heads = 64;
  EXPECT_GT(rd::estimate_memory_bytes(spec, more, 2), base);
  more = o;
  more.uniqueness = false;
  EXPECT_LT(rd::estimate_memory_bytes(spec, more, 2), base);
  more = o;
  more.sampling.max_pos = 1 << 24;  // the hash of every position: 16 bytes x 2^24 more at least
  EXPECT_GT(rd::estimate_memory_bytes(spec, more, 2), base + (std::uint64_t{256} << 20));
  ropecheck::EncodingSpec wide = spec;
  wide.rope.head_dim = wide.rope.rotary_dim = 1 << 20;
  EXPECT_GT(rd::estimate_memory_bytes(wide, o, 1), std::uint64_t{1} << 40);

  o.max_memory = base;
  EXPECT_NO_THROW(rd::require_memory(spec, o, 2));
  o.max_memory = base - 1;
  try {
    rd::require_memory(spec, o, 2);
    ADD_FAILURE() << "no refusal below the estimate";
  } catch (const ropecheck::SpecError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--max-pos 1048576"), std::string::npos) << m;
    EXPECT_NE(m.find("--max-memory limit"), std::string::npos) << m;
  }
}
