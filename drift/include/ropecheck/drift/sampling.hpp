// The sampling plan of a drift sweep: which positions of 0 .. N-1 are measured, and the position
// bins the per-position measurements are summarised in (drift/DRIFT.md, "Sampling").
//
// Errors of a float recipe grow with the angle and jump at powers of two (where the spacing of
// f32 / bf16 / f16 values doubles), so the plan is dense where things change and sparse between:
//   - dense windows of `window` consecutive positions at 0, at every power of two below N, and at
//     the end of the range (N - window .. N - 1);
//   - `per_octave` log-spaced positions in every octave [2^k, 2^(k+1)): floor(2^(k + i / per_octave));
//   - the last position before every power of two (2^k - 1, the largest angle of its octave) and N - 1.
// Bins: [0, 1) and then `bins_per_octave` bins per octave, edges ceil(2^(k + i / bins_per_octave)),
// the last one clipped at N. Every sampled position lies in exactly one bin.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace ropecheck::drift {

// Largest N a sweep accepts: 2^24 positions (0 .. 16777215), the f32 integer limit.
inline constexpr std::int64_t kMaxSweepPositions = std::int64_t{1} << 24;

struct SamplingOptions {
  std::int64_t max_pos = 131072;  // N: positions 0 .. N-1, 1 <= N <= kMaxSweepPositions
  int window = 256;               // dense window length, 1 .. 65536
  int per_octave = 64;            // log-spaced positions per octave, 1 .. 4096
  int bins_per_octave = 1;        // 1 .. 16
};

struct Bin {
  std::int64_t lo = 0, hi = 0;  // [lo, hi)
};

struct SamplingPlan {
  SamplingOptions options;
  std::vector<std::int64_t> positions;      // sorted, distinct, all in [0, N)
  std::vector<std::int64_t> window_starts;  // where the dense windows begin
  std::vector<Bin> bins;                    // consecutive, covering [0, N)
  std::vector<int> bin_of;                  // bin index of positions[i]

  // The bin holding position p (0 <= p < N); -1 outside.
  int bin_index(std::int64_t p) const;
};

// Throws std::invalid_argument (one line naming the option) for options out of range.
SamplingPlan make_sampling_plan(const SamplingOptions& options);

// The plan as JSON (DRIFT.md, key "sampling"): options, window starts, bins, the positions.
nlohmann::json to_json(const SamplingPlan& plan);

}  // namespace ropecheck::drift
