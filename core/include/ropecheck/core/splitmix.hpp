// The finaliser of Steele et al.'s SplitMix64: a bijection of 64-bit integers whose outputs pass as
// random. The one copy behind the golden inputs (golden/input_generator.hpp, a documented contract),
// the diagnosis's element sample and drift's uniqueness hashes.
#pragma once

#include <cstdint>

namespace ropecheck {

constexpr std::uint64_t splitmix64_finalize(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

}  // namespace ropecheck
