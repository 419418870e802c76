// core/kv_cache.hpp: the batch / cache description's grammar and its refusals, the generated page table
// (deterministic, a permutation, recorded so that reading it back gives the same spec), positions and
// batch indices, the slot <-> token mapping in NHD and HND, FlashInfer's metadata and its validation.
#include <gtest/gtest.h>

#include <set>

#include "ropecheck/core/kv_cache.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::kv {
namespace {

const nlohmann::json kBatch = nlohmann::json::parse(R"({"sequences": [{"cached": 0, "appended": 7},
  {"cached": 9, "appended": 1}, {"cached": 3, "appended": 6}], "page_size": 4})");

TEST(KvCache, ParsesTheBatchAndGeneratesARecordedPageTable) {
  const CacheSpec c = parse_cache_spec(kBatch, 7);
  EXPECT_EQ(c.kind, CacheKind::paged);
  EXPECT_EQ(c.layout, CacheLayout::nhd);
  EXPECT_EQ(c.tokens(), 14);
  EXPECT_EQ(c.pages, 2 + 3 + 3 + 1);  // ceil(7/4) + ceil(10/4) + ceil(9/4) + the spare page
  EXPECT_TRUE(c.generated);
  std::set<std::int64_t> used;
  for (const auto& row : c.page_table) used.insert(row.begin(), row.end());
  EXPECT_EQ(used.size(), 8u);  // no page twice
  EXPECT_EQ(parse_cache_spec(kBatch, 7).page_table, c.page_table);  // deterministic
  EXPECT_NE(parse_cache_spec(kBatch, 8).page_table, c.page_table);  // seeded
  nlohmann::json back = to_json(c);
  back.erase("page_table_generated");
  const CacheSpec again = parse_cache_spec(back, 99);
  EXPECT_EQ(again.page_table, c.page_table);
  EXPECT_FALSE(again.generated);
}

