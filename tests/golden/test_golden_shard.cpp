// Sharding a run (core/shard.hpp) and joining golden-set shards (golden_merge.hpp): the split tiles
// the items in order for any n >= N without overflow, a shard holds exactly its slice of the set
// (seq_len and frequencies from the whole set), and merging gives one run's bytes, --stores included
// (every store groups within one token; a given scale, without a token axis, is each shard's same copy).
#include <gtest/gtest.h>


#include "ropecheck/core/shard.hpp"
#include "ropecheck/golden/golden_merge.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/io/memory_budget.hpp"
#include "ropecheck/reference/presets.hpp"
#include "golden_options.hpp"
#include "temp_root.hpp"

namespace ropecheck::golden {
using namespace ropecheck::io;
namespace {

namespace fs = std::filesystem;

using testing_support::file_bytes;
using testing_support::small_golden_options;

TEST(Shard, ParsesIOfN) {
  EXPECT_EQ(parse_shard("1/1"), (Shard{1, 1}));
  EXPECT_EQ(parse_shard("3/7"), (Shard{3, 7}));
  for (const char* bad : {"", "3", "0/3", "4/3", "-1/3", "+1/3", "1/0", "1/-2", "a/3", "1/3x", "1//3", "1/2097152"})
    EXPECT_THROW(parse_shard(bad), SpecError) << bad;
  try {
    parse_shard("4/3");
  } catch (const SpecError& e) {
    EXPECT_STREQ(e.what(), "--shard 4/3: shards are numbered 1..3");
  }
}

TEST(Shard, RangesTileTheItemsInOrder) {
  for (std::int64_t n : {1, 2, 3, 7, 10, 133, 1000}) {
    for (int count = 1; count <= std::min<std::int64_t>(n, 12); ++count) {
      std::int64_t next = 0, smallest = n, largest = 0;
      for (int i = 1; i <= count; ++i) {
        const auto [b, e] = shard_range(n, {i, count}, "tokens");
        EXPECT_EQ(b, next) << n << " " << i << "/" << count;
        smallest = std::min(smallest, e - b);
        largest = std::max(largest, e - b);
        next = e;
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(largest - smallest, 1) << "shards differ by at most one item";
      EXPECT_GE(smallest, 1);
    }
  }
  // n near 2^53 with N = 2^20: n * I would overflow 64 bits.
  const std::int64_t big = (std::int64_t{1} << 53) + 12345;
  const auto [b, e] = shard_range(big, {kMaxShards, kMaxShards}, "positions");
  EXPECT_EQ(e, big);
  EXPECT_EQ(b, big - big / kMaxShards - 1);  // the remainder lands on the last shards
  EXPECT_THROW(shard_range(5, {1, 6}, "tokens"), SpecError);
}

TEST(GoldenStreaming, DiskSpaceIsCheckedWhereOutGoes) {
  const testing_support::TempRoot tmp("ropecheck-shard-");
  const fs::path& root = tmp.path();
  EXPECT_NO_THROW(require_disk(1, root / "not" / "yet" / "made", "x"));
  try {
    require_disk(std::uint64_t{1} << 62, root / "not" / "yet" / "made", "golden set of X");
    ADD_FAILURE() << "4 EiB fit on this disk?";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("golden set of X needs about 4194304.0 TiB on disk, more than the"), std::string::npos)
        << e.what();
  }
}

// The longrope preset switches to its long factors when seq_len exceeds 4096: a shard holding only
// small positions must still use the whole set's seq_len.
TEST(GoldenShard, ShardsHoldTheirSliceAndMergeToOneRun) {
  const testing_support::TempRoot tmp("ropecheck-shard-");
  const fs::path& root = tmp.path();
  const std::string positions = "0:10,5000,8191";
  write_golden_set(small_golden_options("phi-3.5-mini", positions, root / "one"));
  std::vector<fs::path> parts;
  for (int i = 1; i <= 3; ++i) {
    GoldenOptions o = small_golden_options("phi-3.5-mini", positions, root / ("part" + std::to_string(i)));
    o.shard = Shard{i, 3};
    const GoldenSummary s = write_golden_set(o);
    EXPECT_EQ(s.manifest["format"], "ropecheck-golden-shard");
    EXPECT_EQ(s.manifest["seq_len"], 8192) << "seq_len of the whole set, not of the shard";
    EXPECT_EQ(s.manifest["shard"]["index"], i);
    EXPECT_EQ(s.manifest["shard"]["set_tokens"], 12);
    parts.push_back(o.out);
  }
  EXPECT_THROW(load_golden_set(parts[0]), InputError) << "a shard is not a whole set";
  const GoldenSet p2 = load_golden_set(parts[1], {.allow_shard = true});
  ASSERT_TRUE(p2.shard().has_value());
  EXPECT_EQ(p2.shard()->first_token, 4);
  EXPECT_EQ(p2.tokens(), 4);
  const GoldenSet one = load_golden_set(root / "one");
  // Shard 2's q is the whole set's q of tokens 4..7 (the generator is indexed, not sequential).
  const Tensor& q1 = one.tensor("q");
  const Tensor& q2 = p2.tensor("q");
  const std::size_t row = q1.data.size() / 12;
  EXPECT_TRUE(std::equal(q2.data.begin(), q2.data.end(), q1.data.begin() + static_cast<std::ptrdiff_t>(4 * row)));

  std::reverse(parts.begin(), parts.end());
  const nlohmann::json m = merge_golden_shards({.parts = parts, .out = root / "merged"});
  EXPECT_EQ(m["format"], "ropecheck-golden");
  for (const auto& f : fs::directory_iterator(root / "one"))
    EXPECT_EQ(file_bytes(f.path()), file_bytes(root / "merged" / f.path().filename())) << f.path().filename();
}

TEST(GoldenShard, StoresShardAndMergeToTheWholeSetsBytes) {
  const testing_support::TempRoot tmp("ropecheck-shard-");
  const fs::path& root = tmp.path();
  for (const FileFormat format : {FileFormat::safetensors, FileFormat::npz}) {
    const std::string tag = format == FileFormat::npz ? "npz" : "st";
    const auto options = [&](const std::string& name) {
      GoldenOptions o = small_golden_options("llama-3.2-1b", "0:3,8190", root / (tag + name));
      o.format = format;
      o.stores = "e4m3fn:scale=0.5/0.25,e5m2:per-token-head,q4_0,int4g32:bf16";
      return o;
    };
    write_golden_set(options("one"));
    std::vector<fs::path> parts;
    for (int i = 1; i <= 2; ++i) {
      GoldenOptions o = options("part" + std::to_string(i));
      o.shard = Shard{i, 2};
      write_golden_set(o);
      parts.push_back(o.out);
    }
    merge_golden_shards({.parts = parts, .out = root / (tag + "merged")});
    for (const auto& f : fs::directory_iterator(root / (tag + "one")))
      EXPECT_EQ(file_bytes(f.path()), file_bytes(root / (tag + "merged") / f.path().filename())) << tag << " " << f.path().filename();
    EXPECT_TRUE(fs::exists(root / (tag + "merged") / (format == FileFormat::npz ? "stores.npz" : "stores.safetensors")));
  }
  GoldenOptions shared = small_golden_options("llama-3.2-1b", "0:3", root / "shared");
  shared.stores = "q8_0";
  shared.shard = Shard{1, 2};
  shared.shared_out = true;
  EXPECT_THROW(write_golden_set(shared), SpecError);
}

// The writer computes and writes blocks of tokens; the bytes must not depend on the block size (nor
// on the file format's layout: .npz members get their CRCs after the data).
TEST(GoldenStreaming, SameBytesForAnyBlockSize) {
  const testing_support::TempRoot tmp("ropecheck-shard-");
  const fs::path& root = tmp.path();
  for (const std::string preset : {"qwen2-vl-7b", "transformer-base"}) {
    for (const FileFormat format : {FileFormat::safetensors, FileFormat::npz}) {
      std::vector<fs::path> outs;
      for (const std::int64_t block : {0, 1, 5}) {
        GoldenOptions o = small_golden_options(preset, "0:9,grid:9:2:3,4095", root / (preset + std::to_string(outs.size()) +
                                                                           (format == FileFormat::npz ? "npz" : "st")));
        if (preset == "transformer-base") o.positions = parse_positions("0:13,4095");
        o.format = format;
        o.block_tokens = block;
        o.threads = 2;
        write_golden_set(o);
        outs.push_back(o.out);
      }
      for (const auto& f : fs::directory_iterator(outs[0]))
        for (std::size_t i = 1; i < outs.size(); ++i)
          EXPECT_EQ(file_bytes(f.path()), file_bytes(outs[i] / f.path().filename())) << preset << " " << f.path().filename();
      EXPECT_NO_THROW(load_golden_set(outs[2]));
    }
  }
}

TEST(GoldenShard, MergeRefusesBeforeWriting) {
  const testing_support::TempRoot tmp("ropecheck-shard-");
  const fs::path& root = tmp.path();
  std::vector<fs::path> parts;
  for (int i = 1; i <= 2; ++i) {
    GoldenOptions o = small_golden_options("qwen2-vl-7b", "0:4,grid:4:2:2", root / ("part" + std::to_string(i)));
    o.shard = Shard{i, 2};
    write_golden_set(o);
    parts.push_back(o.out);
  }
  EXPECT_THROW(merge_golden_shards({.parts = {parts[0]}, .out = root / "m"}), SpecError);  // 2 missing
  EXPECT_THROW(merge_golden_shards({.parts = {parts[0], parts[0], parts[1]}, .out = root / "m"}), SpecError);
  EXPECT_THROW(merge_golden_shards({.parts = {}, .out = root / "m"}), SpecError);
  EXPECT_FALSE(fs::exists(root / "m"));
  merge_golden_shards({.parts = parts, .out = root / "m"});
  const GoldenSet merged = load_golden_set(root / "m");
  EXPECT_EQ(merged.tokens(), 8);
  EXPECT_EQ(merged.tensor("positions").shape, (std::vector<std::int64_t>{3, 8}));
}

}  // namespace
}  // namespace ropecheck::golden
