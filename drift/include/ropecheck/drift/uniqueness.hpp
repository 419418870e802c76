// Uniqueness: how many distinct positions a kernel actually represents over ALL positions
// 0 .. N-1, and the first position whose encoding equals an earlier one's (drift/DRIFT.md,
// "Uniqueness").
//
// A position's encoding is the kernel's rotation of the unit pair vector (x_a = 1, x_b = 0 in
// every pair, one head): att * (cos, sin) of every pair exactly as the kernel stores them
// (table dtype, rotation, storage rounding), which works the same for recipes and plugins. Two
// rows are equal when every value is equal (+0 = -0; NaN equals NaN, so the positions a recipe
// turns into infinity all collide). Rows are compared through a 104-bit hash: two different rows
// share a hash with probability below 2^-57 over 2^24 positions.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "ropecheck/drift/swept_kernel.hpp"

namespace ropecheck::drift {

struct Uniqueness {
  std::int64_t positions = 0;                // N: rows examined, positions 0 .. N-1
  std::int64_t distinct = 0;                 // distinct rows among them
  std::optional<std::int64_t> first_collision;  // smallest p whose row equals an earlier row
  std::optional<std::int64_t> collides_with;    // the smallest q < p with the same row
  std::vector<std::int64_t> distinct_below;  // distinct rows among 0 .. edges[i]-1 (edges as given)
  double seconds = 0;
};

// 104-bit row hash as (h1, h2 with its low 24 bits cleared), of the canonical bit patterns.
struct RowHash {
  std::uint64_t h1 = 0, h2 = 0;
};
RowHash hash_row(std::span<const double> row);

// From per-position hashes (positions 0 .. n-1 in order; n <= 2^24): distinct counts below each
// edge, and the first collision.
Uniqueness uniqueness_from_hashes(std::span<const RowHash> hashes, std::span<const std::int64_t> edges);

// Rotates the unit vector at every position 0 .. n-1 in chunks, hashes the rows (threads for
// the kernel and for hashing) and counts. `progress` (may be empty) is told rows done.
Uniqueness measure_uniqueness(SweptKernel& c, const RopeSpec& spec, std::int64_t n, std::span<const std::int64_t> edges,
                              int threads,
                              const std::function<void(std::int64_t)>& progress = {});

}  // namespace ropecheck::drift
