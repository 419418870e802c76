// RapidCheck generators for the property suite: specs, positions, input vectors.
//
// All shrink toward small, readable cases: head_dim toward 2, positions toward 0, values toward 0,
// scalings toward none, presets toward the first name.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include <rapidcheck.h>

#include "ropecheck/core/spec.hpp"

namespace ropecheck {
// How RapidCheck prints a generated spec in a counterexample: its JSON (found by ADL).
void showValue(const EncodingSpec& spec, std::ostream& os);
}  // namespace ropecheck

namespace ropecheck::props::gen {

inline constexpr std::int64_t kDefaultMaxPosition = std::int64_t{1} << 24;

// A valid RoPE spec: every scaling type (none, linear, dynamic, yarn, llama3, longrope,
// proportional), both layouts, partial rotary, multimodal (chunked / interleaved sections), odd
// but valid sizes (head_dim 2, rotary_dim 2, non-power-of-two dims, base 1.5), or a RoPE preset.
rc::Gen<EncodingSpec> rope_spec();
// A valid sinusoidal spec: both layouts, both frequency rules, odd widths, offsets, or a preset.
// even_pairs: every sine column has a cosine partner (needed by the shift map and the dot product).
rc::Gen<EncodingSpec> sinusoidal_spec(bool even_pairs = false);
// Either family (RoPE 3 : 1 sinusoidal).
rc::Gen<EncodingSpec> any_spec();

// Positions in [0, max_position]. In every run's colliding cases (RapidCheck size a multiple of
// kCollidingCaseEvery: the first case of every run, and one in 8 of the others) each position is one of
// forced_colliding_positions(), in the first case its smallest (2049 when max_position allows: bf16 and
// f16 both hold it as 2048); in the other cases each kind a quarter of the time: small (0..64), near a
// power of two (2^k - 3 .. 2^k + 3), one of colliding_positions(), or anywhere up to max_position.
// Shrinks toward 0 (a colliding case toward its smallest colliding position).
rc::Gen<std::int64_t> position(std::int64_t max_position = kDefaultMaxPosition);
inline constexpr int kCollidingCaseEvery = 8;

// The positions <= max_position whose low-precision representations collide with a neighbour's (what
// makes bf16 / f16 / f32 position ids visible, as the golden sampler's log:MAX:K does): 2^k - 1 and
// 2^k + 1 for k >= 8 (bf16 holds 8 significant bits: 257 -> 256, 511 -> 512), 3 * 2^k + 1 (odd values
// inside the octaves: 385, 769, ...), 65504 (f16's largest finite), 65519 / 65520 (the last position
// below / the first at f16 overflow), 65535; 2^24 + 1 (f32) when in range. Sorted.
std::vector<std::int64_t> colliding_positions(std::int64_t max_position = kDefaultMaxPosition);
// The colliding positions a colliding case draws from: those above 2048 (they collide in f16 and bf16
// alike), or, when max_position is below 2049, those above 256 (bf16); empty below 257.
std::vector<std::int64_t> forced_colliding_positions(std::int64_t max_position = kDefaultMaxPosition);

// A bf16-representable value k * 2^e, |k| <= 255, e in [-7, 1] (also exact in f16 and f32).
rc::Gen<double> bf16_value();
// n such values.
rc::Gen<std::vector<double>> bf16_vector(int n);

}  // namespace ropecheck::props::gen
