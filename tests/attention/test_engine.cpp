// The engine's correctly rounded scores and outputs against the plain MPFR oracle (exact.hpp in MPFR at
// 600 bits), bit for bit, fast path and forced fallback; exact values (ties) rounded to even.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>

#include "attention_util.hpp"
#include "ropecheck/reference/presets.hpp"

namespace ropecheck::attention::test {
namespace {

constexpr std::array<DType, 4> kTypes = {DType::f64, DType::f32, DType::f16, DType::bf16};

struct Case {
  std::string preset;
  AttentionSpec attn;
  std::vector<Position> positions;
};

// Runs the engine (fast path, or every inexact value through the fallback) and compares with the oracle.
void expect_matches_oracle(const Case& c, std::uint64_t seed, bool force_fallback) {
  const RopeSpec rope = load_preset(c.preset).rope;
  const std::size_t T = c.positions.size(), D = static_cast<std::size_t>(rope.head_dim);
  const std::size_t G = static_cast<std::size_t>(c.attn.group), dv = static_cast<std::size_t>(value_dim(c.attn, rope));
  const std::vector<double> q = normal_inputs(T * G * D, seed), k = normal_inputs(T * D, seed + 1),
                            v = normal_inputs(T * dv, seed + 2);
  std::int64_t max_pos = 0;
  for (const Position& p : c.positions) max_pos = std::max(max_pos, p.t);
  AttentionEngineOptions opt;
  opt.force_fallback = force_fallback;
  opt.threads = 2;
  const AttentionEngine engine(rope, std::nullopt, c.attn, max_pos, opt);
  const BlockLayout layout(c.attn, static_cast<std::int64_t>(T));
  std::vector<std::vector<double>> s(4, std::vector<double>(G * static_cast<std::size_t>(layout.total()))),
      o(4, std::vector<double>(T * G * dv));
  std::vector<AttentionOut> out;
  for (std::size_t d = 0; d < 4; ++d) out.push_back({s[d].data(), o[d].data()});
  RoundingStats stats;
  engine.block(c.positions, q, k, v, kTypes, out, stats);
  const OracleValues want = oracle(rope, c.attn, c.positions, q, k, v, kTypes);
  std::printf("%s seed %llu%s: %lld fast, %lld fallback values\n", c.preset.c_str(),
              static_cast<unsigned long long>(seed), force_fallback ? " (forced fallback)" : "",
              static_cast<long long>(stats.fast_values), static_cast<long long>(stats.fallback_values));
  for (std::size_t d = 0; d < 4; ++d) {
    int bad = 0;
    for (std::size_t i = 0; i < s[d].size(); ++i)
      if (!same_value(s[d][i], want.scores[d][i]) && ++bad < 4)
        ADD_FAILURE() << c.preset << " score " << i << " " << to_string(kTypes[d]) << ": " << s[d][i] << " vs "
                      << want.scores[d][i];
    for (std::size_t i = 0; i < o[d].size(); ++i)
      if (!same_value(o[d][i], want.outputs[d][i]) && ++bad < 8)
        ADD_FAILURE() << c.preset << " output " << i << " " << to_string(kTypes[d]) << ": " << o[d][i] << " vs "
                      << want.outputs[d][i];
  }
}

std::vector<Case> cases() {
  AttentionSpec plain;
  plain.group = 2;
  AttentionSpec oss = plain;  // gpt-oss: sinks and a sliding window
  oss.sinks = {0.75, -1.5};
  oss.window = 3;
  AttentionSpec capped = plain;  // Gemma 2's soft-cap, with a given scale
  capped.softcap = 50.0;
  capped.scale = 0.0625;
  AttentionSpec bidir;
  bidir.causal = false;
  bidir.group = 3;
  return {
      {"llama-3.1-8b", plain, block_positions(0, 6)},
      {"llama-3.1-8b", plain, uniform_positions({0, 7, 4095, 65537, 1 << 20, (1 << 24) - 1})},
      {"gpt-oss-20b", oss, block_positions(131066, 6)},
      {"gemma-3-4b-global", capped, block_positions(4090, 5)},
      {"phi-3.5-mini", plain, block_positions(100, 5)},
      {"gpt-neox-20b", bidir, block_positions(3, 5)},
      {"deepseek-v3", plain, block_positions(16380, 5)},
      {"qwen2-vl-7b", plain, block_positions(10, 4)},
  };
}

TEST(AttentionEngine, MatchesTheMpfrOracleBitForBit) {
  std::uint64_t seed = 11;
  for (const Case& c : cases()) expect_matches_oracle(c, seed++, false);
}

TEST(AttentionEngine, FallbackMatchesTheMpfrOracleBitForBit) {
  std::uint64_t seed = 101;
  for (const Case& c : cases()) expect_matches_oracle(c, seed++, true);
}

}  // namespace
}  // namespace ropecheck::attention::test
