#include "my_rope.hpp"

#include <cmath>
#include <vector>

void my_rope(const MyRopeConfig& cfg, float* x, const std::int64_t* positions, std::size_t tokens, std::size_t heads) {
  const int pairs = cfg.rotary_dim / 2;
  std::vector<float> inv_freq(static_cast<std::size_t>(pairs));
  for (int j = 0; j < pairs; ++j)  // 1 / base^(2j / rotary_dim) / factor, in float
    inv_freq[static_cast<std::size_t>(j)] =
        1.0f / std::pow(cfg.base, static_cast<float>(2 * j) / static_cast<float>(cfg.rotary_dim)) / cfg.linear_factor;
  for (std::size_t t = 0; t < tokens; ++t) {
    for (int j = 0; j < pairs; ++j) {
      const float angle = static_cast<float>(positions[t]) * inv_freq[static_cast<std::size_t>(j)];
      const float c = std::cos(angle), s = std::sin(angle);
      const int ia = cfg.interleaved ? 2 * j : j, ib = cfg.interleaved ? 2 * j + 1 : j + pairs;
      for (std::size_t h = 0; h < heads; ++h) {
        float* v = x + (t * heads + h) * static_cast<std::size_t>(cfg.head_dim);
        const float a = v[ia], b = v[ib];
        v[ia] = a * c - b * s;
        v[ib] = b * c + a * s;
      }
    }
  }
}
