#include "ropecheck/golden/input_generator.hpp"

#include <cmath>

namespace ropecheck::golden {

namespace {
// Rounds |n| < 2^18 to 8 significant bits, ties to even, in integers.
std::int64_t round_to_8_bits(std::int64_t n) {
  const bool neg = n < 0;
  std::uint64_t m = static_cast<std::uint64_t>(neg ? -n : n);
  int bits = 0;
  while ((m >> bits) != 0) ++bits;
  if (bits > 8) {
    const int drop = bits - 8;
    const std::uint64_t half = std::uint64_t{1} << (drop - 1);
    const std::uint64_t rest = m & ((std::uint64_t{1} << drop) - 1);
    std::uint64_t q = m >> drop;
    if (rest > half || (rest == half && (q & 1))) ++q;
    m = q << drop;
  }
  const auto r = static_cast<std::int64_t>(m);
  return neg ? -r : r;
}
}  // namespace

float generate_input(std::uint64_t seed, InputStream stream, std::uint64_t index) {
  const std::uint64_t z = splitmix64_finalize(seed * 0x9E3779B97F4A7C15ULL +
                                              static_cast<std::uint64_t>(stream) * 0xD1B54A32D192ED03ULL + index);
  const std::int64_t n = static_cast<std::int64_t>((z & 0xFFFF) + ((z >> 16) & 0xFFFF) + ((z >> 32) & 0xFFFF) +
                                                   ((z >> 48) & 0xFFFF)) -
                         131070;
  // n' / 2^15 is exact in float: 8 significant bits, exponent well inside the range.
  return std::ldexp(static_cast<float>(round_to_8_bits(n)), -15);
}

std::vector<float> generate_inputs(std::uint64_t seed, InputStream stream, std::uint64_t count, std::uint64_t first) {
  std::vector<float> v(count);
  for (std::uint64_t i = 0; i < count; ++i) v[i] = generate_input(seed, stream, first + i);
  return v;
}

void fill_norm_weights(EncodingSpec& spec, std::uint64_t seed) {
  if (spec.family != Family::rope) return;
  const auto head_dim = static_cast<std::uint64_t>(spec.rope.head_dim);
  for (auto [stage, stream] : {std::pair{&spec.rope.q_norm, InputStream::q_norm_weight},
                               std::pair{&spec.rope.k_norm, InputStream::k_norm_weight}}) {
    if (!stage->has_value() || !(*stage)->weight.empty()) continue;
    const std::vector<float> w = generate_inputs(seed, stream, head_dim);
    (*stage)->weight.assign(w.begin(), w.end());
  }
  validate(spec);
}

}  // namespace ropecheck::golden
