// The engine's correctly rounded scores and outputs against the plain MPFR oracle (exact.hpp in MPFR at
// 600 bits), bit for bit, fast path and forced fallback; exact values (ties) rounded to even.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>

#include "attention_util.hpp"
#include "ropecheck/attention/pairs.hpp"
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

namespace ropecheck::attention::test {
namespace {

// Single pairs (pairs.hpp's grammar) against relative_logit in MPFR.
TEST(AttentionEngine, PairsMatchTheMpfrOracle) {
  const RopeSpec rope = load_preset("llama-3.1-8b").rope;
  AttentionSpec a;
  a.group = 2;
  const PairTokens t = pair_tokens(parse_pairs("dist:131071:2,pair:0:0,tail:70000:1:9973,causal:4094:3"));
  std::vector<Position> pos;
  for (std::int64_t p : t.positions) pos.push_back(Position::uniform(p));
  const std::size_t T = pos.size(), D = 128, n = t.query_token.size();
  const std::vector<double> q = normal_inputs(T * 2 * D, 5), k = normal_inputs(T * D, 6);
  AttentionEngineOptions opt;
  opt.threads = 2;
  const AttentionEngine engine(rope, std::nullopt, a, 131071, opt);
  std::vector<std::vector<double>> s(4, std::vector<double>(2 * n));
  std::vector<AttentionOut> out;
  for (auto& x : s) out.push_back({x.data(), nullptr});
  RoundingStats stats;
  engine.pairs(pos, q, k, t.query_token, t.key_token, kTypes, out, stats);
  ScopedPrecision prec(600);
  const ExactAttention<Real> e = exact_attention<Real>(rope, std::nullopt, a);
  const std::vector<Real> qr(q.begin(), q.end()), kr(k.begin(), k.end());
  int bad = 0;
  for (std::size_t p = 0; p < n; ++p)
    for (std::size_t h = 0; h < 2; ++h) {
      const std::size_t qi = static_cast<std::size_t>(t.query_token[p]), ki = static_cast<std::size_t>(t.key_token[p]);
      const Real want = relative_logit<Real>(rope, e, pos[qi], std::span<const Real>(qr).subspan((qi * 2 + h) * D, D),
                                             pos[ki], std::span<const Real>(kr).subspan(ki * D, D));
      for (std::size_t d = 0; d < 4; ++d)
        if (s[d][h * n + p] != round_to_double(want, kTypes[d]) && ++bad < 5)
          ADD_FAILURE() << "pair " << p << " head " << h << " " << to_string(kTypes[d]);
    }
  std::printf("%zu pairs x 2 heads: %lld fast, %lld fallback values\n", n, static_cast<long long>(stats.fast_values),
              static_cast<long long>(stats.fallback_values));
}

// Exact values round to even: ties are settled by the fallback's exact arithmetic, never by luck.
struct TieBlock {
  std::vector<std::vector<double>> s, o;
};
TieBlock run_block(const RopeSpec& rope, const AttentionSpec& a, const std::vector<Position>& pos,
                   const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v) {
  const AttentionEngine engine(rope, std::nullopt, a, 4096);
  const BlockLayout layout(a, static_cast<std::int64_t>(pos.size()));
  const std::size_t dv = static_cast<std::size_t>(value_dim(a, rope));
  TieBlock r{std::vector<std::vector<double>>(4, std::vector<double>(static_cast<std::size_t>(layout.total()) * static_cast<std::size_t>(a.group))),
             std::vector<std::vector<double>>(4, std::vector<double>(pos.size() * static_cast<std::size_t>(a.group) * dv))};
  std::vector<AttentionOut> out;
  for (std::size_t d = 0; d < 4; ++d) out.push_back({r.s[d].data(), r.o[d].data()});
  RoundingStats stats;
  engine.block(pos, q, k, v, kTypes, out, stats);
  return r;
}

TEST(AttentionEngine, ExactValuesRoundToEven) {
  const RopeSpec rope = load_preset("deepseek-v3").rope;  // head_dim 64: the scale 1/8 is exact
  AttentionSpec a;
  const std::size_t D = 64;
  // A zero query: every logit is +0, the probabilities uniform; V's mean is a bf16 tie.
  std::vector<double> q(2 * D, 0.0), k = normal_inputs(2 * D, 9), v(2 * D, 1.0);
  for (std::size_t c = 0; c < D; ++c) v[D + c] = 1 + 0x1p-7;
  v[0] = 1 + 0x1p-8;        // row 0's output is V_0 itself: a bf16 tie (to 1)
  v[1] = 1 + 3 * 0x1p-8;    // a bf16 tie to 1 + 2^-6
  TieBlock r = run_block(rope, a, uniform_positions({1000, 1001}), q, k, v);
  for (std::size_t d = 0; d < 4; ++d)
    for (double x : r.s[d]) {
      EXPECT_EQ(x, 0.0);
      EXPECT_FALSE(std::signbit(x));
    }
  EXPECT_EQ(r.o[3][0], 1.0);              // bf16 (kTypes[3]) of 1 + 2^-8
  EXPECT_EQ(r.o[0][0], 1 + 0x1p-8);       // f64
  EXPECT_EQ(r.o[3][1], 1 + 0x1p-6);       // bf16 of 1 + 3 2^-8
  EXPECT_EQ(r.o[3][D + 2], 1.0);          // row 1, channel 2: (1 + 1 + 2^-7) / 2 = 1 + 2^-8, tie to 1
  EXPECT_EQ(r.o[2][D + 2], 1 + 0x1p-8);   // f16 holds it
  // The diagonal logit <R_m q, R_m k> / 8 = <q, k> / 8 exactly: here an f32 tie.
  q.assign(2 * D, 0.0);
  k.assign(2 * D, 0.0);
  q[0] = q[D] = 1.0;
  k[0] = k[D] = 8 * (1 + 0x1p-24);
  r = run_block(rope, a, uniform_positions({4000, 4001}), q, k, v);
  EXPECT_EQ(r.s[1][0], 1.0);              // f32 of 1 + 2^-24
  EXPECT_EQ(r.s[0][0], 1 + 0x1p-24);
  EXPECT_EQ(r.s[1][2], 1.0);              // row 1, key 1
  // A sink of logit 0 beside one key of logit 0: p = 1/2, o = V_0 / 2, a bf16 tie.
  AttentionSpec sink;
  sink.sinks = {0.0};
  q.assign(D, 0.0);
  v.assign(D, 1 + 0x1p-7 + 0x1p-8);
  r = run_block(rope, sink, uniform_positions({7}), q, std::vector<double>(k.begin(), k.begin() + D), v);
  EXPECT_EQ(r.o[0][0], 0.5 + 0x1p-8 + 0x1p-9);
  EXPECT_EQ(r.o[3][0], 0.5 + 0x1p-7);
}

}  // namespace
}  // namespace ropecheck::attention::test
