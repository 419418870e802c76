// The attention spec's validation and masks, and the pairs grammar.
#include <gtest/gtest.h>

#include <cmath>

#include "ropecheck/attention/pairs.hpp"
#include "ropecheck/attention/spec.hpp"
#include "ropecheck/reference/presets.hpp"

namespace ropecheck::attention {
namespace {

TEST(AttentionSpec, ValidatesEveryField) {
  const RopeSpec rope = load_preset("llama-3.1-8b").rope;
  AttentionSpec a;
  EXPECT_NO_THROW(validate(a, rope));
  auto rejects = [&](auto change) {
    AttentionSpec b;
    change(b);
    EXPECT_THROW(validate(b, rope), SpecError);
  };
  rejects([](AttentionSpec& b) { b.group = 0; });
  rejects([](AttentionSpec& b) { b.scale = 0.0; });
  rejects([](AttentionSpec& b) { b.scale = -1.0; });
  rejects([](AttentionSpec& b) { b.softcap = 0.0; });
  rejects([](AttentionSpec& b) { b.window = -1; });
  rejects([](AttentionSpec& b) { b.sinks = {1.0}; b.group = 2; });
  rejects([](AttentionSpec& b) { b.sinks = {std::nan("")}; });
  EXPECT_EQ(scale_sqrt_dim(a, rope), 128);
  a.scale_dim = 192;
  EXPECT_EQ(scale_sqrt_dim(a, rope), 192);
  a.scale = 0.125;
  EXPECT_EQ(scale_sqrt_dim(a, rope), 0);
}

TEST(AttentionSpec, MasksAreContiguousKeyRanges) {
  AttentionSpec causal;
  EXPECT_EQ(visible_keys(causal, 5, 10).first, 0);
  EXPECT_EQ(visible_keys(causal, 5, 10).last, 5);
  AttentionSpec window;
  window.window = 3;  // Hugging Face: kv_idx > q_idx - window, and causal
  EXPECT_EQ(visible_keys(window, 5, 10).first, 3);
  EXPECT_EQ(visible_keys(window, 5, 10).last, 5);
  EXPECT_EQ(visible_keys(window, 1, 10).first, 0);
  AttentionSpec bidir;
  bidir.causal = false;
  EXPECT_EQ(visible_keys(bidir, 5, 10).size(), 10);
  bidir.window = 2;
  EXPECT_EQ(visible_keys(bidir, 5, 10).first, 4);
  EXPECT_EQ(visible_keys(bidir, 5, 10).last, 6);
  const BlockLayout layout(causal, 4);
  EXPECT_EQ(layout.total(), 10);
  EXPECT_EQ(layout.offset(3), 6);
}

TEST(PairsGrammar, EveryItem) {
  const PairSet c = parse_pairs("causal:10:3");
  const std::vector<ScorePair> want = {{10, 10}, {11, 10}, {11, 11}, {12, 10}, {12, 11}, {12, 12}};
  EXPECT_EQ(c.pairs, want);
  EXPECT_EQ(parse_pairs("causal:0:2048").pairs.size(), 2048u * 2049u / 2u);
  EXPECT_EQ(parse_pairs("causal:0:10:3").pairs.size(), 1u + 2u + 8u * 3u);
  EXPECT_EQ(parse_pairs("full:5:4").pairs.size(), 16u);
  // Distances: the log:MAX:K positions of --positions, the query at MAX (or Q).
  const PairSet d = parse_pairs("dist:16:1");
  for (const ScorePair& p : d.pairs) EXPECT_EQ(p.query, 16);
  EXPECT_EQ(d.pairs.front().key, 16);  // distance 0
  EXPECT_EQ(d.pairs.back().key, 0);    // distance MAX
  EXPECT_EQ(parse_pairs("dist:16:1:1000").pairs.back().key, 984);
  const PairSet t = parse_pairs("tail:100:2");
  EXPECT_EQ(t.pairs.size(), 99u + 100u);
  EXPECT_EQ(t.pairs.front().query, 98);
  const PairSet ts = parse_pairs("tail:100:1:10");
  EXPECT_EQ(ts.pairs.size(), 11u);  // 0, 10, ..., 90 and 99
  EXPECT_EQ(parse_pairs("pair:4095:0,pair:4095:0,pair:0:4095").pairs.size(), 2u);  // duplicates kept once
}

TEST(PairsGrammar, RejectsBadItems) {
  for (const char* bad : {"", "causal:0", "causal:0:0", "full:0:1:2", "dist:10", "dist:10:1:5", "tail:10:11",
                          "tail:10:1:0", "pair:1", "pair:-1:0", "log:10:2", "causal:9007199254740992:2",
                          "pair:1:x", "causal:0:3,"})
    EXPECT_THROW(parse_pairs(bad), SpecError) << bad;
  EXPECT_THROW(parse_pairs("causal:0:100", 1000), SpecError);
}

TEST(PairsGrammar, TokensIndexTheDistinctPositions) {
  const PairTokens t = pair_tokens(parse_pairs("pair:7:3,pair:3:3,pair:9:7"));
  EXPECT_EQ(t.positions, (std::vector<std::int64_t>{3, 7, 9}));
  EXPECT_EQ(t.query_token, (std::vector<std::int64_t>{1, 0, 2}));
  EXPECT_EQ(t.key_token, (std::vector<std::int64_t>{0, 0, 1}));
}

TEST(BlockGrammar, EveryFormAndItsRefusals) {
  const Block c = parse_block("--attention", "causal:100:64", 1 << 16);
  EXPECT_EQ(c.start, 100);
  EXPECT_EQ(c.tokens, 64);
  EXPECT_TRUE(c.causal);
  EXPECT_EQ(c.window, 0);
  EXPECT_EQ(c.argument, "causal:100:64");
  const Block w = parse_block("--attention", "causal:0:8:3", 8);
  EXPECT_TRUE(w.causal);
  EXPECT_EQ(w.window, 3);
  const Block f = parse_block("--attention", "full:5:4", 8);
  EXPECT_FALSE(f.causal);
  EXPECT_EQ(f.start, 5);
  for (const char* bad : {"", "causal", "causal:0", "causal:0:0", "causal:0:9", "causal:0:4:0", "full:0:4:2",
                          "dist:1:2", "pair:1:2", "causal:-1:4", "causal:9007199254740990:8", "causal:0:x"}) {
    try {
      parse_block("--attention", bad, 8);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const SpecError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--attention", 0), 0u) << e.what();
    }
  }
}

}  // namespace
}  // namespace ropecheck::attention
