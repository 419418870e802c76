// The golden-set writer: layout, manifest, determinism across thread counts, atomic replacement,
// and no output at all on unusable input.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/io/safetensors.hpp"
#include "ropecheck/reference/presets.hpp"
#include "temp_root.hpp"

namespace ropecheck::golden {
using namespace ropecheck::io;
namespace {

namespace fs = std::filesystem;

fs::path temp_root() {
  const fs::path p = fs::temp_directory_path() /
                     ("ropecheck-writer-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

using testing_support::file_bytes;

GoldenOptions options(const std::string& preset, const std::string& positions, const fs::path& out) {
  GoldenOptions o;
  o.spec = load_preset(preset);
  o.positions = parse_positions(positions);
  o.out = out;
  o.dtypes = {DType::f32, DType::bf16};
  o.heads = 2;
  o.seed = 3;
  o.threads = 2;
  return o;
}

TEST(GoldenWriter, WritesTheDocumentedLayout) {
  const fs::path root = temp_root();
  const GoldenSummary s = write_golden_set(options("llama-3.1-8b", "0:5,4095,131071", root / "set"));
  for (const char* f : {"manifest.json", "inputs.safetensors", "outputs_f64.safetensors", "outputs_f32.safetensors",
                        "outputs_bf16.safetensors"})
    EXPECT_TRUE(fs::exists(root / "set" / f)) << f;
  EXPECT_EQ(s.manifest["seq_len"], 131072);  // max position + 1
  EXPECT_EQ(s.manifest["positions"]["tokens"], 7);
  const auto out = read_safetensors(root / "set" / "outputs_bf16.safetensors");
  ASSERT_EQ(out.size(), 4u);
  for (const Tensor& t : out) {
    if (t.name == "cos.bf16" || t.name == "sin.bf16") {
      EXPECT_EQ(t.shape, (std::vector<std::int64_t>{7, 64}));
    }
    if (t.name == "q_rot.bf16") {
      EXPECT_EQ(t.shape, (std::vector<std::int64_t>{7, 2, 128}));
    }
  }
  // The reader accepts what the writer wrote (hashes, shapes, dtypes).
  const GoldenSet g = load_golden_set(root / "set");
  EXPECT_EQ(g.tokens(), 7);
  EXPECT_EQ(g.heads(), 2);
  // Only the set remains: no temporary folder beside it.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(root)) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(GoldenWriter, SameBytesForAnyThreadCount) {
  const fs::path root = temp_root();
  GoldenOptions a = options("qwen2-vl-7b", "0:6,grid:6:2:3,100/50/7", root / "a");
  GoldenOptions b = a;
  a.threads = 1;
  b.out = root / "b";
  b.threads = 2;
  write_golden_set(a);
  write_golden_set(b);
  for (const char* f : {"manifest.json", "inputs.safetensors", "outputs_f64.safetensors", "outputs_bf16.safetensors"})
    EXPECT_EQ(file_bytes(root / "a" / f), file_bytes(root / "b" / f)) << f;
}

TEST(GoldenWriter, NpzFormatAndSinusoidal) {
  const fs::path root = temp_root();
  GoldenOptions o = options("fairseq-transformer", "0:3,1000", root / "pe");
  o.format = FileFormat::npz;
  const GoldenSummary s = write_golden_set(o);
  EXPECT_TRUE(fs::exists(root / "pe" / "outputs_bf16.npz"));
  bool saw_bf16 = false;
  for (const auto& t : s.manifest["tensors"])
    if (t["name"] == "pe.bf16") {
      saw_bf16 = true;
      EXPECT_EQ(t["npy_storage"], "uint16 bit patterns");
      EXPECT_EQ(t["shape"], (std::vector<std::int64_t>{4, 512}));
    }
  EXPECT_TRUE(saw_bf16);
}

TEST(GoldenWriter, RefusesToOverwriteUnlessAsked) {
  const fs::path root = temp_root();
  write_golden_set(options("llama-2-7b", "0:3", root / "set"));
  const std::string before = file_bytes(root / "set" / "manifest.json");
  EXPECT_THROW(write_golden_set(options("llama-2-7b", "0:4", root / "set")), SpecError);
  EXPECT_EQ(file_bytes(root / "set" / "manifest.json"), before);
  GoldenOptions o = options("llama-2-7b", "0:4", root / "set");
  o.overwrite = true;
  write_golden_set(o);
  EXPECT_NE(file_bytes(root / "set" / "manifest.json"), before);
}

TEST(GoldenWriter, UnusableInputWritesNothing) {
  const fs::path root = temp_root();
  GoldenOptions o = options("llama-3.1-8b", "1/2/3", root / "set");  // triples need a multimodal spec
  EXPECT_THROW(write_golden_set(o), SpecError);
  o = options("llama-3.1-8b", "0:3", root / "set2");
  o.heads = 0;
  EXPECT_THROW(write_golden_set(o), SpecError);
  EXPECT_TRUE(fs::is_empty(root));
}

TEST(GoldenWriter, FailureWhileWritingLeavesNoSet) {
  const fs::path root = temp_root();
  // The output's parent is a file: creating the temporary folder fails; nothing named OUT appears.
  std::ofstream(root / "file") << "x";
  GoldenOptions o = options("llama-2-7b", "0:3", root / "file" / "set");
  EXPECT_ANY_THROW(write_golden_set(o));
  EXPECT_FALSE(fs::exists(root / "file" / "set"));
}

}  // namespace
}  // namespace ropecheck::golden
