// Shards that write into one shared golden set (golden_shared.hpp): the CRC-32 pieces an .npz needs
// combine to the whole member's, writers sharing one file give the bytes of one writer, the staging
// folder belongs to one run, and `merge --shared` gives one run's bytes or refuses with one line.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <numeric>

#include "../../io/include/ropecheck/io/tensor_file_writer.hpp"  // white-box: the shared writer modes
#include "ropecheck/io/atomic_output.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/golden/golden_shared.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/reference/presets.hpp"
#include "golden_options.hpp"
#include "temp_root.hpp"

namespace ropecheck::golden {
using namespace ropecheck::io;
namespace {

namespace fs = std::filesystem;
using io::detail::CrcRange;
using testing_support::file_bytes;
using testing_support::small_golden_options;

std::uint32_t crc_of(const std::vector<std::uint8_t>& b, std::size_t from, std::size_t n) {
  return static_cast<std::uint32_t>(crc32_z(crc32(0L, Z_NULL, 0), b.data() + from, n));
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

TEST(SharedShards, CrcRangesCombineInAnyOrderAndMustTile) {
  std::vector<std::uint8_t> b(1000);
  std::iota(b.begin(), b.end(), 7);
  const std::uint32_t whole = crc_of(b, 0, b.size());
  const std::vector<CrcRange> r = {{600, 400, crc_of(b, 600, 400)}, {0, 1, crc_of(b, 0, 1)}, {1, 599, crc_of(b, 1, 599)}};
  EXPECT_EQ(io::detail::combine_crc_ranges(r, 1000), whole);
  EXPECT_EQ(io::detail::combine_crc_ranges({}, 0), crc_of(b, 0, 0));
  EXPECT_EQ(io::detail::combine_crc_ranges({r[0], r[1]}, 1000), std::nullopt) << "a gap";
  EXPECT_EQ(io::detail::combine_crc_ranges(r, 1001), std::nullopt) << "short of the end";
  EXPECT_EQ(io::detail::combine_crc_ranges({r[0], r[1], r[2], r[1]}, 1000), std::nullopt) << "a range twice";
  EXPECT_EQ(io::detail::combine_crc_ranges({{0, 1001, 0}}, 1000), std::nullopt) << "past the end";
}

// Two writers share one .npz file, each writing half of every tensor; a third completes it from their
// CRCs: the bytes are one writer's.
TEST(SharedShards, WritersSharingAFileGiveOneWritersBytes) {
  const testing_support::TempRoot tmp("ropecheck-shared-");
  const fs::path& root = tmp.path();
  const std::vector<io::detail::TensorInfo> tensors = {{"b", TensorDType::f32, {6, 3}}, {"a", TensorDType::i64, {6}}};
  std::vector<std::vector<std::uint8_t>> data;
  for (const auto& t : tensors) {
    data.emplace_back(t.data_bytes());
    std::iota(data.back().begin(), data.back().end(), static_cast<std::uint8_t>(data.size() * 31));
  }
  using Mode = io::detail::TensorFileWriter::Mode;
  for (const FileFormat format : {FileFormat::npz, FileFormat::safetensors}) {
    const std::string ext = format == FileFormat::npz ? ".npz" : ".safetensors";
    {
      io::detail::TensorFileWriter one(root / ("one" + ext), tensors, format, {}, "t");
      for (std::size_t i = 0; i < tensors.size(); ++i) one.write(i, 0, data[i]);
      one.finish();
    }
    std::vector<std::vector<std::vector<CrcRange>>> crcs;
    for (int half = 1; half >= 0; --half) {
      io::detail::TensorFileWriter w(root / ("shared" + ext), tensors, format, {}, "t", Mode::shared_write);
      for (std::size_t i = 0; i < tensors.size(); ++i) {
        const std::size_t n = data[i].size() / 2, from = static_cast<std::size_t>(half) * n;
        w.write(i, from, {data[i].data() + from, n / 2});  // two adjacent pieces: one range
        w.write(i, from + n / 2, {data[i].data() + from + n / 2, n - n / 2});
      }
      w.sync();
      crcs.push_back(w.written_crcs());
    }
    io::detail::TensorFileWriter fin(root / ("shared" + ext), tensors, format, {}, "t", Mode::shared_finish);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (format == FileFormat::npz) {
        ASSERT_EQ(crcs[0][i].size(), 1u);
        EXPECT_EQ(crcs[0][i][0].offset, data[i].size() / 2);
        std::vector<CrcRange> all = crcs[0][i];
        all.insert(all.end(), crcs[1][i].begin(), crcs[1][i].end());
        fin.set_data_crc(i, *io::detail::combine_crc_ranges(all, data[i].size()));
      } else {
        EXPECT_TRUE(crcs[0][i].empty()) << "safetensors holds no CRCs";
      }
    }
    const auto finished = fin.finish();
    EXPECT_EQ(file_bytes(root / ("one" + ext)), file_bytes(root / ("shared" + ext))) << ext;
    EXPECT_EQ(finished.bytes, fs::file_size(root / ("one" + ext)));
  }
  // A file of another size is not this run's: refused, not truncated.
  const std::vector<io::detail::TensorInfo> other = {{"a", TensorDType::i64, {7}}};
  EXPECT_NE(message_of([&] { io::detail::TensorFileWriter w(root / "shared.npz", other, FileFormat::npz, {}, "t", Mode::shared_write); })
                .find("not the"),
            std::string::npos);
}

GoldenOptions shard_of(GoldenOptions o, int i, int n) {
  o.shard = Shard{i, n};
  o.shared_out = true;
  return o;
}

// phi-3.5's LongRoPE switches factors past 4096: a shard of small positions uses the set's seq_len.
TEST(SharedShards, ShardsWrittenIntoOneSetMergeToOneRun) {
  const testing_support::TempRoot tmp("ropecheck-shared-");
  const fs::path& root = tmp.path();
  for (const FileFormat format : {FileFormat::safetensors, FileFormat::npz}) {
    const std::string name = format == FileFormat::npz ? "npz" : "st";
    GoldenOptions base = small_golden_options("phi-3.5-mini", "0:10,5000,8191", root / (name + ".one"));
    base.format = format;
    write_golden_set(base);
    base.out = root / name;
    for (const int i : {3, 1, 2}) {
      const GoldenSummary s = write_golden_set(shard_of(base, i, 3));
      EXPECT_EQ(s.manifest["shard"]["first_token"], (std::vector<int>{0, 4, 8})[static_cast<std::size_t>(i - 1)]);
      EXPECT_EQ(s.manifest["run"]["seq_len"], 8192) << "seq_len of the whole set";
      EXPECT_EQ(s.manifest.contains("crc32"), format == FileFormat::npz);
      EXPECT_TRUE(fs::exists(root / (name + ".staging") / shard_record_name({i, 3})));
    }
    EXPECT_EQ(finalize_shared_golden_set({.out = base.out})["format"], "ropecheck-golden");
    for (const auto& f : fs::directory_iterator(root / (name + ".one")))
      EXPECT_EQ(file_bytes(f.path()), file_bytes(base.out / f.path().filename())) << name << " " << f.path().filename();
    EXPECT_FALSE(fs::exists(root / (name + ".staging")));
    EXPECT_NO_THROW(load_golden_set(base.out));
  }
}

TEST(SharedShards, StagingFolderBelongsToOneRun) {
  const testing_support::TempRoot tmp("ropecheck-shared-");
  const fs::path& root = tmp.path();
  EXPECT_EQ(shared_staging_folder(root / "set/", "--x"), root / "set.staging");
  EXPECT_THROW(shared_staging_folder("/", "--x"), SpecError);
  const nlohmann::json id = {{"spec", {{"name", "a"}}}, {"shard_count", 2}};
  const fs::path set = join_shared_staging(root / "s", id, {1, 2}, false);
  EXPECT_EQ(set, root / "s.staging" / "set");
  EXPECT_EQ(join_shared_staging(root / "s", id, {2, 2}, false), set) << "a second shard joins it";
  nlohmann::json other = id;
  other["shard_count"] = 3;
  EXPECT_NE(message_of([&] { join_shared_staging(root / "s", other, {1, 3}, false); })
                .find("belongs to another run: it differs in 'shard_count' (2 vs 3)"),
            std::string::npos);
  // A shard starting again removes its own record; one that makes a new set/ removes all old ones.
  write_shard_record(root / "s", {1, 2}, {{"x", 1}});
  write_shard_record(root / "s", {2, 2}, {{"x", 2}});
  EXPECT_EQ(nlohmann::json::parse(file_bytes(root / "s.staging" / "shard-2-of-2.json"))["format"],
            "ropecheck-golden-shared-shard");
  join_shared_staging(root / "s", id, {1, 2}, false);
  EXPECT_FALSE(fs::exists(root / "s.staging" / "shard-1-of-2.json"));
  EXPECT_TRUE(fs::exists(root / "s.staging" / "shard-2-of-2.json"));
  fs::remove(set);
  join_shared_staging(root / "s", id, {1, 2}, false);
  EXPECT_FALSE(fs::exists(root / "s.staging" / "shard-2-of-2.json")) << "a record of an earlier set";
  fs::create_directory(root / "s");
  EXPECT_THROW(join_shared_staging(root / "s", id, {1, 2}, false), SpecError) << "DIR exists";
  EXPECT_NO_THROW(join_shared_staging(root / "s", id, {1, 2}, true));
}

TEST(SharedShards, MergeRefusesAndKeepsTheStagingFolder) {
  const testing_support::TempRoot tmp("ropecheck-shared-");
  const fs::path& root = tmp.path();
  const GoldenOptions base = small_golden_options("qwen2-vl-7b", "0:4,grid:4:2:2", root / "m");
  write_golden_set(shard_of(base, 2, 2));
  EXPECT_EQ(message_of([&] { finalize_shared_golden_set({.out = base.out}); }),
            "merge --shared " + base.out.string() +
                ": 1 of 2 shards have no completion record (1): not run, still running, or killed; run them (again)");
  EXPECT_TRUE(fs::exists(root / "m.staging" / "set" / "outputs_bf16.safetensors")) << "kept for the missing shard";
  EXPECT_FALSE(fs::exists(base.out));
  write_golden_set(shard_of(base, 1, 2));
  // Records that are not what ropecheck writes: one line each, the staging folder kept.
  const fs::path rec = root / "m.staging" / "shard-2-of-2.json";
  const std::string good = file_bytes(rec);
  std::ofstream(root / "m.staging" / "shard-9-of-2.json") << "{}";
  EXPECT_NE(message_of([&] { finalize_shared_golden_set({.out = base.out}); }).find("'shard-9-of-2.json' is not a shard record"),
            std::string::npos);
  fs::remove(root / "m.staging" / "shard-9-of-2.json");
  nlohmann::json edited = nlohmann::json::parse(good);
  edited["shard"]["first_token"] = "four";
  std::ofstream(rec) << edited.dump();
  EXPECT_NE(message_of([&] { finalize_shared_golden_set({.out = base.out}); }).find("records are not what ropecheck writes"),
            std::string::npos);
  std::ofstream(rec) << good;
  fs::create_directory(base.out);
  EXPECT_NE(message_of([&] { finalize_shared_golden_set({.out = base.out}); }).find("already exists"), std::string::npos);
  EXPECT_NO_THROW(finalize_shared_golden_set({.out = base.out, .overwrite = true}));
  EXPECT_EQ(load_golden_set(base.out).tensor("positions").shape, (std::vector<std::int64_t>{3, 8}));
  EXPECT_NE(message_of([&] { finalize_shared_golden_set({.out = base.out}); }).find("no staging folder"), std::string::npos);
  // Without --shard there is no shard to record.
  GoldenOptions whole = base;
  whole.shared_out = true;
  EXPECT_THROW(write_golden_set(whole), SpecError);
}

TEST(SharedShards, AdoptedFolderIsMovedIntoPlaceOrKept) {
  const testing_support::TempRoot tmp("ropecheck-shared-");
  const fs::path& root = tmp.path();
  fs::create_directories(root / "staging");
  { OutputFolder f(root / "out", {.overwrite = false, .create_parents = true, .option = "--x", .command = "t"}, root / "staging"); }
  EXPECT_TRUE(fs::exists(root / "staging")) << "not committed: kept";
  {
    OutputFolder f(root / "out", {.overwrite = false, .create_parents = true, .option = "--x", .command = "t"}, root / "staging");
    f.write("a", "1");
    f.commit();
  }
  EXPECT_EQ(file_bytes(root / "out" / "a"), "1");
  EXPECT_FALSE(fs::exists(root / "staging"));
  fs::create_directories(root / "staging");
  EXPECT_THROW(OutputFolder(root / "out", {.overwrite = false, .create_parents = true, .option = "--x", .command = "t"},
                            root / "staging"),
               SpecError);
}

}  // namespace
}  // namespace ropecheck::golden
