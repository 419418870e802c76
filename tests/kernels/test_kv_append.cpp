// kernels/kv_append.hpp: the correct append writes each token's rotated k (the bytes rope_apply stores)
// and its v at the slot core/kv_cache.hpp maps it to, in NHD and HND, and touches no other byte; every
// mistake changes where (or, for positions-not-offset, what) it writes; sizes that do not match throw.
#include <gtest/gtest.h>

#include <cstring>

#include "ropecheck/core/quantized.hpp"
#include "ropecheck/kernels/kv_append.hpp"

namespace ropecheck::kernels {
namespace {

kv::CacheSpec batch(const char* layout) {
  return kv::parse_cache_spec(nlohmann::json::parse(std::string(R"({"sequences": [{"cached": 0, "appended": 6},
    {"cached": 5, "appended": 1}, {"cached": 2, "appended": 3}], "page_size": 4, "layout": ")") + layout + "\"}"), 3);
}

RopeSpec spec() {
  RopeSpec s;
  s.head_dim = s.rotary_dim = 8;
  return s;
}

TEST(KvAppend, WritesEachTokenAtItsSlotAndNothingElse) {
  for (const char* layout : {"NHD", "HND"})
    for (DType dt : {DType::f32, DType::bf16}) {
      const kv::CacheSpec c = batch(layout);
      const std::int64_t H = 2, D = 8, T = c.tokens();
      const auto es = static_cast<std::size_t>(format_info(dt).storage_bits / 8);
      std::vector<float> k(static_cast<std::size_t>(T * H * D)), v(k.size());
      for (std::size_t i = 0; i < k.size(); ++i) k[i] = 0.25f * static_cast<float>(i % 13) - 1, v[i] = 0.5f * static_cast<float>(i % 7);
      const RopePlan plan = make_rope_plan(spec(), Recipe::accurate);
      std::vector<std::uint8_t> kc(static_cast<std::size_t>(c.slots() * H * D) * es, 0xAB), vc(kc.size(), 0xAB);
      rope_append_kv(plan, c, H, k, v, dt, kc, vc);
      // The reference bytes: rope_apply on the same positions.
      const std::vector<std::int64_t> pos = kv::positions(c);
      std::vector<std::uint8_t> rot(static_cast<std::size_t>(T * H * D) * es), dummy(rot.size());
      std::vector<float> kin = k;
      rope_apply(plan, PositionsView::of(pos), TensorView::contiguous(kin.data(), DType::f32, T, H, D),
                 TensorView::contiguous(dummy.data(), dt, T, H, D), TensorView::contiguous(kin.data(), DType::f32, T, H, D),
                 TensorView::contiguous(rot.data(), dt, T, H, D));
      std::vector<bool> written(kc.size() / es);
      const std::vector<std::int64_t> slots = kv::token_slots(c);
      std::vector<std::uint8_t> want(es);
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t d = 0; d < D; ++d) {
            const auto at = static_cast<std::size_t>(kv::element_index(c, slots[static_cast<std::size_t>(t)], h, d, H, D));
            const auto e = static_cast<std::size_t>((t * H + h) * D + d);
            written[at] = true;
            EXPECT_EQ(std::memcmp(kc.data() + at * es, rot.data() + e * es, es), 0) << layout << " token " << t;
            store_element(want.data(), quant::round_to(v[e], dt), dt);
            EXPECT_EQ(std::memcmp(vc.data() + at * es, want.data(), es), 0);
          }
      for (std::size_t i = 0; i < written.size(); ++i)
        if (!written[i]) {
          ASSERT_EQ(kc[i * es], 0xAB) << "element " << i << " touched";
          ASSERT_EQ(vc[i * es], 0xAB) << "element " << i << " of v touched";
        }
    }
}

TEST(KvAppend, EveryMistakeWritesSomethingElse) {
  const kv::CacheSpec c = batch("NHD");
  const std::int64_t H = 2, D = 8;
  std::vector<float> k(static_cast<std::size_t>(c.tokens() * H * D), 0.75f);
  const RopePlan plan = make_rope_plan(spec(), Recipe::accurate);
  std::vector<std::uint8_t> right(static_cast<std::size_t>(c.slots() * H * D) * 4, 0xFF), none;
  rope_append_kv(plan, c, H, k, {}, DType::f32, right, none);
  for (AppendMistake m : kAppendMistakes) {
    std::vector<std::uint8_t> wrong(right.size(), 0xFF);
    rope_append_kv(plan, c, H, k, {}, DType::f32, wrong, none, m);
    EXPECT_NE(wrong, right) << to_string(m);
  }
  EXPECT_EQ(to_string(AppendMistake::past_page_end), "kv-write-past-page-end");
  std::vector<std::uint8_t> small(8);
  EXPECT_THROW(rope_append_kv(plan, c, H, k, {}, DType::f32, small, none), std::invalid_argument);
}

}  // namespace
}  // namespace ropecheck::kernels
