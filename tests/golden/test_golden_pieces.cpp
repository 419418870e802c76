// A golden set read in pieces (golden_set.hpp, "Reading in pieces"): values and position ranges read
// through the file readers equal the whole tensors', for safetensors and .npz sets and multimodal
// positions; the files' hashes verified on worker threads; a set loaded without its hashes (the
// streaming check's) still names a changed data file "manifest hash mismatch", whatever reads it first.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <tuple>
#include <string>
#include <vector>

#include "golden_options.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "temp_root.hpp"

namespace ropecheck::golden {
namespace {

namespace fs = std::filesystem;
using testing_support::TempRoot;

const fs::path& root() {
  static const TempRoot r("ropecheck_golden_pieces_");
  return r.path();
}

fs::path make(const std::string& name, const std::string& preset, const std::string& positions,
              io::FileFormat format = io::FileFormat::safetensors) {
  const fs::path out = root() / name;
  if (fs::exists(out / "manifest.json")) return out;
  GoldenOptions o = testing_support::small_golden_options(preset, positions, out);
  o.format = format;
  write_golden_set(o);
  return out;
}

void flip_byte(const fs::path& p, std::uint64_t at) {
  std::fstream f(p, std::ios::binary | std::ios::in | std::ios::out);
  f.seekg(static_cast<std::streamoff>(at));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x40);
  f.seekp(static_cast<std::streamoff>(at));
  f.write(&c, 1);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(GoldenPieces, ValuesAndPositionsEqualTheWholeTensors) {
  for (const auto& [name, preset, format] : {std::tuple{"st", "llama-3.1-8b", io::FileFormat::safetensors},
                                             std::tuple{"npz", "llama-3.1-8b", io::FileFormat::npz},
                                             std::tuple{"mrope", "qwen2-vl-7b", io::FileFormat::safetensors}}) {
    const GoldenSet g = load_golden_set(make(name, preset, "0:40", format));
    const std::vector<Position>& all = g.positions();
    for (const auto& [t0, t1] : {std::pair{0, 40}, std::pair{7, 8}, std::pair{13, 29}}) {
      const std::vector<Position> p = g.positions(t0, t1);
      ASSERT_EQ(p.size(), static_cast<std::size_t>(t1 - t0));
      for (int t = t0; t < t1; ++t) EXPECT_EQ(p[static_cast<std::size_t>(t - t0)], all[static_cast<std::size_t>(t)]) << name;
    }
    for (const std::string tensor : {"q", "k_rot.f64", "cos.bf16", "positions"}) {
      const io::Tensor& whole = g.tensor(tensor);
      for (std::int64_t i : {std::int64_t{0}, whole.numel() / 3, whole.numel() - 1})
        EXPECT_EQ(g.value(tensor, i), tensor == "positions" ? static_cast<double>(whole.int_value(i)) : whole.value(i)) << name;
      const GoldenSet::TensorRef r = g.locate(tensor);
      EXPECT_EQ(r.reader->tensors()[r.index].name, tensor);
      EXPECT_EQ(r.file->file, g.find(tensor)->file);
      std::vector<std::uint8_t> buffer;
      const std::span<const std::uint8_t> b = r.reader->elements(r.index, 0, whole.numel(), buffer);
      EXPECT_TRUE(std::equal(b.begin(), b.end(), whole.data.begin(), whole.data.end())) << name << " " << tensor;
      EXPECT_EQ(r.reader->mapped(), format == io::FileFormat::safetensors);
    }
    EXPECT_THROW(g.locate("no_such"), InputError);
  }
}

// Python's arrays: a safetensors set's tensors viewed in the mapped file (no copy), an .npz set's loaded;
// a file changed after the set was loaded is refused at its first view.
TEST(GoldenPieces, TensorBytesViewTheMappedFile) {
  for (const auto& [name, format] : {std::pair{"st", io::FileFormat::safetensors}, std::pair{"npz", io::FileFormat::npz}}) {
    const fs::path dir = make(name, "llama-3.1-8b", "0:40", format);
    const GoldenSet g = load_golden_set(dir);
    for (const std::string tensor : {"q", "cos.f64", "k_rot.bf16"}) {
      const std::span<const std::uint8_t> b = g.tensor_bytes(tensor);
      const io::Tensor& whole = g.tensor(tensor);
      EXPECT_TRUE(std::equal(b.begin(), b.end(), whole.data.begin(), whole.data.end())) << name << " " << tensor;
      const GoldenSet::TensorRef r = g.locate(tensor);
      const bool in_mapping = b.data() >= r.reader->file().bytes().data() &&
                              b.data() < r.reader->file().bytes().data() + r.reader->file().size();
      EXPECT_EQ(in_mapping, format == io::FileFormat::safetensors) << name << " " << tensor;
    }
  }
  const fs::path changed = root() / "st_changed";
  fs::copy(make("st", "llama-3.1-8b", "0:40"), changed);
  const GoldenSet g = load_golden_set(changed);
  flip_byte(changed / "inputs.safetensors", fs::file_size(changed / "inputs.safetensors") - 1);
  EXPECT_NE(error_of([&] { g.tensor_bytes("q"); }).find("manifest hash mismatch for"), std::string::npos);
}

// tensor() loads a file through the reader locate() opened and hashes what it read: a file changed
// after the set was loaded, even after locate() opened it, is refused, in either format.
TEST(GoldenPieces, TensorRefusesAFileChangedAfterLoading) {
  for (const auto& [name, format] : {std::pair{"st", io::FileFormat::safetensors}, std::pair{"npz", io::FileFormat::npz}}) {
    const fs::path changed = root() / (std::string(name) + "_changed_whole");
    fs::copy(make(name, "llama-3.1-8b", "0:40", format), changed);
    const GoldenSet g = load_golden_set(changed);
    (void)g.locate("q");
    const fs::path inputs = changed / (format == io::FileFormat::npz ? "inputs.npz" : "inputs.safetensors");
    flip_byte(inputs, fs::file_size(inputs) / 2);  // inside q's or k's data
    EXPECT_EQ(error_of([&] { (void)g.tensor("k"); }),
              "manifest hash mismatch for " + inputs.string() + " (the file changed after it was verified)")
        << name;
    EXPECT_EQ(g.tensor("cos.f64").shape, (std::vector<std::int64_t>{40, 64})) << name;  // other files still load
  }
}

TEST(GoldenPieces, VerifiesTheFilesHashesOnWorkerThreads) {
  const fs::path dir = make("hashes", "llama-3.1-8b", "0:40");
  const GoldenSet g = load_golden_set(dir);
  std::vector<std::string> files;
  for (const ManifestFile& f : g.files()) files.push_back(f.file);
  for (int threads : {1, 3}) {
    PendingHashes p = g.verify_files(files, threads);
    EXPECT_EQ(p.files(), files);
    EXPECT_NO_THROW(p.wait());
  }
  EXPECT_THROW(g.verify_files({"manifest.json"}, 1), InputError);  // not a data file of the manifest
  const fs::path bad = root() / "hashes_bad";
  fs::copy(dir, bad);
  flip_byte(bad / "outputs_bf16.safetensors", fs::file_size(bad / "outputs_bf16.safetensors") - 5);
  const GoldenSet gb = load_golden_set(bad, {.hash_files = false});  // the sample does not read that byte
  const std::string e = error_of([&] { gb.verify_files(files, 2).wait(); });
  EXPECT_NE(e.find("manifest hash mismatch for " + (bad / "outputs_bf16.safetensors").string()), std::string::npos) << e;
}

// A changed header or a changed sampled value would read as a parse error or an edited manifest: the
// file's hash is checked first, so it is named as changed.
TEST(GoldenPieces, AChangedFileIsNamedAsSuchWithoutHashesAtLoad) {
  const fs::path dir = make("tamper", "llama-3.1-8b", "0:40");
  const fs::path header = root() / "tamper_header";
  fs::copy(dir, header);
  flip_byte(header / "outputs_bf16.safetensors", 12);  // inside the JSON header
  const GoldenSet g = load_golden_set(header, {.hash_files = false});
  EXPECT_NE(error_of([&] { g.locate("q_rot.bf16"); }).find("manifest hash mismatch for"), std::string::npos);
  const fs::path value = root() / "tamper_value";
  fs::copy(dir, value);
  const GoldenSet clean = load_golden_set(dir);
  const GoldenSet::TensorRef r = clean.locate("cos.f64");
  std::vector<std::uint8_t> buffer;
  const std::uint64_t at =
      static_cast<std::uint64_t>(r.reader->elements(r.index, 0, 1, buffer).data() - r.reader->file().bytes().data());
  flip_byte(value / "outputs_f64.safetensors", at + 6);  // cos.f64 element 0: sampled
  const std::string e = error_of([&] { load_golden_set(value, {.hash_files = false}); });
  EXPECT_NE(e.find("manifest hash mismatch for"), std::string::npos) << e;
}

}  // namespace
}  // namespace ropecheck::golden
