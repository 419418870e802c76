// Tensor files read in pieces (tensor_reader.hpp), mapped files (mapped_file.hpp) and hashes of mapped
// files (sha256.hpp): the pieces are the whole-file readers' bytes, in any order, for safetensors, .npy and
// .npz (stored and deflated); a file the whole-file readers refuse is refused at open with their message,
// a bad CRC when its member is read to the end; a file truncated under its mapping ends the process with
// exit 2 and one line; mapped hashes equal streamed ones, on worker threads too.
#include <sys/wait.h>
#include <unistd.h>
#include <zip.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "ropecheck/io/mapped_file.hpp"
#include "ropecheck/io/npy.hpp"
#include "ropecheck/io/safetensors.hpp"
#include "ropecheck/io/sha256.hpp"
#include "ropecheck/io/tensor_file.hpp"
#include "ropecheck/io/tensor_reader.hpp"
#include "temp_root.hpp"

namespace ropecheck::io {
namespace {

namespace fs = std::filesystem;
using testing_support::TempRoot;

const fs::path& root() {
  static const TempRoot r("ropecheck_reader_");
  return r.path();
}

void write(const fs::path& p, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<Tensor> sample_tensors() {
  std::mt19937 rng(5);
  std::vector<float> f(3 * 5 * 7);
  for (float& x : f) x = static_cast<float>(rng()) / 1e9f;
  std::vector<double> d(40000);  // larger than a page, so ranges cross pages
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = static_cast<double>(i) * 0.5;
  std::vector<std::int64_t> p = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  return {make_f32("q_rot.f32", {3, 5, 7}, f), make_f64("cos.f64", {10000, 4}, d), make_i64("positions", {9}, p)};
}

// Every tensor read back whole, in pieces, and in a backward order, equals the original.
void expect_same_in_pieces(const TensorReader& r, const std::vector<Tensor>& want) {
  ASSERT_EQ(r.tensors().size(), want.size());
  for (const Tensor& w : want) {
    const std::optional<std::size_t> i = r.find(w.name);
    ASSERT_TRUE(i.has_value()) << w.name;
    const TensorReader::Entry& e = r.tensors()[*i];
    EXPECT_EQ(e.dtype, w.dtype);
    EXPECT_EQ(e.shape, w.shape);
    EXPECT_EQ(e.numel, w.numel());
    const std::size_t es = dtype_size(w.dtype);
    std::vector<std::uint8_t> buffer, got(w.data.size());
    for (std::int64_t step : {w.numel(), std::int64_t{7}, std::int64_t{4096}})
      for (std::int64_t e0 = w.numel(); e0 > 0;) {  // backwards: an .npz member is opened again
        const std::int64_t a = std::max<std::int64_t>(0, e0 - step);
        const std::span<const std::uint8_t> b = r.elements(*i, a, e0, buffer);
        ASSERT_EQ(b.size(), static_cast<std::size_t>(e0 - a) * es);
        std::copy(b.begin(), b.end(), got.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(a) * es));
        r.release(*i, a, e0);
        e0 = a;
      }
    EXPECT_EQ(got, w.data) << w.name;
  }
}

TEST(TensorReader, ReadsSafetensorsNpyAndNpzInPieces) {
  const std::vector<Tensor> t = sample_tensors();
  write(root() / "a.safetensors", serialize_safetensors(t, {}));
  write(root() / "a.npz", serialize_npz(t));
  write(root() / "cos.f64.npy", serialize_npy(t[1]));
  const auto st = TensorReader::open(root() / "a.safetensors", "a.safetensors");
  EXPECT_TRUE(st->mapped());
  expect_same_in_pieces(*st, t);
  // File order, as the whole-file reader returns them.
  const std::vector<Tensor> whole = read_safetensors(root() / "a.safetensors");
  for (std::size_t i = 0; i < whole.size(); ++i) EXPECT_EQ(st->tensors()[i].name, whole[i].name);
  const auto npz = TensorReader::open(root() / "a.npz", "a.npz");
  EXPECT_FALSE(npz->mapped());
  expect_same_in_pieces(*npz, t);
  const auto npy = open_tensor_file(root() / "cos.f64.npy", "--candidate");
  EXPECT_TRUE(npy->mapped());
  expect_same_in_pieces(*npy, {t[1]});
  EXPECT_EQ(sha256_mapped(st->file()), sha256_file(root() / "a.safetensors"));
}

// An .npz written by NumPy's savez_compressed: deflated members, read from the start when asked for an
// earlier range.
TEST(TensorReader, ReadsDeflatedNpzMembers) {
  const std::vector<Tensor> t = sample_tensors();
  const fs::path p = root() / "deflated.npz";
  int err = 0;
  zip_t* z = zip_open(p.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  ASSERT_NE(z, nullptr);
  std::vector<std::vector<std::uint8_t>> keep;
  for (const Tensor& x : t) {
    keep.push_back(serialize_npy(x));
    zip_source_t* s = zip_source_buffer(z, keep.back().data(), keep.back().size(), 0);
    const zip_int64_t i = zip_file_add(z, (x.name + ".npy").c_str(), s, ZIP_FL_OVERWRITE);
    ASSERT_GE(i, 0);
    zip_set_file_compression(z, static_cast<zip_uint64_t>(i), ZIP_CM_DEFLATE, 9);
  }
  ASSERT_EQ(zip_close(z), 0);
  expect_same_in_pieces(*TensorReader::open(p, "deflated.npz"), t);
}

// A file the whole-file readers refuse is refused at open with their message.
TEST(TensorReader, RefusesWhatTheWholeFileReadersRefuse) {
  std::vector<std::uint8_t> st = serialize_safetensors(sample_tensors(), {});
  std::vector<std::vector<std::uint8_t>> bad = {std::vector<std::uint8_t>(st.begin(), st.end() - 3), {1, 2, 3},
                                                std::vector<std::uint8_t>(st.begin(), st.end())};
  bad[2].push_back(0);  // a trailing byte
  for (std::size_t k = 0; k < bad.size(); ++k) {
    const fs::path p = root() / ("bad" + std::to_string(k) + ".safetensors");
    write(p, bad[k]);
    std::string whole_message, piece_message;
    try {
      parse_safetensors(bad[k], p.string());
    } catch (const InputError& e) {
      whole_message = e.what();
    }
    try {
      TensorReader::open(p, p.string());
    } catch (const InputError& e) {
      piece_message = e.what();
    }
    EXPECT_FALSE(whole_message.empty());
    EXPECT_EQ(piece_message, whole_message);
  }
  const fs::path npy = root() / "bad.npy";
  std::vector<std::uint8_t> b = serialize_npy(sample_tensors()[0]);
  b.resize(b.size() - 4);
  write(npy, b);
  EXPECT_THROW(TensorReader::open(npy, "bad.npy"), InputError);
  EXPECT_THROW(TensorReader::open(root() / "missing.safetensors", "missing"), InputError);
  write(root() / "x.txt", {1});
  EXPECT_THROW(TensorReader::open(root() / "x.txt", "x.txt"), InputError);
  // max_member_bytes as read_npz.
  write(root() / "big.npz", serialize_npz(sample_tensors()));
  TensorReaderOptions o;
  o.max_member_bytes = 1000;
  EXPECT_THROW(TensorReader::open(root() / "big.npz", "big.npz", o), InputError);
}

// A stored member whose data changed: its CRC-32 fails when the member is read to its end.
TEST(TensorReader, ChecksAnNpzMembersCrcAtItsEnd) {
  std::vector<std::uint8_t> z = serialize_npz({sample_tensors()[1]});
  z[200] ^= 1;  // inside the data of the only member
  write(root() / "crc.npz", z);
  const auto r = TensorReader::open(root() / "crc.npz", "crc.npz");
  std::vector<std::uint8_t> buffer;
  EXPECT_NO_THROW(r->elements(0, 0, 100, buffer));  // not yet at the end
  try {
    r->elements(0, 0, r->tensors()[0].numel, buffer);
    FAIL() << "a bad CRC read to the end";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("CRC"), std::string::npos) << e.what();
  }
}

// A mapped file truncated under the reader: exit 2 and one line naming it, not SIGBUS.
TEST(MappedFile, ATruncatedFileEndsTheProcessWithOneLine) {
  const fs::path p = root() / "shrinks.bin";
  write(p, std::vector<std::uint8_t>(std::size_t{1} << 20, 7));
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipefd[1], STDERR_FILENO);
    const auto f = MappedFile::open(p, "shrinks.bin");
    ::truncate(p.c_str(), 0);
    volatile std::uint8_t x = f->bytes()[std::size_t{1} << 19];
    (void)x;
    ::_exit(0);
  }
  ::close(pipefd[1]);
  char buf[512] = {};
  const ssize_t n = ::read(pipefd[0], buf, sizeof buf - 1);
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_EQ(std::string(buf, static_cast<std::size_t>(std::max<ssize_t>(0, n))),
            "ropecheck: error: shrinks.bin: the file shrank while it was read (another process truncated or rewrote it)\n");
}

