// Splitting a long run over machines: `--shard I/N` names part I (1-based) of N. Every command splits
// its work the same way: item range [floor((I-1) n / N), floor(I n / N)) of its n items (tokens,
// positions, cases), so shard I of N does 1/N of the work and the N ranges tile [0, n) in order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

namespace ropecheck {

struct Shard {
  int index = 1;  // 1..count
  int count = 1;
  bool whole() const { return count == 1; }
  std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
  friend bool operator==(const Shard&, const Shard&) = default;
};

inline constexpr int kMaxShards = 1 << 20;

// "I/N" with 1 <= I <= N <= 2^20. SpecError naming `option` on anything else.
Shard parse_shard(std::string_view text, std::string_view option = "--shard");

// The half-open item range [first, last) of shard s over n items. SpecError naming `option` when
// n < s.count (some shard would be empty: ask for fewer shards).
std::pair<std::int64_t, std::int64_t> shard_range(std::int64_t n, const Shard& s, std::string_view what,
                                                  std::string_view option = "--shard");

// Of shards 1..count, those `present` denies: how many, and the first eight as "1, 2, 3" (then ", ..."
// when there are more), for the message of a merge that lacks some.
struct MissingShards {
  int count = 0;
  std::string listed;
};
MissingShards missing_shards(int count, const std::function<bool(int)>& present);

}  // namespace ropecheck
