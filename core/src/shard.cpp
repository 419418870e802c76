#include "ropecheck/core/shard.hpp"

#include <charconv>

#include "ropecheck/core/spec.hpp"

namespace ropecheck {

namespace {
bool parse_int(std::string_view s, int& v) {
  if (s.empty() || s.front() == '+' || s.front() == '-') return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}
}  // namespace

Shard parse_shard(std::string_view text, std::string_view option) {
  const std::string opt(option);
  const std::size_t slash = text.find('/');
  Shard s;
  if (slash == std::string_view::npos || !parse_int(text.substr(0, slash), s.index) ||
      !parse_int(text.substr(slash + 1), s.count))
    throw SpecError(opt + ": expected I/N (shard I of N, 1 <= I <= N), got '" + std::string(text) + "'");
  if (s.count < 1 || s.count > kMaxShards)
    throw SpecError(opt + " " + std::string(text) + ": N must be in [1, " + std::to_string(kMaxShards) + "]");
  if (s.index < 1 || s.index > s.count)
    throw SpecError(opt + " " + std::string(text) + ": shards are numbered 1.." + std::to_string(s.count));
  return s;
}

std::pair<std::int64_t, std::int64_t> shard_range(std::int64_t n, const Shard& s, std::string_view what,
                                                  std::string_view option) {
  if (n < s.count)
    throw SpecError(std::string(option) + " " + s.text() + ": " + std::to_string(n) + " " + std::string(what) +
                    " cannot be split into " + std::to_string(s.count) + " non-empty shards");
  // floor(n i / N) without the 64-bit overflow of n i (n up to 2^53, i up to 2^20): n = q N + r.
  const std::int64_t q = n / s.count, r = n % s.count;
  const auto at = [&](int i) { return q * i + r * i / s.count; };
  return {at(s.index - 1), at(s.index)};
}

MissingShards missing_shards(int count, const std::function<bool(int)>& present) {
  MissingShards m;
  for (int i = 1; i <= count; ++i)
    if (!present(i) && m.count++ < 8) m.listed += (m.listed.empty() ? "" : ", ") + std::to_string(i);
  if (m.count > 8) m.listed += ", ...";
  return m;
}

}  // namespace ropecheck