TEST(MappedFile, ReleasedPagesReadAgain) {
  const fs::path p = root() / "pages.bin";
  std::vector<std::uint8_t> bytes(100000);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 31);
  write(p, bytes);
  const auto f = MappedFile::open(p, "pages.bin");
  ASSERT_EQ(f->size(), bytes.size());
  f->release(10, 50000);
  f->sequential(0, f->size());
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), f->bytes().begin()));
  write(root() / "empty.bin", {});
  EXPECT_EQ(MappedFile::open(root() / "empty.bin", "empty")->size(), 0u);
}

TEST(BackgroundHashes, HashesInTheOrderGivenOnAnyThreadCount) {
  std::vector<std::shared_ptr<const MappedFile>> files;
  std::vector<std::string> want;
  for (int k = 0; k < 5; ++k) {
    const fs::path p = root() / ("h" + std::to_string(k));
    write(p, std::vector<std::uint8_t>(static_cast<std::size_t>(k) * 3000000 + 1, static_cast<std::uint8_t>(k)));
    files.push_back(MappedFile::open(p, p.string()));
    want.push_back(sha256_file(p));
  }
  for (int threads : {1, 2, 8}) EXPECT_EQ(BackgroundHashes(files, threads).wait(), want) << threads;
  EXPECT_TRUE(BackgroundHashes({}, 2).wait().empty());
}

}  // namespace
}  // namespace ropecheck::io
