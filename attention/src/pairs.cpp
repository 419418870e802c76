#include "ropecheck/attention/pairs.hpp"

#include <algorithm>
#include <unordered_set>

#include "ropecheck/core/positions.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::attention {
namespace {

[[noreturn]] void bad(const std::string& item, const std::string& why) {
  throw SpecError("--pairs: '" + item + "': " + why);
}

std::int64_t parse_int(const std::string& item, const std::string& s) { return parse_position_number("--pairs", item, s); }

struct PairHash {
  std::size_t operator()(const ScorePair& p) const {
    return std::hash<std::int64_t>()(p.query * 0x9E3779B97F4A7C15LL ^ p.key);
  }
};

class Collector {
 public:
  Collector(PairSet& set, std::int64_t max_pairs) : set_(set), max_(max_pairs) {}
  // One item never repeats a pair: duplicates are looked for only once a second item starts.
  void begin_item() {
    if (++items_ == 2)
      for (const ScorePair& p : set_.pairs) seen_.insert(p);
  }
  void push(const std::string& item, std::int64_t m, std::int64_t n) {
    const ScorePair p{m, n};
    if (items_ >= 2 && !seen_.insert(p).second) return;
    if (static_cast<std::int64_t>(set_.pairs.size()) >= max_) bad(item, "more than " + std::to_string(max_) + " pairs");
    set_.pairs.push_back(p);
  }

 private:
  PairSet& set_;
  std::int64_t max_;
  std::unordered_set<ScorePair, PairHash> seen_;
  int items_ = 0;
};

void block_item(const std::string& item, const std::vector<std::string>& c, Collector& out, std::int64_t max_pairs) {
  const bool causal = c[0] == "causal";
  if (causal ? (c.size() != 3 && c.size() != 4) : c.size() != 3)
    bad(item, causal ? "a causal block is causal:S:N or causal:S:N:W" : "a full block is full:S:N");
  const std::int64_t s = parse_int(item, c[1]), n = parse_int(item, c[2]);
  const std::int64_t w = c.size() == 4 ? parse_int(item, c[3]) : 0;
  if (n < 1) bad(item, "N must be >= 1");
  if (c.size() == 4 && w < 1) bad(item, "W must be >= 1");
  if (s + n - 1 > kMaxPosition) bad(item, "the block ends past 2^53");
  if (n > max_pairs) bad(item, "more than " + std::to_string(max_pairs) + " pairs");  // push() counts the rest
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t lo = w > 0 ? std::max<std::int64_t>(0, i - w + 1) : 0;
    const std::int64_t hi = causal ? i : n - 1;
    for (std::int64_t j = lo; j <= hi; ++j) out.push(item, s + i, s + j);
  }
}

void dist_item(const std::string& item, const std::vector<std::string>& c, Collector& out) {
  if (c.size() != 3 && c.size() != 4) bad(item, "distances are dist:MAX:K or dist:MAX:K:Q");
  const std::int64_t max = parse_int(item, c[1]);
  const std::int64_t q = c.size() == 4 ? parse_int(item, c[3]) : max;
  if (q < max) bad(item, "the query position Q must be >= MAX");
  PositionSet d;
  try {
    d = parse_positions("log:" + c[1] + ":" + c[2]);
  } catch (const SpecError& e) {
    bad(item, e.what());
  }
  for (const Position& p : d.positions) out.push(item, q, q - p.t);
}

void tail_item(const std::string& item, const std::vector<std::string>& c, Collector& out, std::int64_t max_pairs) {
  if (c.size() != 3 && c.size() != 4) bad(item, "the end of a context is tail:L:N or tail:L:N:S");
  const std::int64_t l = parse_int(item, c[1]), n = parse_int(item, c[2]);
  const std::int64_t stride = c.size() == 4 ? parse_int(item, c[3]) : 1;
  if (n < 1 || n > l) bad(item, "N must be in [1, L]");
  if (stride < 1) bad(item, "S must be >= 1");
  if ((l / stride + 1) > max_pairs / n) bad(item, "more than " + std::to_string(max_pairs) + " pairs");
  for (std::int64_t m = l - n; m < l; ++m) {
    for (std::int64_t k = 0; k < m; k += stride) out.push(item, m, k);
    out.push(item, m, m);
  }
}

}  // namespace

PairSet parse_pairs(const std::string& argument, std::int64_t max_pairs) {
  PairSet set;
  set.argument = argument;
  if (argument.empty()) throw SpecError("--pairs: empty list");
  Collector out(set, max_pairs);
  for (const std::string& item : split_items(argument, ',')) {
    if (item.empty()) bad(item, "empty item");
    const std::vector<std::string> c = split_items(item, ':');
    out.begin_item();
    if (c[0] == "causal" || c[0] == "full") {
      block_item(item, c, out, max_pairs);
    } else if (c[0] == "dist") {
      dist_item(item, c, out);
    } else if (c[0] == "tail") {
      tail_item(item, c, out, max_pairs);
    } else if (c[0] == "pair") {
      if (c.size() != 3) bad(item, "one pair is pair:M:N");
      out.push(item, parse_int(item, c[1]), parse_int(item, c[2]));
    } else {
      bad(item, "unknown item (causal, full, dist, tail, pair)");
    }
  }
  return set;
}

Block parse_block(const std::string& option, const std::string& argument, std::int64_t max_tokens) {
  const std::vector<std::string> c = split_items(argument, ':');
  auto fail = [&](const std::string& why) -> void { throw SpecError(option + ": '" + argument + "': " + why); };
  if (c.empty()) fail("empty");
  const bool causal = c[0] == "causal";
  if ((c[0] != "causal" && c[0] != "full") || c.size() < 3 || c.size() > (causal ? 4u : 3u))
    fail("a block is causal:S:N, causal:S:N:W or full:S:N");
  Block b{argument, parse_position_number(option, argument, c[1]), parse_position_number(option, argument, c[2]), causal,
          c.size() == 4 ? parse_position_number(option, argument, c[3]) : 0};
  if (b.tokens < 1 || b.tokens > max_tokens) fail("N must be in [1, " + std::to_string(max_tokens) + "]");
  if (c.size() == 4 && b.window < 1) fail("W must be >= 1");
  if (b.start + b.tokens - 1 > kMaxPosition) fail("the block ends past 2^53");
  return b;
}

PairTokens pair_tokens(const PairSet& set) {
  PairTokens t;
  for (const ScorePair& p : set.pairs) {
    t.positions.push_back(p.query);
    t.positions.push_back(p.key);
  }
  std::sort(t.positions.begin(), t.positions.end());
  t.positions.erase(std::unique(t.positions.begin(), t.positions.end()), t.positions.end());
  auto index = [&](std::int64_t p) {
    return static_cast<std::int64_t>(std::lower_bound(t.positions.begin(), t.positions.end(), p) - t.positions.begin());
  };
  for (const ScorePair& p : set.pairs) {
    t.query_token.push_back(index(p.query));
    t.key_token.push_back(index(p.key));
  }
  return t;
}

}  // namespace ropecheck::attention
