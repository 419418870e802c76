// The consumer's own kernel: RoPE (default or linear scaling, half-split "NeoX" or interleaved
// "GPT-J" pairing, partial rotary) with everything in float, the way the Hugging Face / Meta fp32
// recipe computes it. Nothing here knows about ropecheck.
#pragma once

#include <cstddef>
#include <cstdint>

struct MyRopeConfig {
  int head_dim = 0;
  int rotary_dim = 0;       // channels rotated; the rest pass through
  float base = 10000.0f;
  float linear_factor = 1;  // linear scaling (position interpolation): frequencies / factor
  bool interleaved = false; // pairs (2j, 2j+1) instead of (j, j + rotary_dim/2)
};

// Rotates x[tokens][heads][head_dim] in place at positions[tokens].
void my_rope(const MyRopeConfig& cfg, float* x, const std::int64_t* positions, std::size_t tokens, std::size_t heads);
