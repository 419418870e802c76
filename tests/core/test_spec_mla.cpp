// The MLA layout of the spec (core/SPEC_FORMAT.md, "MLA"): a rotary slice at an offset within a wider
// head, a k_pe key with no head axis. Included by test_spec_unit.cpp after test_spec.cpp (its helpers:
// valid_rope, rejects, expect_same_spec). Expected channels written out from the format's rules.
namespace {

using ropecheck::KeyLayout;

json mla_rope() {
  json j = valid_rope();
  j["rope"]["head_dim"] = 192;
  j["rope"]["rotary_dim"] = 64;
  j["rope"]["rotary_offset"] = 128;
  j["rope"]["key_layout"] = "k_pe";
  j["rope"]["layout"] = "interleaved";
  return j;
}

TEST(SpecMla, OffsetShiftsThePairsAndTheRestPassesThrough) {
  const EncodingSpec s = ropecheck::spec_from_json(mla_rope());
  EXPECT_EQ(s.rope.rotary_offset, 128);
  EXPECT_EQ(s.rope.key_layout, KeyLayout::k_pe);
  EXPECT_EQ(ropecheck::pair_channels(s.rope, 0), (std::pair<int, int>{128, 129}));
  EXPECT_EQ(ropecheck::pair_channels(s.rope, 31), (std::pair<int, int>{190, 191}));
  RopeSpec half = s.rope;
  half.layout = RopeLayout::half_split;
  EXPECT_EQ(ropecheck::pair_channels(half, 5), (std::pair<int, int>{133, 165}));
  EXPECT_FALSE(ropecheck::is_rotary_channel(s.rope, 127));
  EXPECT_TRUE(ropecheck::is_rotary_channel(s.rope, 128));
  EXPECT_TRUE(ropecheck::is_rotary_channel(s.rope, 191));
  EXPECT_TRUE(ropecheck::is_mla_layout(s.rope));
}

TEST(SpecMla, KeyRopeIsTheSliceAloneForKpe) {
  const EncodingSpec s = ropecheck::spec_from_json(mla_rope());
  const RopeSpec k = ropecheck::key_rope(s.rope);
  EXPECT_EQ(k.head_dim, 64);
  EXPECT_EQ(k.rotary_dim, 64);
  EXPECT_EQ(k.rotary_offset, 0);
  EXPECT_EQ(k.key_layout, KeyLayout::per_head);
  EXPECT_FALSE(ropecheck::is_mla_layout(k));
  // A per-head key takes the spec itself, offset included.
  json j = mla_rope();
  j["rope"].erase("key_layout");
  const EncodingSpec p = ropecheck::spec_from_json(j);
  EXPECT_EQ(ropecheck::key_rope(p.rope).head_dim, 192);
  EXPECT_EQ(ropecheck::key_rope(p.rope).rotary_offset, 128);
}

TEST(SpecMla, RoundTripsAndIsWrittenOnlyWhenSet) {
  const EncodingSpec s = ropecheck::spec_from_json(mla_rope());
  const json out = ropecheck::spec_to_json(s);
  EXPECT_EQ(out["rope"]["rotary_offset"], 128);
  EXPECT_EQ(out["rope"]["key_layout"], "k_pe");
  expect_same_spec(s, ropecheck::spec_from_json(out));
  // Without the MLA layout neither key is written: every other spec keeps its JSON bytes.
  const json plain = ropecheck::spec_to_json(ropecheck::spec_from_json(valid_rope()));
  EXPECT_FALSE(plain["rope"].contains("rotary_offset"));
  EXPECT_FALSE(plain["rope"].contains("key_layout"));
}

TEST(SpecMla, OffsetOutsideTheHeadIsRefused) {
  json j = mla_rope();
  j["rope"]["rotary_offset"] = 130;
  EXPECT_TRUE(rejects(j, {"rope.rotary_offset", "130", "0 .. head_dim - rotary_dim (128)"}));
  j["rope"]["rotary_offset"] = -2;
  EXPECT_TRUE(rejects(j, {"rope.rotary_offset", "-2"}));
  j["rope"]["rotary_offset"] = "128";
  EXPECT_TRUE(rejects(j, {"rope.rotary_offset"}));
}

TEST(SpecMla, UnknownKeyLayoutIsRefused) {
  json j = mla_rope();
  j["rope"]["key_layout"] = "shared";
  EXPECT_TRUE(rejects(j, {"rope.key_layout", "shared"}));
}

TEST(SpecMla, ProportionalHasNoSliceToPlace) {
  json j = valid_rope();
  j["rope"]["rotary_dim"] = 32;
  j["rope"]["rotary_offset"] = 2;
  j["rope"]["scaling"] = {{"type", "proportional"}};
  EXPECT_TRUE(rejects(j, {"rope.rotary_offset", "proportional"}));
}

TEST(SpecMla, DeepseekMlaPresetIsDeepseeksLayout) {
  const EncodingSpec mla = ropecheck::load_preset("deepseek-v3-mla");
  const EncodingSpec pe = ropecheck::load_preset("deepseek-v3");
  EXPECT_EQ(mla.rope.head_dim, 192);  // qk_nope_head_dim 128 + qk_rope_head_dim 64
  EXPECT_EQ(mla.rope.rotary_dim, 64);
  EXPECT_EQ(mla.rope.rotary_offset, 128);
  EXPECT_EQ(mla.rope.key_layout, KeyLayout::k_pe);
  // The rotation itself is the deepseek-v3 preset's: the key's spec equals it but for the name.
  const RopeSpec k = ropecheck::key_rope(mla.rope);
  EXPECT_EQ(ropecheck::spec_to_json({pe.name, Family::rope, k, {}, "", ""})["rope"], ropecheck::spec_to_json(pe)["rope"]);
}

}  // namespace
