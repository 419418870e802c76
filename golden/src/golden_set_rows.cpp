// A golden set's data read in pieces (golden_set.hpp, "Reading in pieces"): each data file opened once
// as an io::TensorReader and checked against the manifest, single values and token ranges of positions
// read through it, and the files' hashes computed from their mappings while a reader reads them.
#include <cstring>

#include "golden_set_state.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"
#include "ropecheck/io/sha256.hpp"

namespace ropecheck::golden {

namespace {

// The tensors of file `mf` as the manifest lists them, or InputError naming the file (what locate() and
// through it tensor() check).
void check_against_manifest(const GoldenSet& set, const ManifestFile& mf, const io::TensorReader& r,
                            const std::string& where) {
  std::set<std::string> seen;
  for (const io::TensorReader::Entry& t : r.tensors()) {
    const ManifestTensor* m = set.find(t.name);
    if (m == nullptr || m->file != mf.file)
      throw InputError(where + ": tensor " + quote_name(t.name) + " is not listed for this file in the manifest");
    // .npz stores FP8 codes as uint8 bit patterns, the manifest names their type (GOLDEN_FORMAT.md).
    const bool fp8_bits = t.dtype == io::TensorDType::u8 &&
                          (m->dtype == io::TensorDType::e4m3fn || m->dtype == io::TensorDType::e5m2);
    if ((m->dtype != t.dtype && !fp8_bits) || m->shape != t.shape)
      throw InputError(where + ": tensor " + quote_name(t.name) + " is " + std::string(io::to_string(t.dtype)) + " " +
                       io::shape_for_message(t.shape) + " but the manifest says " + std::string(io::to_string(m->dtype)) +
                       " " + io::shape_for_message(m->shape));
    seen.insert(t.name);
  }
  for (const ManifestTensor& m : set.tensors())
    if (m.file == mf.file && !seen.count(m.name))
      throw InputError(where + ": the manifest lists tensor " + quote_name(m.name) + " but the file does not hold it");
}

}  // namespace

GoldenSet::TensorRef GoldenSet::locate(std::string_view name) const {
  const ManifestTensor* m = find(name);
  if (m == nullptr) throw InputError(sanitize(s_->dir.string()) + ": the golden set has no tensor " + quote_name(name));
  const auto fit = std::find_if(s_->files.begin(), s_->files.end(), [&](const ManifestFile& f) { return f.file == m->file; });
  std::lock_guard<std::mutex> lock(s_->reader_mutex);
  auto it = s_->readers.find(m->file);
  if (it == s_->readers.end()) {
    const std::filesystem::path p = s_->dir / m->file;
    const std::string where = sanitize(p.string());
    std::unique_ptr<io::TensorReader> r;
    try {
      r = io::TensorReader::open(p, where);
      if (r->file().size() != fit->bytes)
        throw InputError("manifest hash mismatch for " + where + " (the file changed after it was verified)");
      check_against_manifest(*this, *fit, *r, where);
    } catch (const InputError&) {
      verify_files({m->file}, 1).wait();  // a changed file is named as such, not by what its parser saw
      throw;
    }
    it = s_->readers.emplace(m->file, std::move(r)).first;
  }
  return {it->second.get(), *it->second->find(name), &*fit};
}

double GoldenSet::value(std::string_view name, std::int64_t index) const {
  const TensorRef t = locate(name);
  const io::TensorReader::Entry& e = t.reader->tensors()[t.index];
  std::vector<std::uint8_t> buffer;
  const std::span<const std::uint8_t> b = t.reader->elements(t.index, index, index + 1, buffer);
  io::Tensor one{e.name, e.dtype, {1}, {b.begin(), b.end()}};
  return e.dtype == io::TensorDType::i64 || e.dtype == io::TensorDType::i32 ? static_cast<double>(one.int_value(0))
                                                                              : one.value(0);
}

std::vector<Position> GoldenSet::positions(std::int64_t t0, std::int64_t t1) const {
  const TensorRef t = locate("positions");
  const std::int64_t T = s_->tokens, n = t1 - t0;
  std::vector<Position> out(static_cast<std::size_t>(n));
  std::vector<std::uint8_t> buffer;
  for (int s = 0; s < s_->streams; ++s) {  // [T] or [3, T]: a stream's positions are contiguous
    const std::span<const std::uint8_t> b = t.reader->elements(t.index, s * T + t0, s * T + t1, buffer);
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t x;
      std::memcpy(&x, b.data() + 8 * i, 8);
      if (x > kMaxPosition || x < -kMaxPosition)
        throw InputError(sanitize(s_->dir.string()) + ": position " + std::to_string(x) + " is beyond 2^53");
      Position& p = out[static_cast<std::size_t>(i)];
      if (s_->streams == 1) p = Position::uniform(x);
      else (s == 0 ? p.t : (s == 1 ? p.h : p.w)) = x;
    }
    t.reader->release(t.index, s * T + t0, s * T + t1);
  }
  return out;
}

std::span<const std::uint8_t> GoldenSet::tensor_bytes(std::string_view name) const {
  const TensorRef t = locate(name);
  if (!t.reader->mapped()) return tensor(name).data;
  {
    std::lock_guard<std::mutex> lock(s_->reader_mutex);
    if (!s_->viewed.count(t.file->file)) {
      verify_files({t.file->file}, 1).wait();  // the file changed since the set was loaded: refused
      s_->viewed.insert(t.file->file);
    }
  }
  std::vector<std::uint8_t> unused;
  const io::TensorReader::Entry& e = t.reader->tensors()[t.index];
  return t.reader->elements(t.index, 0, e.numel, unused);
}

// ---- hashes -------------------------------------------------------------------------------------------

struct PendingHashes::State {
  std::vector<std::string> files, paths, expected;
  std::optional<io::BackgroundHashes> hashes;
};

PendingHashes::PendingHashes() : s_(std::make_unique<State>()) {}
PendingHashes::~PendingHashes() = default;
PendingHashes::PendingHashes(PendingHashes&&) noexcept = default;
PendingHashes& PendingHashes::operator=(PendingHashes&&) noexcept = default;
const std::vector<std::string>& PendingHashes::files() const { return s_->files; }

void PendingHashes::wait() {
  if (!s_->hashes) return;
  const std::vector<std::string> got = s_->hashes->wait();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != s_->expected[i]) throw InputError("manifest hash mismatch for " + s_->paths[i]);
}

PendingHashes GoldenSet::verify_files(const std::vector<std::string>& files, int threads) const {
  PendingHashes p;
  std::vector<std::shared_ptr<const io::MappedFile>> maps;
  for (const std::string& f : files) {
    const auto it = std::find_if(s_->files.begin(), s_->files.end(), [&](const ManifestFile& m) { return m.file == f; });
    if (it == s_->files.end()) throw InputError(sanitize(s_->dir.string()) + ": the manifest lists no file " + quote_name(f));
    const std::string where = sanitize((s_->dir / f).string());
    // Mapped anew (not through locate): a file is hashed whole, whatever the readers parse of it.
    maps.push_back(io::MappedFile::open(s_->dir / f, where));
    if (maps.back()->size() != it->bytes)
      throw InputError("manifest hash mismatch for " + where + " (the file changed after it was verified)");
    p.s_->files.push_back(f);
    p.s_->paths.push_back(where);
    p.s_->expected.push_back(it->sha256);
  }
  p.s_->hashes.emplace(std::move(maps), threads);
  return p;
}

}  // namespace ropecheck::golden