TEST(KvCache, PositionsBatchIndicesAndSlots) {
  nlohmann::json j = kBatch;
  j["page_table"] = {{5, 1}, {0, 7, 3}, {2, 6, 4}};
  const CacheSpec c = parse_cache_spec(j, 0);
  const std::vector<std::int64_t> pos = positions(c);
  EXPECT_EQ(pos, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 9, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(batch_indices(c), (std::vector<std::int64_t>{0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 2, 2, 2, 2}));
  EXPECT_EQ(append_indptr(c), (std::vector<std::int64_t>{0, 7, 8, 14}));
  EXPECT_EQ(seq_lens(c), (std::vector<std::int64_t>{7, 10, 9}));
  // Sequence 1's cache index 9 lies in its third page (3), offset 1; sequence 2's index 3 in page 2, offset 3.
  const std::vector<std::int64_t> s = token_slots(c);
  EXPECT_EQ(s[7], 3 * 4 + 1);
  EXPECT_EQ(s[8], 2 * 4 + 3);
  EXPECT_EQ(s[9], 6 * 4 + 0);
  EXPECT_FALSE(slot_of(c, 0, 8).has_value());  // past its two pages
  const PagedMetadata m = paged_metadata(c);
  EXPECT_EQ(m.indptr, (std::vector<std::int64_t>{0, 2, 5, 8}));
  EXPECT_EQ(m.indices, (std::vector<std::int64_t>{5, 1, 0, 7, 3, 2, 6, 4}));
  EXPECT_EQ(m.last_page_len, (std::vector<std::int64_t>{3, 2, 1}));
  EXPECT_EQ(with_paged_metadata(c, m, "m").page_table, c.page_table);
}

TEST(KvCache, ElementIndexByLayout) {
  nlohmann::json j = kBatch;
  CacheSpec c = parse_cache_spec(j, 0);
  const std::int64_t H = 3, D = 8;
  // slot 6 = page 1, offset 2: NHD [page][offset][head][d], HND [page][head][offset][d].
  EXPECT_EQ(element_index(c, 6, 2, 5, H, D), ((1 * 4 + 2) * 3 + 2) * 8 + 5);
  EXPECT_EQ(cache_shape(c, H, D), (std::vector<std::int64_t>{c.pages, 4, 3, 8}));
  c.layout = CacheLayout::hnd;
  EXPECT_EQ(element_index(c, 6, 2, 5, H, D), ((1 * 3 + 2) * 4 + 2) * 8 + 5);
  EXPECT_EQ(cache_shape(c, H, D), (std::vector<std::int64_t>{c.pages, 3, 4, 8}));
}

void refused(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected an error with '" << part << "'";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

TEST(KvCache, RefusesBadDescriptions) {
  const auto with = [](const char* key, nlohmann::json v) {
    nlohmann::json j = kBatch;
    j[key] = std::move(v);
    return [j] { parse_cache_spec(j, 0); };
  };
  refused(with("layout", "NDH"), "layout 'NDH'");
  refused(with("cache", "ring"), "cache 'ring'");
  refused(with("page_size", 0), "page_size = 0");
  refused(with("pages", 3), "needs 8");
  refused(with("colour", 1), "unknown key 'colour'");
  refused(with("sequences", nlohmann::json::array()), "non-empty");
  refused(with("sequences", {{{"cached", 2}}}), "appended >= 1");
  refused(with("page_table", {{0, 1}, {2, 3, 4}}), "3 sequences");
  refused(with("page_table", {{0, 1}, {2, 3, 4}, {5, 6, 99}}), "page index 99");
  refused(with("page_table", {{0, 1}, {2, 3, 4}, {5, 6, 1}}), "two sequences");
  refused(with("page_table", {{0}, {2, 3, 4}, {5, 6, 7}}), "need 2");
  refused(with("page_table", {{0, 1.5}, {2, 3, 4}, {5, 6, 7}}), "arrays of integers");
  refused(with("page_table", 3), "arrays of integers");
  nlohmann::json big = kBatch;
  big["page_size"] = 8;
  big["pages"] = 1 << 22;
  refused([big] { parse_cache_spec(big, 0); }, "more than 16777216");
  nlohmann::json slots = kBatch;
  slots["cache"] = "slots";
  slots["layout"] = "HND";
  refused([slots] { parse_cache_spec(slots, 0); }, "slot-mapped cache is NHD");
}

TEST(KvCache, RefusesBadMetadata) {
  const CacheSpec c = parse_cache_spec(kBatch, 3);
  const PagedMetadata good = paged_metadata(c);
  PagedMetadata m = good;
  m.indptr[1] = 6;  // 0, 6, 5, 8
  refused([&] { with_paged_metadata(c, m, "k"); }, "not monotone");
  m = good;
  m.indices[0] = c.pages;
  refused([&] { with_paged_metadata(c, m, "k"); }, "outside [0, 9)");
  m = good;
  m.last_page_len[0] = 4;
  refused([&] { with_paged_metadata(c, m, "k"); }, "kv_last_page_len[0] = 4");
  m = good;
  m.indptr.pop_back();
  refused([&] { with_paged_metadata(c, m, "k"); }, "needs 4");
  m = good;
  m.indptr[3] = 7;
  refused([&] { with_paged_metadata(c, m, "k"); }, "ends at 7");
  std::vector<std::int64_t> s = token_slots(c);
  EXPECT_EQ(checked_slot_mapping(c, s, "s"), s);
  s[1] = s[0];
  refused([&] { checked_slot_mapping(c, s, "s"); }, "two tokens");
  s[1] = c.slots();
  refused([&] { checked_slot_mapping(c, s, "s"); }, "outside");
  s.pop_back();
  refused([&] { checked_slot_mapping(c, s, "s"); }, "13 entries for 14 tokens");
}

}  // namespace
}  // namespace ropecheck::kv
