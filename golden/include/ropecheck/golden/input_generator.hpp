// The portable input generator of golden sets: "ropecheck-irwin-hall-bf16", version 1.
//
// Element i of stream s (q = 1, k = 2, v = 3, sinks = 4) with seed S, using only 64-bit integer arithmetic (so the
// same bytes come out with any compiler, OS or thread count):
//   z   = splitmix64(S * 0x9E3779B97F4A7C15 + s * 0xD1B54A32D192ED03 + i)    (mod 2^64)
//   n   = z[0:16] + z[16:32] + z[32:48] + z[48:64] - 131070   (Irwin-Hall: near-normal, |n| <= 131070)
//   n'  = n rounded to 8 significant bits, ties to even      (exactly representable in bf16)
//   x   = n' / 2^15                                           (sd about 1.15, |x| < 4)
// where splitmix64(x) is the finaliser of Steele et al.'s SplitMix64:
//   x ^= x >> 30; x *= 0xBF58476D1CE4E5B9; x ^= x >> 27; x *= 0x94D049BB133111EB; x ^= x >> 31.
// Every value is exactly representable in bf16, f16, f32 and f64, so one input serves every dtype.
#pragma once

#include <cstdint>
#include <vector>

#include "ropecheck/core/spec.hpp"
#include "ropecheck/core/splitmix.hpp"

namespace ropecheck::golden {

inline constexpr const char* kGeneratorName = "ropecheck-irwin-hall-bf16";
inline constexpr int kGeneratorVersion = 1;

// v and sinks: the values and sink logits of attention blocks (golden --attention, --sinks).
// q_norm_weight / k_norm_weight: the stored weights w of the Q/K RMSNorm stage when the spec gives none,
// elements 0 .. head_dim-1 (bf16 values; the factor is w or 1 + w, core/SPEC_FORMAT.md).
enum class InputStream : std::uint64_t { q = 1, k = 2, v = 3, sinks = 4, q_norm_weight = 5, k_norm_weight = 6 };

// Element `index` of a stream.
float generate_input(std::uint64_t seed, InputStream stream, std::uint64_t index);
// Elements [first, first + count) of a stream (a shard of a golden set starts past 0).
std::vector<float> generate_inputs(std::uint64_t seed, InputStream stream, std::uint64_t count, std::uint64_t first = 0);

// Fills in the weights of the spec's norm stages that have none (rope family; no stage: unchanged).
void fill_norm_weights(EncodingSpec& spec, std::uint64_t seed);

}  // namespace ropecheck::golden
