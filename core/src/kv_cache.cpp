// kv_cache.hpp: the batch / cache description, its page table, and the slot <-> token mapping.
#include "ropecheck/core/kv_cache.hpp"

#include <algorithm>
#include <numeric>
#include <set>

#include "ropecheck/core/input_error.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/core/splitmix.hpp"

namespace ropecheck::kv {

std::string_view to_string(CacheKind k) { return k == CacheKind::paged ? "paged" : "slots"; }
std::string_view to_string(CacheLayout l) { return l == CacheLayout::nhd ? "NHD" : "HND"; }

std::int64_t CacheSpec::tokens() const {
  std::int64_t t = 0;
  for (const Sequence& s : sequences) t += s.appended;
  return t;
}

namespace {

[[noreturn]] void bad(const std::string& why) { throw SpecError("--kv-cache: " + why); }

std::int64_t count(const nlohmann::json& j, const std::string& field, std::int64_t lo, std::int64_t hi) {
  if (!j.is_number_integer()) bad(field + " must be an integer");
  const auto v = j.get<std::int64_t>();
  if (v < lo || v > hi) bad(field + " = " + std::to_string(v) + " outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

std::int64_t pages_of(std::int64_t length, std::int64_t page_size) { return (length + page_size - 1) / page_size; }

// Deterministic page table: the pool's pages shuffled (Fisher-Yates, SplitMix64 of seed and step) and
// dealt to the sequences in order, so pages of one sequence are neither contiguous nor in order.
std::vector<std::vector<std::int64_t>> generated_table(const CacheSpec& c, std::uint64_t seed) {
  std::vector<std::int64_t> pool(static_cast<std::size_t>(c.pages));
  std::iota(pool.begin(), pool.end(), 0);
  for (std::size_t i = pool.size(); i > 1; --i) {
    const std::uint64_t r = splitmix64_finalize(seed ^ (0x6B76ULL << 48) ^ i);
    std::swap(pool[i - 1], pool[r % i]);
  }
  std::vector<std::vector<std::int64_t>> t;
  std::size_t next = 0;
  for (const Sequence& s : c.sequences) {
    const auto n = static_cast<std::size_t>(pages_of(s.length(), c.page_size));
    t.emplace_back(pool.begin() + static_cast<std::ptrdiff_t>(next), pool.begin() + static_cast<std::ptrdiff_t>(next + n));
    next += n;
  }
  return t;
}

void check_table(const CacheSpec& c, const std::string& what) {
  std::set<std::int64_t> seen;
  for (std::size_t s = 0; s < c.sequences.size(); ++s) {
    const std::vector<std::int64_t>& row = c.page_table[s];
    const std::int64_t want = pages_of(c.sequences[s].length(), c.page_size);
    if (static_cast<std::int64_t>(row.size()) != want)
      input_error(what, "sequence " + std::to_string(s) + " has " + std::to_string(row.size()) + " pages, its " +
                            std::to_string(c.sequences[s].length()) + " tokens need " + std::to_string(want) +
                            " of page_size " + std::to_string(c.page_size));
    for (std::int64_t p : row) {
      if (p < 0 || p >= c.pages)
        input_error(what, "page index " + std::to_string(p) + " of sequence " + std::to_string(s) + " outside [0, " +
                              std::to_string(c.pages) + ")");
      if (!seen.insert(p).second) input_error(what, "page " + std::to_string(p) + " given to two sequences");
    }
  }
}

}  // namespace

CacheSpec parse_cache_spec(const nlohmann::json& j, std::uint64_t seed) {
  if (!j.is_object()) bad("the description must be a JSON object");
  static const std::set<std::string> keys = {"sequences", "cache", "layout", "page_size", "pages", "page_table"};
  for (const auto& [k, v] : j.items())
    if (!keys.contains(k)) bad("unknown key '" + k + "'");
  CacheSpec c;
  const std::string kind = j.value("cache", std::string("paged"));
  if (kind != "paged" && kind != "slots") bad("cache '" + kind + "' is not paged or slots");
  c.kind = kind == "paged" ? CacheKind::paged : CacheKind::slots;
  const std::string layout = j.value("layout", std::string("NHD"));
  if (layout != "NHD" && layout != "HND") bad("layout '" + layout + "' is not NHD or HND");
  c.layout = layout == "NHD" ? CacheLayout::nhd : CacheLayout::hnd;
  if (c.kind == CacheKind::slots && c.layout == CacheLayout::hnd) bad("a slot-mapped cache is NHD ([blocks, block_size, heads, D])");
  c.page_size = j.contains("page_size") ? count(j["page_size"], "page_size", 1, 1 << 16) : 16;
  if (!j.contains("sequences") || !j["sequences"].is_array() || j["sequences"].empty()) bad("sequences must be a non-empty array");
  if (static_cast<std::int64_t>(j["sequences"].size()) > kMaxSequences) bad("more than " + std::to_string(kMaxSequences) + " sequences");
  std::int64_t needed = 0, tokens = 0;
  for (const nlohmann::json& s : j["sequences"]) {
    if (!s.is_object()) bad("each sequence must be an object {\"cached\": N, \"appended\": M}");
    for (const auto& [k, v] : s.items())
      if (k != "cached" && k != "appended") bad("unknown sequence key '" + k + "'");
    Sequence q{s.contains("cached") ? count(s["cached"], "cached", 0, kMaxCacheTokens) : 0,
               s.contains("appended") ? count(s["appended"], "appended", 1, kMaxCacheTokens) : 0};
    if (q.appended == 0) bad("every sequence needs appended >= 1");
    tokens += q.appended;
    needed += pages_of(q.length(), c.page_size);
    if (tokens > kMaxCacheTokens || needed * c.page_size > 4 * kMaxCacheTokens) bad("the batch is too large");
    c.sequences.push_back(q);
  }
  // One spare page by default: never written, so its sentinels are checked too.
  c.pages = j.contains("pages") ? count(j["pages"], "pages", 1, 4 * kMaxCacheTokens) : needed + 1;
  if (c.pages * c.page_size > kMaxCacheSlots)
    bad("pages x page_size = " + std::to_string(c.pages * c.page_size) + " slots, more than " + std::to_string(kMaxCacheSlots));
  if (c.pages < needed) bad("pages = " + std::to_string(c.pages) + " but the batch needs " + std::to_string(needed));
  if (j.contains("page_table")) {
    const nlohmann::json& t = j["page_table"];
    const auto is_row = [](const nlohmann::json& r) {
      return r.is_array() && std::all_of(r.begin(), r.end(), [](const nlohmann::json& x) { return x.is_number_integer(); });
    };
    if (!t.is_array() || !std::all_of(t.begin(), t.end(), is_row)) bad("page_table must be an array of arrays of integers");
    c.page_table = t.get<std::vector<std::vector<std::int64_t>>>();
    if (c.page_table.size() != c.sequences.size()) bad("page_table has " + std::to_string(c.page_table.size()) + " rows for " + std::to_string(c.sequences.size()) + " sequences");
    check_table(c, "--kv-cache: page_table");
  } else {
    c.page_table = generated_table(c, seed);
    c.generated = true;
  }
  return c;
}

nlohmann::json to_json(const CacheSpec& c) {
  nlohmann::json seqs = nlohmann::json::array();
  for (const Sequence& s : c.sequences) seqs.push_back({{"cached", s.cached}, {"appended", s.appended}});
  return {{"sequences", seqs},     {"cache", to_string(c.kind)}, {"layout", to_string(c.layout)},
          {"page_size", c.page_size}, {"pages", c.pages},        {"page_table", c.page_table},
          {"page_table_generated", c.generated}};
}

std::vector<std::int64_t> positions(const CacheSpec& c) {
  std::vector<std::int64_t> p;
  for (const Sequence& s : c.sequences)
    for (std::int64_t i = 0; i < s.appended; ++i) p.push_back(s.cached + i);
  return p;
}

std::vector<std::int64_t> batch_indices(const CacheSpec& c) {
  std::vector<std::int64_t> b;
  for (std::size_t s = 0; s < c.sequences.size(); ++s) b.insert(b.end(), static_cast<std::size_t>(c.sequences[s].appended), static_cast<std::int64_t>(s));
  return b;
}

std::vector<std::int64_t> append_indptr(const CacheSpec& c) {
  std::vector<std::int64_t> p{0};
  for (const Sequence& s : c.sequences) p.push_back(p.back() + s.appended);
  return p;
}

std::vector<std::int64_t> seq_lens(const CacheSpec& c) {
  std::vector<std::int64_t> l;
  for (const Sequence& s : c.sequences) l.push_back(s.length());
  return l;
}

std::optional<std::int64_t> slot_of(const CacheSpec& c, std::size_t s, std::int64_t index) {
  if (s >= c.page_table.size() || index < 0) return std::nullopt;
  const auto page = static_cast<std::size_t>(index / c.page_size);
  if (page >= c.page_table[s].size()) return std::nullopt;
  return c.page_table[s][page] * c.page_size + index % c.page_size;
}

std::vector<std::int64_t> token_slots(const CacheSpec& c) {
  std::vector<std::int64_t> out;
  for (std::size_t s = 0; s < c.sequences.size(); ++s)
    for (std::int64_t i = 0; i < c.sequences[s].appended; ++i) out.push_back(*slot_of(c, s, c.sequences[s].cached + i));
  return out;
}

std::int64_t element_index(const CacheSpec& c, std::int64_t slot, std::int64_t head, std::int64_t d, std::int64_t heads,
                           std::int64_t D) {
  const std::int64_t page = slot / c.page_size, off = slot % c.page_size;
  if (c.layout == CacheLayout::nhd) return ((page * c.page_size + off) * heads + head) * D + d;
  return ((page * heads + head) * c.page_size + off) * D + d;
}

std::vector<std::int64_t> cache_shape(const CacheSpec& c, std::int64_t heads, std::int64_t D) {
  if (c.layout == CacheLayout::nhd) return {c.pages, c.page_size, heads, D};
  return {c.pages, heads, c.page_size, D};
}

PagedMetadata paged_metadata(const CacheSpec& c) {
  PagedMetadata m;
  m.indptr.push_back(0);
  for (std::size_t s = 0; s < c.sequences.size(); ++s) {
    m.indices.insert(m.indices.end(), c.page_table[s].begin(), c.page_table[s].end());
    m.indptr.push_back(static_cast<std::int64_t>(m.indices.size()));
    const std::int64_t len = c.sequences[s].length();
    m.last_page_len.push_back(len - (pages_of(len, c.page_size) - 1) * c.page_size);
  }
  return m;
}

CacheSpec with_paged_metadata(CacheSpec c, const PagedMetadata& m, const std::string& what) {
  const std::size_t S = c.sequences.size();
  if (m.indptr.size() != S + 1) input_error(what, "kv_indptr has " + std::to_string(m.indptr.size()) + " entries for " + std::to_string(S) + " sequences (needs " + std::to_string(S + 1) + ")");
  if (m.last_page_len.size() != S) input_error(what, "kv_last_page_len has " + std::to_string(m.last_page_len.size()) + " entries for " + std::to_string(S) + " sequences");
  if (m.indptr[0] != 0) input_error(what, "kv_indptr[0] is " + std::to_string(m.indptr[0]) + ", not 0");
  for (std::size_t s = 0; s < S; ++s)
    if (m.indptr[s + 1] < m.indptr[s]) input_error(what, "kv_indptr not monotone at " + std::to_string(s + 1));
  if (m.indptr[S] != static_cast<std::int64_t>(m.indices.size()))
    input_error(what, "kv_indptr ends at " + std::to_string(m.indptr[S]) + " but kv_indices has " + std::to_string(m.indices.size()) + " entries");
  for (std::size_t s = 0; s < S; ++s) {
    c.page_table[s].assign(m.indices.begin() + m.indptr[s], m.indices.begin() + m.indptr[s + 1]);
    const std::int64_t n = m.indptr[s + 1] - m.indptr[s], len = c.sequences[s].length();
    if (n > 0 && m.last_page_len[s] != len - (n - 1) * c.page_size)
      input_error(what, "kv_last_page_len[" + std::to_string(s) + "] = " + std::to_string(m.last_page_len[s]) + " but " +
                            std::to_string(len) + " tokens in " + std::to_string(n) + " pages of page_size " +
                            std::to_string(c.page_size) + " leave " + std::to_string(len - (n - 1) * c.page_size));
  }
  check_table(c, what);
  c.generated = false;
  return c;
}

std::vector<std::int64_t> checked_slot_mapping(const CacheSpec& c, const std::vector<std::int64_t>& slots, const std::string& what) {
  if (static_cast<std::int64_t>(slots.size()) != c.tokens())
    input_error(what, "slot_mapping has " + std::to_string(slots.size()) + " entries for " + std::to_string(c.tokens()) + " tokens");
  std::set<std::int64_t> seen;
  for (std::size_t t = 0; t < slots.size(); ++t) {
    if (slots[t] < 0 || slots[t] >= c.slots())
      input_error(what, "slot_mapping[" + std::to_string(t) + "] = " + std::to_string(slots[t]) + " outside [0, " + std::to_string(c.slots()) + ")");
    if (!seen.insert(slots[t]).second) input_error(what, "slot " + std::to_string(slots[t]) + " mapped to two tokens");
  }
  return slots;
}

}  // namespace ropecheck::kv
