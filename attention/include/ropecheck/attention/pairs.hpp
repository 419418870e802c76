// Which (query position, key position) pairs to score: a grammar in the spirit of --positions
// (core/positions.hpp), for golden scores of single pairs rather than whole attention blocks.
//
// Grammar: comma-separated items, each one of
//   causal:S:N       the causal block of N tokens at positions S .. S+N-1: every (m, n) with
//                    S <= n <= m < S+N, row by row                               causal:0:2048
//   causal:S:N:W     the same with a sliding window of W tokens: also m - n < W   causal:0:8192:4096
//   full:S:N         every (m, n) in [S, S+N)^2 (bidirectional)                   full:0:64
//   dist:MAX:K       all distances log-spaced up to MAX: the query at MAX, keys at MAX - d for the
//                    distances d of --positions' log:MAX:K (0, MAX, 2^e - 1 and K per octave)
//                                                                                dist:131071:4
//   dist:MAX:K:Q     the same with the query at Q >= MAX                          dist:4096:8:131071
//   tail:L:N         the pairs at the end of a long context: the last N queries of an L-token context
//                    (positions L-N .. L-1), each with every key 0 .. m           tail:131072:2
//   tail:L:N:S       the same with the keys 0, S, 2S, ... below m, and m itself   tail:1048576:4:97
//   pair:M:N         one pair: the query at M, the key at N                       pair:4095:0
// Positions must lie in [0, 2^53]. A pair listed twice is kept once (its first place). Since
// <R_m q, R_n k> depends on the positions only through n - m (RoPE's relative property), a pair set
// probes distances; its absolute positions probe how each kernel forms the angle.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ropecheck::attention {

struct ScorePair {
  std::int64_t query = 0, key = 0;  // positions
  friend bool operator==(const ScorePair&, const ScorePair&) = default;
};

struct PairSet {
  std::string argument;  // as given
  std::vector<ScorePair> pairs;
};

// Throws SpecError (one line, naming the item) on bad syntax, out-of-range values or more than
// max_pairs pairs.
PairSet parse_pairs(const std::string& argument, std::int64_t max_pairs = std::int64_t{1} << 26);

// The tokens a pair set needs: its distinct positions in increasing order, and each pair as the index
// of its query's token and of its key's token in that list (what the score engine takes).
struct PairTokens {
  std::vector<std::int64_t> positions;
  std::vector<std::int64_t> query_token, key_token;  // one per pair
};
PairTokens pair_tokens(const PairSet& set);

// An attention block (golden --attention): N tokens at positions S .. S+N-1, with the mask of the
// grammar's block items: causal:S:N (causal), causal:S:N:W (causal, sliding window of W tokens),
// full:S:N (bidirectional). Throws SpecError naming `option` on bad syntax, N < 1 or N > max_tokens.
struct Block {
  std::string argument;  // as given
  std::int64_t start = 0, tokens = 0;
  bool causal = true;
  std::int64_t window = 0;  // 0: none
};
Block parse_block(const std::string& option, const std::string& argument, std::int64_t max_tokens);

}  // namespace ropecheck::attention
