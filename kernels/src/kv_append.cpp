// kv_append.hpp: rotate with the plan's recipe into a dense row buffer, then scatter each token's rows to
// its slot (and, with a mistake, to where that bug sends them).
#include "ropecheck/kernels/kv_append.hpp"

#include <cstring>
#include <optional>
#include <stdexcept>

#include "ropecheck/core/quantized.hpp"

namespace ropecheck::kernels {

std::string_view to_string(AppendMistake m) {
  switch (m) {
    case AppendMistake::none: return "none";
    case AppendMistake::last_page_off_by_one: return "kv-last-page-off-by-one";
    case AppendMistake::layout_swapped: return "kv-layout-swapped";
    case AppendMistake::wrong_sequence_pages: return "kv-wrong-sequence-pages";
    case AppendMistake::positions_not_offset: return "kv-positions-not-offset";
    case AppendMistake::past_page_end: return "kv-write-past-page-end";
    case AppendMistake::decode_at_prefill_offset: return "kv-decode-at-prefill-offset";
  }
  return "?";
}

namespace {

// Where the kernel writes appended token i of sequence s (nullopt: outside the cache, dropped).
std::optional<std::int64_t> write_slot(const kv::CacheSpec& c, std::size_t s, std::int64_t i, AppendMistake m) {
  const kv::Sequence& q = c.sequences[s];
  switch (m) {
    case AppendMistake::last_page_off_by_one: {
      // The flat kv_indices walked from the sequence's first page, one page too far.
      const kv::PagedMetadata md = kv::paged_metadata(c);
      const std::int64_t idx = q.cached + i + c.page_size;
      const std::int64_t at = md.indptr[s] + idx / c.page_size;
      if (at >= static_cast<std::int64_t>(md.indices.size())) return std::nullopt;
      return md.indices[static_cast<std::size_t>(at)] * c.page_size + idx % c.page_size;
    }
    case AppendMistake::wrong_sequence_pages: {
      const std::size_t o = (s + 1) % c.sequences.size();
      return kv::slot_of(c, o, q.cached + i);
    }
    case AppendMistake::past_page_end: {
      const std::int64_t s0 = *kv::slot_of(c, s, q.cached), slot = s0 + i;
      return slot < c.slots() ? std::optional(slot) : std::nullopt;
    }
    case AppendMistake::decode_at_prefill_offset:
      return kv::slot_of(c, s, q.decode() ? i : q.cached + i);
    default: return kv::slot_of(c, s, q.cached + i);
  }
}

}  // namespace

void rope_append_kv(const RopePlan& plan, const kv::CacheSpec& cache, std::int64_t heads, std::span<const float> k_in,
                    std::span<const float> v_in, DType dtype, std::span<std::uint8_t> k_cache,
                    std::span<std::uint8_t> v_cache, AppendMistake mistake) {
  const std::int64_t T = cache.tokens(), D = plan.head_dim, row = heads * D;
  const auto es = static_cast<std::size_t>(format_info(dtype).storage_bits / 8);
  const auto cache_bytes = static_cast<std::size_t>(cache.slots() * row) * es;
  if (static_cast<std::int64_t>(k_in.size()) != T * row || k_cache.size() != cache_bytes ||
      (!v_in.empty() && (v_in.size() != k_in.size() || v_cache.size() != cache_bytes)))
    throw std::invalid_argument("rope_append_kv: k, v or the cache do not match the batch's " + std::to_string(T) +
                                " tokens x " + std::to_string(row) + " values");
  std::vector<std::int64_t> pos = kv::positions(cache);
  if (mistake == AppendMistake::positions_not_offset) {
    std::size_t t = 0;
    for (const kv::Sequence& q : cache.sequences)
      for (std::int64_t i = 0; i < q.appended; ++i) pos[t++] = i;
  }
  std::vector<std::uint8_t> rotated(static_cast<std::size_t>(T * row) * es), q_dummy(rotated.size());
  std::vector<float> k_copy(k_in.begin(), k_in.end());
  // rope_apply rotates q and k together: k's rows are passed as q too (the same rotation), q's output discarded.
  rope_apply(plan, PositionsView::of(pos), TensorView::contiguous(k_copy.data(), DType::f32, T, heads, D),
             TensorView::contiguous(q_dummy.data(), dtype, T, heads, D),
             TensorView::contiguous(k_copy.data(), DType::f32, T, heads, D),
             TensorView::contiguous(rotated.data(), dtype, T, heads, D), KernelOptions{1, true});
  kv::CacheSpec as_written = cache;
  if (mistake == AppendMistake::layout_swapped)
    as_written.layout = cache.layout == kv::CacheLayout::nhd ? kv::CacheLayout::hnd : kv::CacheLayout::nhd;
  std::int64_t t = 0;
  for (std::size_t s = 0; s < cache.sequences.size(); ++s)
    for (std::int64_t i = 0; i < cache.sequences[s].appended; ++i, ++t) {
      const std::optional<std::int64_t> slot = write_slot(cache, s, i, mistake);
      if (!slot) continue;
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t d = 0; d < D; ++d) {
          const auto at = static_cast<std::size_t>(kv::element_index(as_written, *slot, h, d, heads, D)) * es;
          const auto from = static_cast<std::size_t>((t * heads + h) * D + d);
          std::memcpy(k_cache.data() + at, rotated.data() + from * es, es);
          if (!v_in.empty()) store_element(v_cache.data() + at, quant::round_to(v_in[from], dtype), dtype);
        }
    }
}

}  // namespace ropecheck::kernels
