// check_kv_cache (kv_cache.hpp): the candidate cache read against the set's description, every slot
// scanned (written: gathered into k_rot.<dtype>, v compared bit for bit; not written: its sentinel), the
// gathered k judged by the ordinary check, and a failing cache diagnosed (kv_cache_diagnosis.cpp).
#include <cstring>
#include <set>

#include "check_internal.hpp"
#include "kv_cache_internal.hpp"
#include "ropecheck/core/quantized.hpp"
#include "ropecheck/io/tensor_file.hpp"

namespace ropecheck::checker {

kv::CacheSpec golden_cache_spec(const golden::GoldenSet& g) {
  if (!g.manifest().contains("kv_cache"))
    input_error("--kv-cache", "the golden set " + g.dir().string() + " was not written with --kv-cache");
  nlohmann::json r = g.manifest()["kv_cache"];
  r.erase("file");
  r.erase("page_table_generated");
  return kv::parse_cache_spec(r, 0);  // the table is recorded: nothing generated
}

namespace kv_check {

const io::Tensor* find(const std::vector<io::Tensor>& ts, std::string_view name) {
  for (const io::Tensor& t : ts)
    if (t.name == name) return &t;
  return nullptr;
}

std::vector<std::int64_t> ints(const io::Tensor& t, const std::string& what) {
  if (t.dtype != io::TensorDType::i32 && t.dtype != io::TensorDType::i64) input_error(what, t.name + " must be int32 or int64");
  std::vector<std::int64_t> v(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = t.int_value(static_cast<std::int64_t>(i));
  return v;
}

void check_shape(const io::Tensor& t, const kv::CacheSpec& c, std::int64_t H, std::int64_t D, const std::string& what) {
  const std::vector<std::int64_t> want = kv::cache_shape(c, H, D);
  if (t.shape == want) return;
  const std::size_t page_dim = c.layout == kv::CacheLayout::nhd ? 1 : 2;
  if (t.shape.size() == 4 && t.shape[page_dim] != c.page_size)
    input_error(what, t.name + "'s page_size dimension (" + std::to_string(page_dim) + ") is " + std::to_string(t.shape[page_dim]) +
                          ", the set's page_size is " + std::to_string(c.page_size));
  input_error(what, t.name + " has shape " + nlohmann::json(t.shape).dump() + ", the set's " + std::string(kv::to_string(c.layout)) +
                        " cache is " + nlohmann::json(want).dump());
}

}  // namespace kv_check

KvCacheCandidate read_kv_cache_candidate(const std::filesystem::path& path, const golden::GoldenSet& g) {
  return kv_cache_candidate(io::read_tensor_file(path, "--kv-cache"), g, "--kv-cache " + path.string());
}

KvCacheCandidate kv_cache_candidate(const std::vector<io::Tensor>& ts, const golden::GoldenSet& g, const std::string& what) {
  using namespace kv_check;
  KvCacheCandidate c;
  c.cache = golden_cache_spec(g);
  const io::Tensor* k = find(ts, "k_cache");
  if (!k) input_error(what, "has no tensor k_cache");
  const std::optional<DType> dt = check_detail::float_dtype(k->dtype);
  const std::string dts = dt ? std::string(to_string(*dt)) : "";
  if (!dt || !g.find("k_rot." + dts)) input_error(what, "k_cache's dtype is not one of the set's (" + nlohmann::json(g.dtypes()).dump() + ")");
  // The kernel's own metadata, when it wrote through its own: validated against the batch.
  const io::Tensor *indptr = find(ts, "kv_indptr"), *indices = find(ts, "kv_indices"), *last = find(ts, "kv_last_page_len"),
                   *mapping = find(ts, "slot_mapping");
  if (indptr || indices || last) {
    if (c.cache.kind != kv::CacheKind::paged) input_error(what, "paged metadata for the set's slot-mapped cache");
    if (!indptr || !indices || !last) input_error(what, "kv_indptr, kv_indices and kv_last_page_len come together");
    c.cache = kv::with_paged_metadata(c.cache, {ints(*indptr, what), ints(*indices, what), ints(*last, what)}, what);
    c.own_metadata = true;
  }
  check_shape(*k, c.cache, g.heads(), g.spec().rope.head_dim, what);
  c.slots = kv::token_slots(c.cache);
  if (mapping) {
    if (c.cache.kind != kv::CacheKind::slots) input_error(what, "slot_mapping for the set's paged cache");
    c.slots = kv::checked_slot_mapping(c.cache, ints(*mapping, what), what);
    c.own_metadata = true;
  }
  c.k_cache = *k;
  if (const io::Tensor* v = find(ts, "v_cache")) {
    if (v->dtype != k->dtype || v->shape != k->shape) input_error(what, "v_cache's dtype and shape must be k_cache's");
    c.v_cache = *v;
  }
  const std::size_t es = io::dtype_size(k->dtype);
  c.sentinel.assign(es, kDefaultSentinelByte);
  if (const io::Tensor* s = find(ts, "sentinel")) {
    if (s->dtype != k->dtype || s->numel() != 1) input_error(what, "sentinel must be one element of k_cache's dtype");
    c.sentinel = s->data;
    c.sentinel_declared = true;
  }
  return c;
}

KvCacheReport check_kv_cache(const golden::GoldenSet& g, const KvCacheCandidate& c, CheckRequest request) {
  const kv::CacheSpec& cs = c.cache;
  const DType dt = *check_detail::float_dtype(c.k_cache.dtype);
  const std::int64_t H = g.heads(), D = g.spec().rope.head_dim, T = cs.tokens();
  const std::size_t es = io::dtype_size(c.k_cache.dtype);
  if (T != g.tokens()) input_error("--kv-cache", "the set holds " + std::to_string(g.tokens()) + " tokens, its batch " + std::to_string(T));
  KvCacheReport r;
  r.dtype = std::string(to_string(dt)), r.cache = std::string(kv::to_string(cs.kind)), r.layout = std::string(kv::to_string(cs.layout));
  r.pages = cs.pages, r.page_size = cs.page_size, r.heads = H, r.head_dim = D, r.tokens = T;
  r.own_metadata = c.own_metadata, r.sentinel_declared = c.sentinel_declared, r.v_given = c.v_cache.has_value();
  std::vector<std::int64_t> token_at(static_cast<std::size_t>(cs.slots()), -1);
  for (std::int64_t t = 0; t < T; ++t) token_at[static_cast<std::size_t>(c.slots[static_cast<std::size_t>(t)])] = t;
  io::Tensor k_rot{"k_rot." + r.dtype, c.k_cache.dtype, {T, H, D}, std::vector<std::uint8_t>(static_cast<std::size_t>(T * H * D) * es)};
  const io::Tensor* v_in = c.v_cache ? &g.tensor("v") : nullptr;
  std::vector<std::uint8_t> want(es);
  for (std::int64_t slot = 0; slot < cs.slots(); ++slot) {
    const std::int64_t t = token_at[static_cast<std::size_t>(slot)];
    bool k_sentinel = true, v_sentinel = true, v_changed = false;
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t d = 0; d < D; ++d) {
        const auto at = static_cast<std::size_t>(kv::element_index(cs, slot, h, d, H, D)) * es;
        const std::uint8_t* kb = c.k_cache.data.data() + at;
        k_sentinel = k_sentinel && std::memcmp(kb, c.sentinel.data(), es) == 0;
        if (c.v_cache) v_sentinel = v_sentinel && std::memcmp(c.v_cache->data.data() + at, c.sentinel.data(), es) == 0;
        if (t < 0) continue;
        const auto e = static_cast<std::size_t>((t * H + h) * D + d);
        std::memcpy(k_rot.data.data() + e * es, kb, es);
        if (!c.v_cache) continue;
        float v;
        std::memcpy(&v, v_in->data.data() + 4 * e, 4);
        store_element(want.data(), quant::round_to(v, dt), dt);
        const bool differs = std::memcmp(c.v_cache->data.data() + at, want.data(), es) != 0;
        r.v_mismatches += differs;
        v_changed = v_changed || differs;
      }
    const auto problem = [&](const char* kind) {
      if (r.problems.size() < kMaxProblems) r.problems.push_back({kind, slot, slot / cs.page_size, slot % cs.page_size, t});
    };
    if (t < 0 && (!k_sentinel || !v_sentinel)) ++r.out_of_slot_writes, problem("out-of-slot write");
    else if (t < 0) ++r.untouched_slots;
    else if (k_sentinel) ++r.missing_writes, problem("missing write");
    else if (v_changed) problem("v changed");
  }
  request.options.only = {k_rot.name};
  request.options.name_map.clear();
  Candidate cand;
  cand.tensors.push_back(std::move(k_rot));
  cand.source = {{"kind", "kv-cache"}, {"cache", r.cache}, {"layout", r.layout}};
  r.k = run_check(g, std::move(cand), request);
  kv_detail::set_verdict(r);
  if (r.verdict == Verdict::fail && request.diagnose != CheckRequest::Diagnose::never) {
    r.diagnosis = kv_detail::diagnose_kv_cache(g, c, request.options.criterion);
    r.diagnosed = true;
  }
  return r;
}

}  // namespace ropecheck::checker
