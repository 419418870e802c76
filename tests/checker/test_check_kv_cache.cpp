// The KV-cache check (checker/kv_cache.hpp) on caches written by ropecheck's own "rotate then append"
// recipe (kernels/kv_append.hpp): correct writes pass the recipe's class in the paged NHD, paged HND and
// slot-mapped forms, with the default and a declared sentinel; each of the six injected append mistakes
// fails and is diagnosed by its own name (DIAGNOSIS.md, "KV-cache writes"); an extra write into an unused
// slot and a v not stored bit-exactly fail with the slot named.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "ropecheck/checker/kv_cache.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/kernels/kv_append.hpp"
#include "ropecheck/reference/presets.hpp"
#include "temp_root.hpp"

namespace ropecheck::checker {
namespace {

namespace fs = std::filesystem;
using kernels::AppendMistake;

const fs::path& root() {
  static const testing_support::TempRoot r("ropecheck_check_kv_cache_");
  return r.path();
}

// Two prefills (one crossing page ends from an offset), two decode steps; page_size 4, 2 heads.
nlohmann::json batch(const std::string& cache, const std::string& layout) {
  return {{"sequences",
           {{{"cached", 0}, {"appended", 7}}, {{"cached", 9}, {"appended", 1}}, {{"cached", 3}, {"appended", 6}},
            {{"cached", 12}, {"appended", 1}}}},
          {"cache", cache},
          {"layout", layout},
          {"page_size", 4}};
}

const golden::GoldenSet& set(const std::string& cache, const std::string& layout) {
  static std::map<std::string, golden::GoldenSet> sets;
  const std::string key = cache + "-" + layout;
  if (auto it = sets.find(key); it != sets.end()) return it->second;
  golden::GoldenOptions o;
  o.spec = load_preset("llama-2-7b");
  o.spec.rope.head_dim = o.spec.rope.rotary_dim = 16;  // small heads: the diagnosis is exact (MPFR) per element
  o.kv_cache = kv::parse_cache_spec(batch(cache, layout), 11);
  for (std::int64_t p : kv::positions(*o.kv_cache)) o.positions.positions.push_back(Position::uniform(p));
  o.positions.argument = "kv-cache";
  o.dtypes = {DType::f32, DType::bf16};
  o.heads = 2;
  o.seed = 11;
  o.out = root() / key;
  o.threads = 1;
  golden::write_golden_set(o);
  return sets.emplace(key, golden::load_golden_set(o.out)).first->second;
}

std::vector<float> floats(const io::Tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  std::memcpy(v.data(), t.data.data(), v.size() * 4);
  return v;
}

// The recipe's cache of set g in dtype dt, every byte the sentinel first.
KvCacheCandidate written(const golden::GoldenSet& g, DType dt, AppendMistake m, std::uint8_t sentinel = kDefaultSentinelByte) {
  KvCacheCandidate c;
  c.cache = golden_cache_spec(g);
  c.slots = kv::token_slots(c.cache);
  const std::int64_t H = g.heads(), D = g.spec().rope.head_dim;
  const std::size_t es = io::dtype_size(io::tensor_dtype(dt));
  const std::vector<std::int64_t> shape = kv::cache_shape(c.cache, H, D);
  const auto bytes = static_cast<std::size_t>(c.cache.slots() * H * D) * es;
  c.k_cache = {"k_cache", io::tensor_dtype(dt), shape, std::vector<std::uint8_t>(bytes, sentinel)};
  c.v_cache = io::Tensor{"v_cache", io::tensor_dtype(dt), shape, std::vector<std::uint8_t>(bytes, sentinel)};
  c.sentinel.assign(es, sentinel);
  c.sentinel_declared = sentinel != kDefaultSentinelByte;
  const kernels::RopePlan plan = kernels::make_rope_plan(g.spec().rope, kernels::Recipe::accurate, g.seq_len());
  kernels::rope_append_kv(plan, c.cache, H, floats(g.tensor("k")), floats(g.tensor("v")), dt, c.k_cache.data,
                          c.v_cache->data, m);
  return c;
}

KvCacheReport judge(const golden::GoldenSet& g, const KvCacheCandidate& c) {
  CheckRequest r;
  r.options.threads = 1;
  return check_kv_cache(g, c, r);
}

TEST(KvCacheCheck, CorrectAppendPassesInEveryForm) {
  for (const auto& [cache, layout] : {std::pair{"paged", "NHD"}, std::pair{"paged", "HND"}, std::pair{"slots", "NHD"}})
    for (DType dt : {DType::f32, DType::bf16})
      for (std::uint8_t sentinel : {kDefaultSentinelByte, std::uint8_t{0x7E}}) {
        const golden::GoldenSet& g = set(cache, layout);
        const KvCacheReport r = judge(g, written(g, dt, AppendMistake::none, sentinel));
        SCOPED_TRACE(std::string(cache) + " " + layout + " " + std::string(to_string(dt)));
        EXPECT_EQ(r.verdict, Verdict::pass) << r.summary();
        EXPECT_EQ(r.out_of_slot_writes + r.missing_writes + r.v_mismatches, 0);
        EXPECT_EQ(r.untouched_slots, g.manifest()["kv_cache"]["pages"].get<std::int64_t>() * 4 - 15);  // 15 tokens appended
        EXPECT_FALSE(r.diagnosed);
      }
}

TEST(KvCacheCheck, EveryInjectedMistakeFailsAndIsDiagnosedByName) {
  for (const auto& [cache, layout] : {std::pair{"paged", "NHD"}, std::pair{"paged", "HND"}, std::pair{"slots", "NHD"}}) {
    const golden::GoldenSet& g = set(cache, layout);
    for (AppendMistake m : kernels::kAppendMistakes) {
      const bool paged_only = m == AppendMistake::last_page_off_by_one || m == AppendMistake::layout_swapped;
      if (paged_only && std::string(cache) != "paged") continue;
      const std::string id(kernels::to_string(m));
      SCOPED_TRACE(std::string(cache) + " " + layout + " " + id);
      const KvCacheReport r = judge(g, written(g, DType::f32, m));
      EXPECT_EQ(r.verdict, Verdict::fail) << r.summary();
      ASSERT_TRUE(r.diagnosed);
      std::vector<std::string> ids;
      for (const KvHypothesis& h : r.diagnosis) ids.push_back(h.id);
      EXPECT_EQ(ids, std::vector<std::string>{id}) << r.summary();
    }
  }
}

TEST(KvCacheCheck, AWriteIntoAnUnusedSlotAndAChangedVFailWithTheSlotNamed) {
  const golden::GoldenSet& g = set("paged", "HND");
  KvCacheCandidate c = written(g, DType::bf16, AppendMistake::none);
  std::vector<bool> used(static_cast<std::size_t>(c.cache.slots()));
  for (std::int64_t s : c.slots) used[static_cast<std::size_t>(s)] = true;
  const auto free_slot = static_cast<std::int64_t>(std::find(used.begin(), used.end(), false) - used.begin());
  c.k_cache.data[static_cast<std::size_t>(kv::element_index(c.cache, free_slot, 1, 3, 2, 16)) * 2] ^= 1;
  c.v_cache->data[static_cast<std::size_t>(kv::element_index(c.cache, c.slots[5], 0, 0, 2, 16)) * 2] ^= 1;
  const KvCacheReport r = judge(g, c);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_EQ(r.out_of_slot_writes, 1);
  EXPECT_EQ(r.v_mismatches, 1);
  ASSERT_EQ(r.problems.size(), 2u);
  const auto has = [&](const std::string& kind, std::int64_t slot) {
    return std::any_of(r.problems.begin(), r.problems.end(), [&](const SlotProblem& p) { return p.kind == kind && p.slot == slot; });
  };
  EXPECT_TRUE(has("out-of-slot write", free_slot));
  EXPECT_TRUE(has("v changed", c.slots[5]));
  EXPECT_EQ(r.k.verdict, Verdict::pass);  // k itself is right
  EXPECT_NE(r.summary().find("out-of-slot write at slot " + std::to_string(free_slot)), std::string::npos);
  EXPECT_EQ(r.to_json()["kv_cache"]["out_of_slot_writes"], 1);
}

}  // namespace
}  // namespace ropecheck::checker
