// The revision-3 fused calls' descriptions (kernel_abi.h) in both directions: a store spec and a KV cache
// as the ABI's plain C fields, and back. The plugin client fills the ABI from what check passes
// (plugin/), the built-in kernels' plugin reads it back (builtin_plugin.cpp): one translation each way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ropecheck/core/kv_cache.hpp"
#include "ropecheck/core/quantized_store_spec.hpp"
#include "ropecheck/kernel_abi.h"

namespace ropecheck::kut {

// The ABI's code of a dtype (ROPECHECK_DTYPE_*), shared by the plugin client and the fused descriptions.
std::int32_t abi_dtype(DType d);

ropecheck_store_params abi_store(const quant::StoreSpec& s);
// nullopt with `why` for fields that name no store of golden --stores.
std::optional<quant::StoreSpec> store_from_abi(const ropecheck_store_params& p, std::string& why);

// A cache description's metadata as the ABI carries it: the arrays, and params whose pointers point into
// them (valid while this object lives and is not moved; the plugin client copies the arrays).
struct AbiCache {
  ropecheck_kv_cache_params params{};
  std::vector<std::int64_t> append_indptr, seq_lens, kv_indptr, kv_indices, last_page_len, slot_mapping;
};
AbiCache abi_cache(const kv::CacheSpec& c);
// The description back from the ABI's metadata for `tokens` appended tokens: std::invalid_argument (one
// line) for metadata that does not describe one (kv::with_paged_metadata's rules; a slot mapping whose
// offsets in a block are not the tokens' cache indices modulo the block size).
kv::CacheSpec cache_from_abi(const ropecheck_kv_cache_params& p, std::int64_t tokens);

}  // namespace ropecheck::kut
