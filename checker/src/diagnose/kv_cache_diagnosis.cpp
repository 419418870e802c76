// kv_detail::diagnose_kv_cache (kv_cache_internal.hpp): each cache mistake of the catalogue as the place
// it sends every token (slot, layout, position shift), evaluated exactly (MistakenTruth) at the tokens
// it moves.
#include <map>

#include "../kv_cache_internal.hpp"
#include "../check_internal.hpp"
#include "internal.hpp"
#include "ropecheck/reference/scalar.hpp"

namespace ropecheck::checker {

const std::vector<KvMistakeInfo>& kv_mistake_catalogue() {
  static const std::vector<KvMistakeInfo> c = {
      {"kv-last-page-off-by-one", "write index from pages * page_size + last_page_len: one page late",
       "FlashInfer kv_last_page_len semantics (len = (pages - 1) * page_size + last_page_len); recipe mistake"},
      {"kv-layout-swapped", "NHD offsets into an HND cache (or HND into NHD)", "FlashInfer kv_layout; recipe mistake"},
      {"kv-wrong-sequence-pages", "sequence s written through sequence s+1's pages (batch index off by one)",
       "FlashInfer batch_indices / kv_indptr; recipe mistake"},
      {"kv-positions-not-offset", "every sequence rotated from position 0 (its cached tokens ignored)",
       "FlashInfer append positions, vLLM positions per token; recipe mistake"},
      {"kv-write-past-page-end", "a sequence's tokens written contiguously from its first slot, across the page end",
       "vLLM slot = block_number * block_size + block_offset; recipe mistake"},
      {"kv-decode-at-prefill-offset", "a decode step written at cache index 0 instead of after its cached tokens",
       "decode append at kv_len - 1; recipe mistake"},
  };
  return c;
}

namespace kv_detail {
namespace {

using diagnose_detail::MistakenTruth;

struct Place {
  std::optional<std::int64_t> slot;
  std::int64_t shift = 0;  // added to the token's position
};

// Where mistake `id` puts appended token i of sequence s.
Place place(const std::string& id, const kv::CacheSpec& c, std::size_t s, std::int64_t i) {
  const kv::Sequence& q = c.sequences[s];
  if (id == "kv-last-page-off-by-one") {
    const kv::PagedMetadata m = kv::paged_metadata(c);
    const std::int64_t idx = q.cached + i + c.page_size, at = m.indptr[s] + idx / c.page_size;
    if (at >= static_cast<std::int64_t>(m.indices.size())) return {};
    return {m.indices[static_cast<std::size_t>(at)] * c.page_size + idx % c.page_size};
  }
  if (id == "kv-wrong-sequence-pages") return {kv::slot_of(c, (s + 1) % c.sequences.size(), q.cached + i)};
  if (id == "kv-positions-not-offset") return {kv::slot_of(c, s, q.cached + i), -q.cached};
  if (id == "kv-write-past-page-end") {
    const std::int64_t slot = *kv::slot_of(c, s, q.cached) + i;
    return {slot < c.slots() ? std::optional(slot) : std::nullopt};
  }
  if (id == "kv-decode-at-prefill-offset") return {kv::slot_of(c, s, q.decode() ? i : q.cached + i)};
  return {kv::slot_of(c, s, q.cached + i)};  // kv-layout-swapped: the right slot, read the other way
}

constexpr std::int64_t kMaxTokens = 64;  // moved tokens evaluated per hypothesis

// Whether every moved token's values lie within the class bound of the mistaken truth; `moved` counts
// the tokens the mistake moves, `discriminating` the elements whose bound is not saturated.
bool explains(const golden::GoldenSet& g, const KvCacheCandidate& c, const std::string& id, accuracy::AccuracyClass cls,
              std::int64_t& moved) {
  const kv::CacheSpec& cs = c.cache;
  kv::CacheSpec read = cs;
  const bool swapped = id == "kv-layout-swapped";
  if (swapped) read.layout = cs.layout == kv::CacheLayout::nhd ? kv::CacheLayout::hnd : kv::CacheLayout::nhd;
  const DType dt = *check_detail::float_dtype(c.k_cache.dtype);
  const std::int64_t H = g.heads(), D = g.spec().rope.head_dim;
  std::map<std::int64_t, std::vector<std::pair<std::int64_t, std::int64_t>>> by_shift;  // shift -> (token, slot)
  std::int64_t t = 0;
  for (std::size_t s = 0; s < cs.sequences.size(); ++s)
    for (std::int64_t i = 0; i < cs.sequences[s].appended; ++i, ++t) {
      const Place p = place(id, cs, s, i);
      if (!p.slot || (*p.slot == c.slots[static_cast<std::size_t>(t)] && p.shift == 0 && !swapped)) continue;
      if (++moved <= kMaxTokens) by_shift[p.shift].push_back({t, *p.slot});
    }
  if (moved == 0) return false;
  std::int64_t discriminating = 0;
  for (const auto& [shift, tokens] : by_shift) {
    Mistake m;
    m.position_shift = shift;
    const ScopedPrecision precision(MistakenTruth::precision_bits(g, m));
    MistakenTruth mt(g, m);
    for (const auto& [tok, slot] : tokens)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t d = 0; d < D; ++d) {
          const std::int64_t at = kv::element_index(read, slot, h, d, H, D);
          const double x = load_element(c.k_cache.data.data() + static_cast<std::size_t>(at) * io::dtype_size(c.k_cache.dtype), dt);
          const MistakenTruth::Value v = mt.at("k_rot", (tok * H + h) * D + d, cls, dt);
          if (!(std::fabs(x - v.value) <= v.allowed)) return false;
          discriminating += !v.saturated;
        }
  }
  return discriminating > 0;
}

}  // namespace

std::vector<KvHypothesis> diagnose_kv_cache(const golden::GoldenSet& g, const KvCacheCandidate& c, const Criterion& cr) {
  const accuracy::AccuracyClass cls =
      cr.kind == Criterion::Kind::accuracy_class ? cr.accuracy_class : accuracy::kDefaultAccuracyClass;
  std::vector<KvHypothesis> out;
  for (const KvMistakeInfo& info : kv_mistake_catalogue()) {
    if (info.id == "kv-last-page-off-by-one" && c.cache.kind != kv::CacheKind::paged) continue;  // no last_page_len
    // One layout for slots; NHD and HND coincide with one head or one slot per page.
    if (info.id == "kv-layout-swapped" && (c.cache.kind != kv::CacheKind::paged || g.heads() == 1 || c.cache.page_size == 1))
      continue;
    std::int64_t moved = 0;
    if (explains(g, c, info.id, cls, moved)) out.push_back({info.id, info.title, moved});
  }
  return out;
}

}  // namespace kv_detail
}  // namespace ropecheck::checker
