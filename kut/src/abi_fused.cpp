#include "ropecheck/kut/abi_fused.hpp"

#include <stdexcept>

#include "ropecheck/core/input_error.hpp"

namespace ropecheck::kut {

std::int32_t abi_dtype(DType d) {
  switch (d) {
    case DType::f64: return ROPECHECK_DTYPE_F64;
    case DType::f32: return ROPECHECK_DTYPE_F32;
    case DType::f16: return ROPECHECK_DTYPE_F16;
    case DType::bf16: return ROPECHECK_DTYPE_BF16;
  }
  return -1;
}

ropecheck_store_params abi_store(const quant::StoreSpec& s) {
  ropecheck_store_params p{};
  switch (s.kind) {
    case quant::StoreKind::fp8:
      p.kind = ROPECHECK_STORE_FP8;
      p.fp8_format = s.fp8 == quant::Fp8::e4m3fn ? ROPECHECK_FP8_E4M3FN : ROPECHECK_FP8_E5M2;
      p.fp8_overflow = s.overflow == quant::Fp8Overflow::saturate ? ROPECHECK_FP8_SATURATE : ROPECHECK_FP8_NONFINITE;
      p.scale_granularity =
          s.scale == quant::ScaleGranularity::per_token_head ? ROPECHECK_SCALE_PER_TOKEN_HEAD : ROPECHECK_SCALE_PER_TOKEN;
      p.bits = 8;
      p.scale_dtype = ROPECHECK_DTYPE_F32;
      break;
    case quant::StoreKind::q8_0:
    case quant::StoreKind::q4_0:
      p.kind = s.kind == quant::StoreKind::q8_0 ? ROPECHECK_STORE_Q8_0 : ROPECHECK_STORE_Q4_0;
      p.group_size = 32;
      p.bits = s.kind == quant::StoreKind::q8_0 ? 8 : 4;
      p.scale_dtype = ROPECHECK_DTYPE_F16;
      break;
    case quant::StoreKind::affine:
      p.kind = ROPECHECK_STORE_AFFINE;
      p.group_size = s.affine.group_size;
      p.bits = s.affine.bits;
      p.scale_dtype = abi_dtype(s.affine.scale_dtype);
      break;
  }
  return p;
}

std::optional<quant::StoreSpec> store_from_abi(const ropecheck_store_params& p, std::string& why) {
  quant::StoreSpec s;
  switch (p.kind) {
    case ROPECHECK_STORE_FP8:
      s.kind = quant::StoreKind::fp8;
      if (p.fp8_format != ROPECHECK_FP8_E4M3FN && p.fp8_format != ROPECHECK_FP8_E5M2) break;
      if (p.fp8_overflow != ROPECHECK_FP8_SATURATE && p.fp8_overflow != ROPECHECK_FP8_NONFINITE) break;
      if (p.scale_granularity != ROPECHECK_SCALE_PER_TOKEN && p.scale_granularity != ROPECHECK_SCALE_PER_TOKEN_HEAD) break;
      s.fp8 = p.fp8_format == ROPECHECK_FP8_E4M3FN ? quant::Fp8::e4m3fn : quant::Fp8::e5m2;
      s.overflow = p.fp8_overflow == ROPECHECK_FP8_SATURATE ? quant::Fp8Overflow::saturate : quant::Fp8Overflow::nonfinite;
      s.scale = p.scale_granularity == ROPECHECK_SCALE_PER_TOKEN ? quant::ScaleGranularity::per_token
                                                                 : quant::ScaleGranularity::per_token_head;
      return s;
    case ROPECHECK_STORE_Q8_0: s.kind = quant::StoreKind::q8_0; return s;
    case ROPECHECK_STORE_Q4_0: s.kind = quant::StoreKind::q4_0; return s;
    case ROPECHECK_STORE_AFFINE: {
      s.kind = quant::StoreKind::affine;
      const bool group = p.group_size == 32 || p.group_size == 64 || p.group_size == 128;
      const bool dt = p.scale_dtype == ROPECHECK_DTYPE_F32 || p.scale_dtype == ROPECHECK_DTYPE_F16 ||
                      p.scale_dtype == ROPECHECK_DTYPE_BF16;
      if (!group || (p.bits != 4 && p.bits != 8) || !dt) break;
      s.affine.group_size = p.group_size;
      s.affine.bits = p.bits;
      s.affine.scale_dtype = p.scale_dtype == ROPECHECK_DTYPE_F32   ? DType::f32
                             : p.scale_dtype == ROPECHECK_DTYPE_F16 ? DType::f16
                                                                    : DType::bf16;
      return s;
    }
    default: break;
  }
  why = "store kind " + std::to_string(p.kind) + " with these fields is not one of golden --stores' stores";
  return std::nullopt;
}

AbiCache abi_cache(const kv::CacheSpec& c) {
  AbiCache a;
  a.append_indptr = kv::append_indptr(c);
  a.seq_lens = kv::seq_lens(c);
  ropecheck_kv_cache_params& p = a.params;
  p.kind = c.kind == kv::CacheKind::paged ? ROPECHECK_CACHE_PAGED : ROPECHECK_CACHE_SLOTS;
  p.layout = c.layout == kv::CacheLayout::nhd ? ROPECHECK_CACHE_NHD : ROPECHECK_CACHE_HND;
  p.pages = c.pages;
  p.page_size = c.page_size;
  p.sequences = static_cast<std::int32_t>(c.sequences.size());
  p.append_indptr = a.append_indptr.data();
  p.seq_lens = a.seq_lens.data();
  if (c.kind == kv::CacheKind::paged) {
    kv::PagedMetadata m = kv::paged_metadata(c);
    a.kv_indptr = std::move(m.indptr);
    a.kv_indices = std::move(m.indices);
    a.last_page_len = std::move(m.last_page_len);
    p.kv_indptr = a.kv_indptr.data();
    p.kv_indices = a.kv_indices.data();
    p.kv_last_page_len = a.last_page_len.data();
  } else {
    a.slot_mapping = kv::token_slots(c);
    p.slot_mapping = a.slot_mapping.data();
  }
  return a;
}

kv::CacheSpec cache_from_abi(const ropecheck_kv_cache_params& p, std::int64_t tokens) {
  const auto bad = [](const std::string& why) { return std::invalid_argument("kv cache metadata: " + why); };
  if (p.sequences < 1 || p.pages < 1 || p.page_size < 1 || !p.append_indptr || !p.seq_lens)
    throw bad("no sequences, pages or page size");
  kv::CacheSpec c;
  c.kind = p.kind == ROPECHECK_CACHE_PAGED ? kv::CacheKind::paged : kv::CacheKind::slots;
  c.layout = p.layout == ROPECHECK_CACHE_HND ? kv::CacheLayout::hnd : kv::CacheLayout::nhd;
  c.pages = p.pages;
  c.page_size = p.page_size;
  const auto S = static_cast<std::size_t>(p.sequences);
  if (p.append_indptr[0] != 0 || p.append_indptr[S] != tokens) throw bad("append_indptr does not span the tokens");
  for (std::size_t s = 0; s < S; ++s) {
    const std::int64_t appended = p.append_indptr[s + 1] - p.append_indptr[s];
    if (appended < 0 || p.seq_lens[s] < appended) throw bad("append_indptr / seq_lens inconsistent");
    c.sequences.push_back({p.seq_lens[s] - appended, appended});
  }
  if (c.kind == kv::CacheKind::paged) {
    if (!p.kv_indptr || !p.kv_indices || !p.kv_last_page_len) throw bad("a paged cache without kv_indptr / kv_indices");
    kv::PagedMetadata m;
    m.indptr.assign(p.kv_indptr, p.kv_indptr + S + 1);
    if (m.indptr.back() < 0 || m.indptr.back() > c.pages) throw bad("kv_indptr's end outside the pool");
    m.indices.assign(p.kv_indices, p.kv_indices + m.indptr.back());
    m.last_page_len.assign(p.kv_last_page_len, p.kv_last_page_len + S);
    c.page_table.assign(S, {});
    try {
      return kv::with_paged_metadata(c, m, "kv cache metadata");
    } catch (const InputError& e) {
      throw std::invalid_argument(e.what());
    }
  }
  if (!p.slot_mapping) throw bad("a slot-mapped cache without slot_mapping");
  // The page table that gives each appended token its slot (vLLM derives the mapping from it); pages no
  // appended token reaches are never written and stay page 0.
  std::int64_t t = 0;
  for (const kv::Sequence& q : c.sequences) {
    std::vector<std::int64_t> table(static_cast<std::size_t>((q.length() + c.page_size - 1) / c.page_size), 0);
    for (std::int64_t i = 0; i < q.appended; ++i, ++t) {
      const std::int64_t slot = p.slot_mapping[t], index = q.cached + i;
      if (slot < 0 || slot >= c.slots() || slot % c.page_size != index % c.page_size)
        throw bad("slot_mapping[" + std::to_string(t) + "] is not a slot of the token's cache index");
      table[static_cast<std::size_t>(index / c.page_size)] = slot / c.page_size;
    }
    c.page_table.push_back(std::move(table));
  }
  return c;
}

}  // namespace ropecheck::kut
