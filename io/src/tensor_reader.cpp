#include "ropecheck/io/tensor_reader.hpp"

#include <zip.h>

#include <algorithm>
#include <mutex>

#include "npz_detail.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"

namespace ropecheck::io {

namespace {

using detail::fail;

// An .npz member being read: where its tensor's data start inside it, and libzip's cursor.
struct Member {
  detail::NpzMember m;
  std::uint64_t data_offset = 0;
  std::unique_ptr<zip_file_t, detail::ZipFileClose> cursor;
  std::uint64_t at = 0;  // the cursor's position in the member
};

}  // namespace

struct TensorReader::State {
  std::shared_ptr<const MappedFile> file;
  std::string what;
  std::vector<Entry> entries;
  std::vector<std::uint64_t> offsets;  // mapped: each tensor's data offset in the file
  // .npz only
  std::unique_ptr<zip_t, detail::ZipDiscard> zip;
  std::vector<Member> members;
  std::mutex mutex;

  void open_member(Member& mb) {
    mb.cursor.reset(zip_fopen_index(zip.get(), mb.m.index, 0));
    if (!mb.cursor) fail(what, "cannot open member " + quote_name(mb.m.name) + ": " + detail::zip_error_text(zip_get_error(zip.get())));
    mb.at = 0;
  }
  // Reads member bytes [a, b) into out (b - a bytes); reading to the member's end checks its CRC-32.
  void read_member(Member& mb, std::uint64_t a, std::uint64_t b, std::uint8_t* out) {
    const std::string mq = "member " + quote_name(mb.m.name);
    auto read = [&](std::uint8_t* to, std::uint64_t n) {
      for (std::uint64_t done = 0; done < n;) {
        const zip_int64_t got = zip_fread(mb.cursor.get(), to + done, n - done);
        if (got < 0) fail(what, "cannot read " + mq + ": " + detail::zip_error_text(zip_file_get_error(mb.cursor.get())));
        if (got == 0)
          fail(what, mq + " holds " + std::to_string(mb.at + done) + " bytes, not its declared " + std::to_string(mb.m.size));
        done += static_cast<std::uint64_t>(got);
      }
      mb.at += n;
    };
    if (!mb.cursor || mb.at > a) open_member(mb);
    // A stored member seeks over a long stretch (then its CRC-32 cannot be checked: a shard's range); a
    // short one (the .npy header) is read, so that a member read to its end from its start is checked.
    constexpr std::uint64_t kSeekPast = std::uint64_t{1} << 20;
    if (mb.at + kSeekPast < a && mb.m.stored && zip_fseek(mb.cursor.get(), static_cast<zip_int64_t>(a), SEEK_SET) == 0)
      mb.at = a;
    std::vector<std::uint8_t> skip;
    while (mb.at < a) {  // inflated or read up to a
      skip.resize(static_cast<std::size_t>(std::min<std::uint64_t>(a - mb.at, std::uint64_t{1} << 20)));
      read(skip.data(), skip.size());
    }
    read(out, b - a);
    if (b == mb.m.size) {  // the end: libzip checks the CRC-32 when it reads past it
      std::uint8_t extra = 0;
      const zip_int64_t got = zip_fread(mb.cursor.get(), &extra, 1);
      if (got < 0) fail(what, "cannot read " + mq + ": " + detail::zip_error_text(zip_file_get_error(mb.cursor.get())));
      if (got > 0) fail(what, mq + " holds more than its declared " + std::to_string(mb.m.size) + " bytes");
      mb.cursor.reset();
    }
  }
};

TensorReader::TensorReader() : s_(std::make_unique<State>()) {}
TensorReader::~TensorReader() = default;

std::unique_ptr<TensorReader> TensorReader::open(const std::filesystem::path& path, const std::string& what,
                                                 const TensorReaderOptions& options) {
  std::unique_ptr<TensorReader> r(new TensorReader());
  State& s = *r->s_;
  s.what = what;
  s.file = MappedFile::open(path, what);
  const std::span<const std::uint8_t> bytes = s.file->bytes();
  auto add = [&](std::string name, TensorDType dt, std::vector<std::int64_t> shape, std::uint64_t offset) {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;  // the readers checked the byte size for overflow
    s.entries.push_back({std::move(name), dt, std::move(shape), n});
    s.offsets.push_back(offset);
  };
  std::string ext = path.extension().string();
  for (char& c : ext) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (ext == ".safetensors") {
    for (detail::TensorSpan& t : detail::safetensors_layout(bytes, what))
      add(std::move(t.info.name), t.info.dtype, std::move(t.info.shape), t.offset);
  } else if (ext == ".npy") {
    detail::NpyLayout l = detail::npy_layout(bytes, bytes.size(), what, options.u2_is_bf16);
    add(path.stem().string(), l.dtype, std::move(l.shape), l.offset);
  } else if (ext == ".npz") {
    s.zip = detail::open_npz(bytes, what);
    for (const detail::NpzMember& m : detail::npz_members(s.zip.get(), what, bytes.size(), options.max_member_bytes)) {
      Member mb{m, 0, nullptr, 0};
      std::vector<std::uint8_t> head(static_cast<std::size_t>(std::min<std::uint64_t>(m.size, detail::kNpyHeadBytes)));
      s.open_member(mb);
      s.read_member(mb, 0, head.size(), head.data());
      const std::string member_what = what + " member " + quote_name(m.name);
      detail::NpyLayout l = detail::npy_layout(head, m.size, member_what, options.u2_is_bf16);
      mb.data_offset = l.offset;
      add(m.name.substr(0, m.name.size() - 4), l.dtype, std::move(l.shape), 0);
      s.members.push_back(std::move(mb));
    }
  } else {
    fail(what, "unsupported file type '" + sanitize(ext) + "' (expected .safetensors, .npz or .npy)");
  }
  return r;
}

const std::vector<TensorReader::Entry>& TensorReader::tensors() const { return s_->entries; }

std::optional<std::size_t> TensorReader::find(std::string_view name) const {
  for (std::size_t i = 0; i < s_->entries.size(); ++i)
    if (s_->entries[i].name == name) return i;
  return std::nullopt;
}

bool TensorReader::mapped() const { return !s_->zip; }
const MappedFile& TensorReader::file() const { return *s_->file; }

std::span<const std::uint8_t> TensorReader::elements(std::size_t i, std::int64_t e0, std::int64_t e1,
                                                     std::vector<std::uint8_t>& buffer) const {
  const Entry& e = s_->entries.at(i);
  if (e0 < 0 || e1 < e0 || e1 > e.numel)
    throw std::out_of_range("TensorReader::elements: range past the tensor " + e.name);
  const std::uint64_t es = dtype_size(e.dtype);
  const std::uint64_t a = static_cast<std::uint64_t>(e0) * es, n = static_cast<std::uint64_t>(e1 - e0) * es;
  if (!s_->zip) {
    s_->file->populate(s_->offsets[i] + a, n);
    return s_->file->bytes().subspan(s_->offsets[i] + a, n);
  }
  std::lock_guard<std::mutex> lock(s_->mutex);
  Member& mb = s_->members[i];
  buffer.resize(static_cast<std::size_t>(n));
  if (n > 0) s_->read_member(mb, mb.data_offset + a, mb.data_offset + a + n, buffer.data());
  return {buffer.data(), buffer.size()};
}

void TensorReader::populate(std::size_t i, std::int64_t e0, std::int64_t e1) const {
  if (s_->zip) return;
  const std::uint64_t es = dtype_size(s_->entries.at(i).dtype);
  s_->file->populate(s_->offsets[i] + static_cast<std::uint64_t>(e0) * es, static_cast<std::uint64_t>(e1 - e0) * es);
}

void TensorReader::release(std::size_t i, std::int64_t e0, std::int64_t e1) const {
  if (s_->zip) return;
  const std::uint64_t es = dtype_size(s_->entries.at(i).dtype);
  s_->file->release(s_->offsets[i] + static_cast<std::uint64_t>(e0) * es, static_cast<std::uint64_t>(e1 - e0) * es);
}

}  // namespace ropecheck::io
