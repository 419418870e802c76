#include "ropecheck/drift/uniqueness.hpp"
#include "ropecheck/core/splitmix.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "parallel.hpp"
#include "ropecheck/formulas/rope.hpp"

namespace ropecheck::drift {

namespace {

constexpr std::uint64_t kPositionMask = (std::uint64_t{1} << 24) - 1;

std::uint64_t mix64(std::uint64_t x) { return splitmix64_finalize(x); }

std::uint64_t canonical_bits(double v) {
  if (v == 0) return 0;                               // +0 and -0
  if (std::isnan(v)) return 0x7FF8000000000000ull;   // every NaN
  std::uint64_t u;
  std::memcpy(&u, &v, 8);
  return u;
}

}  // namespace

RowHash hash_row(std::span<const double> row) {
  // Two independent chains over 64-bit words: a word holds two values as float bits when both are
  // floats (every f32 / f16 / bf16 value; half the mixing of one word per value), else each value's
  // double bits. The words depend on the values only (+0 = -0, every NaN alike), so equal rows hash
  // alike; unequal rows collide with probability about 2^-104.
  std::uint64_t h1 = 0x243F6A8885A308D3ull, h2 = 0x13198A2E03707344ull;
  auto absorb = [&](std::uint64_t u) {
    h1 = mix64(h1 ^ u);
    h2 = mix64(h2 + (u ^ 0xA4093822299F31D0ull));
  };
  std::size_t i = 0;
  for (; i + 1 < row.size(); i += 2) {
    const double a = row[i], b = row[i + 1];
    const auto fa = static_cast<float>(a), fb = static_cast<float>(b);
    if ((static_cast<double>(fa) == a || std::isnan(a)) && (static_cast<double>(fb) == b || std::isnan(b))) {
      std::uint32_t ua, ub;
      const float ca = a == 0 ? 0.0f : (std::isnan(a) ? std::numeric_limits<float>::quiet_NaN() : fa);
      const float cb = b == 0 ? 0.0f : (std::isnan(b) ? std::numeric_limits<float>::quiet_NaN() : fb);
      std::memcpy(&ua, &ca, 4);
      std::memcpy(&ub, &cb, 4);
      absorb((static_cast<std::uint64_t>(ua) << 32) | ub);
    } else {
      absorb(canonical_bits(a));
      absorb(canonical_bits(b));
    }
  }
  if (i < row.size()) absorb(canonical_bits(row[i]));
  return {h1, h2 & ~kPositionMask};
}

Uniqueness uniqueness_from_hashes(std::span<const RowHash> hashes, std::span<const std::int64_t> edges) {
  const auto n = static_cast<std::int64_t>(hashes.size());
  if (n > (std::int64_t{1} << 24)) throw std::invalid_argument("uniqueness: more than 2^24 positions");
  Uniqueness u;
  u.positions = n;
  // Sort (hash, position): equal rows form runs, ordered by position inside a run.
  struct Entry {
    std::uint64_t h1, h2_pos;
  };
  std::vector<Entry> e(hashes.size());
  for (std::int64_t p = 0; p < n; ++p) {
    const RowHash& h = hashes[static_cast<std::size_t>(p)];
    e[static_cast<std::size_t>(p)] = {h.h1, h.h2 | static_cast<std::uint64_t>(p)};
  }
  std::sort(e.begin(), e.end(), [](const Entry& a, const Entry& b) {
    return a.h1 != b.h1 ? a.h1 < b.h1 : a.h2_pos < b.h2_pos;
  });
  std::vector<bool> first(static_cast<std::size_t>(n), false);  // p starts a new row
  for (std::size_t i = 0; i < e.size();) {
    std::size_t k = i + 1;
    while (k < e.size() && e[k].h1 == e[i].h1 && (e[k].h2_pos & ~kPositionMask) == (e[i].h2_pos & ~kPositionMask)) ++k;
    const auto p0 = static_cast<std::int64_t>(e[i].h2_pos & kPositionMask);
    first[static_cast<std::size_t>(p0)] = true;
    ++u.distinct;
    if (k - i >= 2) {
      const auto p1 = static_cast<std::int64_t>(e[i + 1].h2_pos & kPositionMask);
      if (!u.first_collision || p1 < *u.first_collision) {
        u.first_collision = p1;
        u.collides_with = p0;
      }
    }
    i = k;
  }
  // Distinct rows below each edge: first occurrences counted in position order.
  u.distinct_below.resize(edges.size());
  std::int64_t count = 0, p = 0;
  std::vector<std::size_t> order(edges.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return edges[a] < edges[b]; });
  for (std::size_t i : order) {
    const std::int64_t edge = std::min(edges[i], n);
    for (; p < edge; ++p) count += first[static_cast<std::size_t>(p)] ? 1 : 0;
    u.distinct_below[i] = count;
  }
  return u;
}

Uniqueness measure_uniqueness(SweptKernel& c, const RopeSpec& spec, std::int64_t n, std::span<const std::int64_t> edges,
                              int threads, const std::function<void(std::int64_t)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const int P = rope_pairs(spec), D = spec.head_dim;
  constexpr std::int64_t kChunk = 16384;
  // The unit pair vector (1, 0) in every pair of one head, the same for every token.
  std::vector<float> unit(static_cast<std::size_t>(D), 0.0f);
  std::vector<std::pair<int, int>> ch;
  for (int j = 0; j < P; ++j) {
    ch.push_back(pair_channels(spec, j));
    unit[static_cast<std::size_t>(ch.back().first)] = 1.0f;
  }
  std::vector<float> x;
  for (std::int64_t t = 0; t < std::min(n, kChunk); ++t) x.insert(x.end(), unit.begin(), unit.end());
  std::vector<RowHash> hashes(static_cast<std::size_t>(n));
  std::vector<std::int64_t> pos;
  std::vector<double> out;
  for (std::int64_t start = 0; start < n; start += kChunk) {
    const std::int64_t T = std::min(kChunk, n - start);
    pos.resize(static_cast<std::size_t>(T));
    for (std::int64_t t = 0; t < T; ++t) pos[static_cast<std::size_t>(t)] = start + t;
    out.assign(static_cast<std::size_t>(T * D), 0.0);
    c.rotate(pos, 1, std::span<const float>(x.data(), static_cast<std::size_t>(T * D)), out);
    detail::parallel_for(T, threads, [&](std::int64_t b, std::int64_t e, int) {
      std::vector<double> row(static_cast<std::size_t>(2 * P));
      for (std::int64_t t = b; t < e; ++t) {
        const double* o = out.data() + t * D;
        for (int j = 0; j < P; ++j) {
          row[static_cast<std::size_t>(2 * j)] = o[ch[static_cast<std::size_t>(j)].first];
          row[static_cast<std::size_t>(2 * j + 1)] = o[ch[static_cast<std::size_t>(j)].second];
        }
        hashes[static_cast<std::size_t>(start + t)] = hash_row(row);
      }
    });
    if (progress) progress(start + T);
  }
  Uniqueness u = uniqueness_from_hashes(hashes, edges);
  u.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return u;
}

}  // namespace ropecheck::drift
