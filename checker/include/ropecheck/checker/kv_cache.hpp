// Checking a KV-cache write (checker/CHECK_REPORT.md, "KV-cache writes"): a candidate cache (paged NHD /
// HND, or slot-mapped) of a golden set written with --kv-cache. Each written slot is mapped back to its
// token through core/kv_cache.hpp and judged as k_rot with the usual class (the ordinary check, run on
// the gathered [tokens, heads, head_dim] tensor); v, when given, must be the set's v stored bit-exactly;
// every slot not written must keep its sentinel bytes. A failing write is diagnosed by name from the
// catalogue of cache mistakes (DIAGNOSIS.md, "KV-cache writes").
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/checker/kernel_run.hpp"
#include "ropecheck/checker/run_check.hpp"
#include "ropecheck/kut/kernel_under_test.hpp"
#include "ropecheck/core/kv_cache.hpp"
#include "ropecheck/golden/golden_set.hpp"

namespace ropecheck::checker {

// The default sentinel: every byte 0xFF (a NaN in f64, f32, f16 and bf16, which no rotation of finite
// inputs stores).
inline constexpr std::uint8_t kDefaultSentinelByte = 0xFF;

// A candidate cache: k_cache (and v_cache) in one float dtype, the sentinel one element of it, and the
// cache description the kernel wrote through (the set's, or the kernel's own metadata read back).
struct KvCacheCandidate {
  io::Tensor k_cache;
  std::optional<io::Tensor> v_cache;
  std::vector<std::uint8_t> sentinel;  // one element's bytes
  bool sentinel_declared = false;      // from the file's tensor `sentinel`, else the default
  kv::CacheSpec cache;
  std::vector<std::int64_t> slots;     // slot of each token
  bool own_metadata = false;           // the file carried kv_indptr / kv_indices / kv_last_page_len or slot_mapping
};

// The set's cache description (its manifest's kv_cache record). InputError when the set has none.
kv::CacheSpec golden_cache_spec(const golden::GoldenSet& g);

// Reads `path` (tensors k_cache, optionally v_cache, sentinel, and the kernel's own metadata) against the
// set. InputError, one line, for a set without a cache, a cache of the wrong shape or dtype (its
// page_size dimension named), a sentinel not one element of the cache's dtype, or bad metadata
// (kv::with_paged_metadata, kv::checked_slot_mapping).
KvCacheCandidate read_kv_cache_candidate(const std::filesystem::path& path, const golden::GoldenSet& g);
// The same from tensors already in memory (Python's check(..., kv_cache=)); `what` starts its messages.
KvCacheCandidate kv_cache_candidate(const std::vector<io::Tensor>& tensors, const golden::GoldenSet& g,
                                    const std::string& what);

struct SlotProblem {
  std::string kind;  // "out-of-slot write", "missing write", "v changed"
  std::int64_t slot = 0, page = 0, offset = 0;  // offset in page
  std::int64_t token = -1;                      // the token the slot holds (-1: none)
};

struct KvHypothesis {
  std::string id, title;
  std::int64_t tokens_moved = 0;  // tokens the mistake puts elsewhere (slot or position)
};

struct KvCacheReport {
  std::string dtype, cache, layout;
  std::int64_t pages = 0, page_size = 0, heads = 0, head_dim = 0, tokens = 0;
  bool own_metadata = false, sentinel_declared = false, v_given = false;
  std::int64_t untouched_slots = 0, out_of_slot_writes = 0, missing_writes = 0, v_mismatches = 0;
  std::vector<SlotProblem> problems;  // the first kMaxProblems, in slot order
  CheckOutcome k;                     // the k_rot check of the gathered tensor
  std::vector<KvHypothesis> diagnosis;  // mistakes that explain the cache (empty: none, or passing)
  bool diagnosed = false;               // the diagnosis ran
  Verdict verdict = Verdict::fail;
  std::string reason;

  nlohmann::json to_json() const;
  std::string summary() const;
};
inline constexpr std::size_t kMaxProblems = 10;

// The check. request.options.only / name_map are set here (the gathered k_rot.<dtype>).
KvCacheReport check_kv_cache(const golden::GoldenSet& g, const KvCacheCandidate& c, CheckRequest request);

// A kernel's fused append (kernel_abi.h revision 3, kut::KvAppendCall) on the set's batch: the cache of
// the first of the set's dtypes the kernel writes, handed over full of the default sentinel, as a candidate
// (the set's own metadata). No candidate when the kernel has no such entry point or answers unsupported for
// every dtype: `not_tested` says why (the cache is then not tested, never passed). A failed call is listed
// in `failures`, its caches read as the sentinel (every token a missing write: the cache fails).
struct KernelKvCache {
  std::optional<KvCacheCandidate> candidate;
  std::string not_tested;
  std::vector<KernelFailure> failures;
};
KernelKvCache kernel_kv_cache(kut::KernelUnderTest& kernel, const golden::GoldenSet& g);

// The catalogue of cache mistakes: id, title, source (checker/DIAGNOSIS.md).
struct KvMistakeInfo {
  std::string id, title, source;
};
const std::vector<KvMistakeInfo>& kv_mistake_catalogue();

}  // namespace ropecheck::checker
