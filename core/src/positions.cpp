#include "ropecheck/core/positions.hpp"

#include <algorithm>
#include <charconv>
#include <sstream>

namespace ropecheck {
namespace {

[[noreturn]] void bad(const std::string& item, const std::string& why) {
  throw SpecError("--positions: '" + item + "': " + why);
}

std::int64_t parse_int(const std::string& item, const std::string& s) { return parse_position_number("--positions", item, s); }

}  // namespace

std::int64_t parse_position_number(std::string_view option, const std::string& item, const std::string& s) {
  std::int64_t v = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || ptr != end)
    throw SpecError(std::string(option) + ": '" + item + "': '" + s + "' is not an integer");
  if (v < 0 || v > kMaxPosition) throw SpecError(std::string(option) + ": '" + item + "': " + std::to_string(v) + " is outside [0, 2^53]");
  return v;
}

std::vector<std::string> split_items(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

PositionSet parse_positions(const std::string& argument, std::int64_t max_tokens) {
  PositionSet set;
  set.argument = argument;
  if (argument.empty()) throw SpecError("--positions: empty list");
  auto push = [&](const std::string& item, Position p) {
    if (static_cast<std::int64_t>(set.positions.size()) >= max_tokens)
      bad(item, "more than " + std::to_string(max_tokens) + " positions");
    if (!(p.t == p.h && p.h == p.w)) set.has_triples = true;
    set.positions.push_back(p);
  };
  for (const std::string& item : split_items(argument, ',')) {
    if (item.empty()) bad(item, "empty item");
    const std::vector<std::string> colon = split_items(item, ':');
    if (item.find('/') != std::string::npos) {
      const std::vector<std::string> parts = split_items(item, '/');
      if (parts.size() != 3) bad(item, "a triple is T/H/W");
      push(item, {parse_int(item, parts[0]), parse_int(item, parts[1]), parse_int(item, parts[2])});
    } else if (colon[0] == "log") {
      if (colon.size() != 3) bad(item, "the sampler is log:MAX:K");
      const std::int64_t max = parse_int(item, colon[1]);
      const std::int64_t k = parse_int(item, colon[2]);
      if (k < 1 || k > 4096) bad(item, "K must be in [1, 4096]");
      std::vector<std::int64_t> pts = {0};
      for (std::int64_t p2 = 1; p2 <= max; p2 *= 2) {
        if (p2 - 1 > 0) pts.push_back(p2 - 1);
        for (std::int64_t m = 0; m < k; ++m) {
          // floor(2^e (K + m) / K) without overflow: 2^e <= 2^53 and K + m < 2^13.
          const std::int64_t p = p2 / k * (k + m) + (p2 % k) * (k + m) / k;
          if (p <= max) pts.push_back(p);
        }
        if (p2 > max / 2) {
          if (2 * p2 - 1 <= max) pts.push_back(2 * p2 - 1);
          break;
        }
      }
      pts.push_back(max);  // the end of the context is always sampled
      std::sort(pts.begin(), pts.end());
      pts.erase(std::unique(pts.begin(), pts.end()), pts.end());
      for (std::int64_t p : pts) push(item, Position::uniform(p));
    } else if (colon[0] == "grid") {
      if (colon.size() != 4) bad(item, "an image block is grid:START:H:W");
      const std::int64_t s = parse_int(item, colon[1]);
      const std::int64_t h = parse_int(item, colon[2]);
      const std::int64_t w = parse_int(item, colon[3]);
      if (h < 1 || w < 1 || h * w > max_tokens) bad(item, "H and W must be >= 1 and H*W not too large");
      for (std::int64_t r = 0; r < h; ++r)
        for (std::int64_t c = 0; c < w; ++c) push(item, {s, s + r, s + c});
    } else if (colon.size() == 1) {
      push(item, Position::uniform(parse_int(item, item)));
    } else if (colon.size() == 2 || colon.size() == 3) {
      const std::int64_t a = parse_int(item, colon[0]);
      const std::int64_t b = parse_int(item, colon[1]);
      const std::int64_t step = colon.size() == 3 ? parse_int(item, colon[2]) : 1;
      if (step < 1) bad(item, "step must be >= 1");
      if (b <= a) bad(item, "empty range (B must be > A)");
      if ((b - a - 1) / step + 1 > max_tokens) bad(item, "more than " + std::to_string(max_tokens) + " positions");
      for (std::int64_t p = a; p < b; p += step) push(item, Position::uniform(p));
    } else {
      bad(item, "not a position, range A:B[:S], log:MAX:K, T/H/W or grid:S:H:W");
    }
  }
  return set;
}

}  // namespace ropecheck
