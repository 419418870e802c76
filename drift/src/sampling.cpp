#include "ropecheck/drift/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace ropecheck::drift {

namespace {

void require_range(const char* name, std::int64_t v, std::int64_t lo, std::int64_t hi) {
  if (v < lo || v > hi)
    throw std::invalid_argument(std::string(name) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                "], got " + std::to_string(v));
}

// 2^(k + i / n) rounded down / up to an integer (exact for the integer results: 2^x is computed
// in binary64 and the results are far below 2^53).
std::int64_t pow2_floor(int k, int i, int n) {
  return static_cast<std::int64_t>(std::floor(std::exp2(k + static_cast<double>(i) / n)));
}
std::int64_t pow2_ceil(int k, int i, int n) {
  return static_cast<std::int64_t>(std::ceil(std::exp2(k + static_cast<double>(i) / n)));
}

}  // namespace

int SamplingPlan::bin_index(std::int64_t p) const {
  const auto it = std::upper_bound(bins.begin(), bins.end(), p, [](std::int64_t v, const Bin& b) { return v < b.hi; });
  if (it == bins.end() || p < it->lo) return -1;
  return static_cast<int>(it - bins.begin());
}

SamplingPlan make_sampling_plan(const SamplingOptions& o) {
  require_range("--max-pos", o.max_pos, 1, kMaxSweepPositions);
  require_range("--window", o.window, 1, 65536);
  require_range("--per-octave", o.per_octave, 1, 4096);
  require_range("--bins-per-octave", o.bins_per_octave, 1, 16);
  const std::int64_t N = o.max_pos;
  SamplingPlan plan;
  plan.options = o;

  // Windows: at 0, every power of two below N, and the end of the range.
  plan.window_starts.push_back(0);
  for (std::int64_t s = 1; s < N; s *= 2)
    if (s >= o.window) plan.window_starts.push_back(s);  // smaller ones lie inside the window at 0
  if (N > o.window) plan.window_starts.push_back(N - o.window);
  std::sort(plan.window_starts.begin(), plan.window_starts.end());
  plan.window_starts.erase(std::unique(plan.window_starts.begin(), plan.window_starts.end()), plan.window_starts.end());

  std::vector<std::int64_t>& pos = plan.positions;
  for (std::int64_t s : plan.window_starts)
    for (std::int64_t p = s; p < std::min(N, s + o.window); ++p) pos.push_back(p);
  for (int k = 0; (std::int64_t{1} << k) < N; ++k)
    for (int i = 0; i < o.per_octave; ++i) {
      const std::int64_t p = pow2_floor(k, i, o.per_octave);
      if (p < N) pos.push_back(p);
    }
  // The last position before every power of two: the largest angle of its octave.
  for (std::int64_t s = 2; s <= N; s *= 2) pos.push_back(s - 1);
  pos.push_back(N - 1);
  std::sort(pos.begin(), pos.end());
  pos.erase(std::unique(pos.begin(), pos.end()), pos.end());

  // Bins: [0, 1), then bins_per_octave per octave.
  plan.bins.push_back({0, 1});
  for (int k = 0; (std::int64_t{1} << k) < N; ++k)
    for (int i = 0; i < o.bins_per_octave; ++i) {
      const std::int64_t lo = plan.bins.back().hi;
      const std::int64_t hi = std::min(N, pow2_ceil(k, i + 1, o.bins_per_octave));
      if (hi > lo) plan.bins.push_back({lo, hi});
    }
  // N == 1: the single bin [0, 1) already covers it.

  plan.bin_of.reserve(pos.size());
  for (std::int64_t p : pos) plan.bin_of.push_back(plan.bin_index(p));
  return plan;
}

nlohmann::json to_json(const SamplingPlan& plan) {
  nlohmann::json bins = nlohmann::json::array();
  for (const Bin& b : plan.bins) bins.push_back({{"lo", b.lo}, {"hi", b.hi}});
  return {
      {"max_pos", plan.options.max_pos},
      {"window", plan.options.window},
      {"per_octave", plan.options.per_octave},
      {"bins_per_octave", plan.options.bins_per_octave},
      {"window_starts", plan.window_starts},
      {"bins", bins},
      {"position_count", plan.positions.size()},
      {"positions", plan.positions},
  };
}

}  // namespace ropecheck::drift
