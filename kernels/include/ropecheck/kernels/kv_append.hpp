// "Rotate then append to a KV cache" on the CPU (kernels/RECIPES.md, "KV-cache append"): k rotated by a
// recipe (rope_kernels.hpp) at each appended token's position, then it and v stored into a paged
// (NHD / HND) or slot-mapped cache through core/kv_cache.hpp's mapping. The cache's other slots are not
// touched. With a mistake, the same with one known bug of fused append kernels, so tests (and the ABI
// later) share one definition of each (checker/DIAGNOSIS.md, "KV-cache writes").
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "ropecheck/core/kv_cache.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"

namespace ropecheck::kernels {

enum class AppendMistake {
  none,
  last_page_off_by_one,  // the sequence's length taken as pages * page_size + last_page_len: one page late
  layout_swapped,        // NHD offsets into an HND cache, or HND into NHD
  wrong_sequence_pages,  // sequence s written through sequence s+1's pages (batch index off by one)
  positions_not_offset,  // every sequence rotated from position 0 (cached ignored), right slots
  past_page_end,         // a sequence's tokens written contiguously from its first slot: across a page end
                         // they land in the physically next page
  decode_at_prefill_offset,  // a decode step written at cache index 0 (the prefill offset), not at cached
};
std::string_view to_string(AppendMistake m);
inline constexpr AppendMistake kAppendMistakes[] = {
    AppendMistake::last_page_off_by_one, AppendMistake::layout_swapped,      AppendMistake::wrong_sequence_pages,
    AppendMistake::positions_not_offset, AppendMistake::past_page_end,       AppendMistake::decode_at_prefill_offset};

// k_in, v_in: [tokens, heads, D] f32 (the golden inputs; v may be empty). k_cache, v_cache: the cache
// tensors' bytes in `dtype` (cache_shape(cache, heads, D)), already holding their sentinels; v_cache is
// ignored when v_in is empty. A write the mistake sends outside the cache is dropped (a real kernel
// would corrupt memory). std::invalid_argument on mismatched sizes.
void rope_append_kv(const RopePlan& plan, const kv::CacheSpec& cache, std::int64_t heads, std::span<const float> k_in,
                    std::span<const float> v_in, DType dtype, std::span<std::uint8_t> k_cache,
                    std::span<std::uint8_t> v_cache, AppendMistake mistake = AppendMistake::none);

}  // namespace ropecheck::kernels
