// A KV-cache write, described: a batch of sequences (tokens already cached, tokens appended this step)
// and the cache they are appended to, paged (FlashInfer's kv_indptr / kv_indices / kv_last_page_len,
// NHD or HND pages) or slot-mapped (vLLM's slot_mapping over [blocks, block_size, heads, head_dim]).
// The one owner of the mapping slot <-> (sequence, token): golden/ writes its metadata, kernels/ writes
// a cache through it, the checker reads a cache back through it. The grammar and the cache's bytes:
// golden/GOLDEN_FORMAT.md ("KV-cache writes").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ropecheck::kv {

enum class CacheKind { paged, slots };
enum class CacheLayout { nhd, hnd };  // a page as [page_size, heads, D] or [heads, page_size, D]
std::string_view to_string(CacheKind k);    // "paged", "slots"
std::string_view to_string(CacheLayout l);  // "NHD", "HND"

// One sequence of the batch: `cached` tokens are in the cache already (positions 0 .. cached-1, cache
// indices likewise); `appended` tokens are written now, token i at position and cache index cached + i.
// A prefill step has cached 0; a decode step appends 1 token after cached > 0.
struct Sequence {
  std::int64_t cached = 0, appended = 0;
  std::int64_t length() const { return cached + appended; }
  bool decode() const { return cached > 0 && appended == 1; }
};

struct CacheSpec {
  std::vector<Sequence> sequences;
  CacheKind kind = CacheKind::paged;
  CacheLayout layout = CacheLayout::nhd;  // slots: always NHD (vLLM's flash layout)
  std::int64_t page_size = 16;            // slots: the block size
  std::int64_t pages = 0;                 // pages (blocks) in the pool
  // page_table[s]: the pool pages of sequence s, in order (ceil(length / page_size) of them).
  std::vector<std::vector<std::int64_t>> page_table;
  bool generated = false;  // the page table was generated (seeded shuffle), not given

  std::int64_t tokens() const;  // appended tokens of the batch: the golden set's tokens
  std::int64_t slots() const { return pages * page_size; }
};

// Largest sizes a description may ask for (a golden set stays small enough to check whole).
inline constexpr std::int64_t kMaxCacheTokens = std::int64_t{1} << 20;
inline constexpr std::int64_t kMaxSequences = std::int64_t{1} << 16;
inline constexpr std::int64_t kMaxCacheSlots = std::int64_t{1} << 24;  // pages * page_size

// The description (grammar: golden/GOLDEN_FORMAT.md, "KV-cache writes"); a missing page table is
// generated from `seed` (seeded Fisher-Yates over the pool) and recorded. SpecError naming the field.
CacheSpec parse_cache_spec(const nlohmann::json& j, std::uint64_t seed);
// The description as recorded in a manifest (page table always written out; parse_cache_spec reads it
// back to the same spec).
nlohmann::json to_json(const CacheSpec& c);

// Position of each appended token, in batch order (sequence by sequence): cached + i.
std::vector<std::int64_t> positions(const CacheSpec& c);
// Sequence of each appended token (FlashInfer's batch_indices).
std::vector<std::int64_t> batch_indices(const CacheSpec& c);
// Where each sequence's appended tokens start in the batch, and the total: [S + 1] (FlashInfer's
// append_indptr, vLLM's query_start_loc / cu_seqlens).
std::vector<std::int64_t> append_indptr(const CacheSpec& c);
// Each sequence's length after the append, cached + appended (FlashInfer's seq_lens, vLLM's seq_lens).
std::vector<std::int64_t> seq_lens(const CacheSpec& c);
// Slot (page * page_size + offset in page) of cache index `index` of sequence s; nullopt past its pages.
std::optional<std::int64_t> slot_of(const CacheSpec& c, std::size_t s, std::int64_t index);
// Slot of each appended token: vLLM's slot_mapping, and what the checker reads back.
std::vector<std::int64_t> token_slots(const CacheSpec& c);

// The flat element index of (slot, head, d) in a cache of `heads` heads of width D, by layout.
std::int64_t element_index(const CacheSpec& c, std::int64_t slot, std::int64_t head, std::int64_t d, std::int64_t heads,
                           std::int64_t D);
// The cache tensor's shape: [pages, page_size, heads, D] (NHD) or [pages, heads, page_size, D] (HND).
std::vector<std::int64_t> cache_shape(const CacheSpec& c, std::int64_t heads, std::int64_t D);

// FlashInfer's metadata: kv_indptr [S+1], kv_indices [sum pages], kv_last_page_len [S].
struct PagedMetadata {
  std::vector<std::int64_t> indptr, indices, last_page_len;
};
PagedMetadata paged_metadata(const CacheSpec& c);
// A page table read back from a kernel's own metadata, validated against the batch: indptr starts at
// 0, is monotone and ends at indices' size; every index in [0, pages); each sequence holds exactly
// ceil(length / page_size) pages and its last_page_len is length - (pages - 1) * page_size.
// InputError "WHAT: why" (one line) otherwise.
CacheSpec with_paged_metadata(CacheSpec c, const PagedMetadata& m, const std::string& what);
// A slot mapping read back: one slot per appended token, each in [0, slots()), no two equal. The page
// table is not needed for reading; returned as the slots themselves. InputError otherwise.
std::vector<std::int64_t> checked_slot_mapping(const CacheSpec& c, const std::vector<std::int64_t>& slots,
                                               const std::string& what);

}  // namespace ropecheck::kv
