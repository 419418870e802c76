#include "ropecheck/io/npy.hpp"

#include <zip.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <set>

#include "ropecheck/io/detail/tensor_io.hpp"
#include "npz_detail.hpp"

namespace ropecheck::io {

namespace {

using detail::fail;

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::size_t kMaxHeaderLen = 10000;   // NumPy's _MAX_HEADER_SIZE
constexpr std::size_t kArrayAlign = 64;        // NumPy's ARRAY_ALIGN
constexpr std::size_t kGrowthAxisMaxDigits = 21;  // NumPy's GROWTH_AXIS_MAX_DIGITS

std::string_view descr_of(TensorDType t) {
  switch (t) {
    case TensorDType::f64: return "<f8";
    case TensorDType::f32: return "<f4";
    case TensorDType::f16: return "<f2";
    case TensorDType::bf16: return "<u2";
    case TensorDType::i64: return "<i8";
    case TensorDType::i32: return "<i4";
  }
  return "";
}

// ---- .npy header: a Python dict literal ----------------------------------------------------

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view what) : s_(text), what_(what) {}

  NpyHeader parse() {
    NpyHeader h;
    bool have_descr = false, have_fortran = false, have_shape = false;
    expect('{');
    skip_ws();
    while (!at('}')) {
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        if (have_descr) fail(what_, "header has the key 'descr' twice");
        have_descr = true;
        h.descr = string_literal();
      } else if (key == "fortran_order") {
        if (have_fortran) fail(what_, "header has the key 'fortran_order' twice");
        have_fortran = true;
        h.fortran_order = boolean_literal();
      } else if (key == "shape") {
        if (have_shape) fail(what_, "header has the key 'shape' twice");
        have_shape = true;
        h.shape = shape_tuple();
      } else {
        fail(what_, "header has an unexpected key " + quote_name(key) +
                        " (expected exactly 'descr', 'fortran_order' and 'shape')");
      }
      skip_ws();
      if (at(',')) {
        ++i_;
        skip_ws();
      } else if (!at('}')) {
        bad("expected ',' or '}'");
      }
    }
    ++i_;  // '}'
    skip_ws();
    if (i_ != s_.size()) bad("text after the closing '}'");
    if (!have_descr) fail(what_, "header lacks the key 'descr'");
    if (!have_fortran) fail(what_, "header lacks the key 'fortran_order'");
    if (!have_shape) fail(what_, "header lacks the key 'shape'");
    return h;
  }

 private:
  [[noreturn]] void bad(const std::string& why) {
    fail(what_, "header is not the NumPy dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)}: " + why +
                    " at offset " + std::to_string(i_));
  }
  bool at(char c) const { return i_ < s_.size() && s_[i_] == c; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    skip_ws();
    if (!at(c)) bad(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string string_literal() {
    skip_ws();
    if (!at('\'') && !at('"')) bad("expected a quoted string");
    const char q = s_[i_++];
    const std::size_t start = i_;
    while (i_ < s_.size() && s_[i_] != q) {
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '\\' || c < 0x20 || c >= 0x7F) bad("unsupported character in a string");
      ++i_;
    }
    if (i_ == s_.size()) bad("unterminated string");
    return std::string(s_.substr(start, i_++ - start));
  }
  bool boolean_literal() {
    skip_ws();
    const std::size_t start = i_;
    while (i_ < s_.size() && ((s_[i_] >= 'A' && s_[i_] <= 'Z') || (s_[i_] >= 'a' && s_[i_] <= 'z'))) ++i_;
    const std::string_view word = s_.substr(start, i_ - start);
    if (word == "True") return true;
    if (word == "False") return false;
    i_ = start;
    bad("'fortran_order' must be True or False");
  }
  std::int64_t dimension() {
    skip_ws();
    if (at('-')) fail(what_, "header 'shape' has a negative dimension");
    const std::size_t start = i_;
    std::uint64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      const std::optional<std::uint64_t> m = detail::checked_mul(v, 10);
      const auto digit = static_cast<std::uint64_t>(s_[i_] - '0');
      if (!m || *m > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) - digit) {
        fail(what_, "header 'shape' has a dimension too large for 64 bits");
      }
      v = *m + digit;
      ++i_;
    }
    if (i_ == start) bad("'shape' must be a tuple of non-negative integers");
    if (s_[start] == '0' && i_ - start > 1) bad("dimension with a leading zero");
    return static_cast<std::int64_t>(v);
  }
  std::vector<std::int64_t> shape_tuple() {
    expect('(');
    std::vector<std::int64_t> shape;
    skip_ws();
    if (at(')')) {
      ++i_;
      return shape;
    }
    for (;;) {
      shape.push_back(dimension());
      skip_ws();
      if (at(')')) {
        if (shape.size() == 1) bad("'shape' (n) is not a tuple; a 1-d shape is written (n,)");
        ++i_;
        return shape;
      }
      if (!at(',')) bad("expected ',' or ')' in 'shape'");
      ++i_;
      skip_ws();
      if (at(')')) {
        ++i_;
        return shape;
      }
    }
  }

  std::string_view s_;
  std::string_view what_;
  std::size_t i_ = 0;
};

TensorDType dtype_of_descr(const std::string& d, bool u2_is_bf16, std::string_view what) {
  if (d == "<f8") return TensorDType::f64;
  if (d == "<f4") return TensorDType::f32;
  if (d == "<f2") return TensorDType::f16;
  if (d == "<i8") return TensorDType::i64;
  if (d == "<i4") return TensorDType::i32;
  if (d == "<u2" && u2_is_bf16) return TensorDType::bf16;
  if (d == "<u2") fail(what, "unsupported descr '<u2' (uint16; read it with u2_is_bf16 for bf16 bit patterns)");
  if (!d.empty() && d[0] == '>') fail(what, "big-endian descr " + quote_name(d) + " is not supported");
  fail(what, "unsupported descr " + quote_name(d) + " (supported: '<f8', '<f4', '<f2', '<i8', '<i4', '<u2')");
}

// Python's repr of the shape tuple: (), (5,), (2, 3).
std::string shape_repr(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ',';
  s += ')';
  return s;
}

// ---- ZIP (.npz) reading through libzip ------------------------------------------------------

using detail::ZipDiscard;
using detail::ZipFileClose;

std::string zip_error_text(zip_error_t* e) {
  const char* s = zip_error_strerror(e);
  return sanitize(s ? s : "unknown libzip error", 200);
}

}  // namespace

// ---- .npy ------------------------------------------------------------------------------------

detail::NpyLayout detail::npy_layout(std::span<const std::uint8_t> bytes, std::uint64_t size, std::string_view what,
                                    bool u2_is_bf16) {
  if (size < kMagic.size() + 2 ||
      !std::equal(kMagic.begin(), kMagic.end(), bytes.begin(),
                  [](char a, std::uint8_t b) { return static_cast<std::uint8_t>(a) == b; })) {
    fail(what, "not a .npy file (bad magic; expected \\x93NUMPY)");
  }
  const unsigned major = bytes[6], minor = bytes[7];
  if (!((major == 1 || major == 2 || major == 3) && minor == 0)) {
    fail(what, "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                   " (supported: 1.0, 2.0, 3.0)");
  }
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  if (size < 8 + len_bytes) fail(what, "file ends inside the header length");
  const std::uint64_t hlen = major == 1 ? detail::load_u16(bytes.data() + 8) : detail::load_u32(bytes.data() + 8);
  if (hlen > kMaxHeaderLen) {
    fail(what, "header length " + std::to_string(hlen) + " exceeds the limit of " + std::to_string(kMaxHeaderLen) +
                   " bytes");
  }
  const std::size_t start = 8 + len_bytes;
  if (hlen > size - start) {
    fail(what, "header length " + std::to_string(hlen) + " runs past the end of the file (" + std::to_string(size) +
                   " bytes)");
  }
  if (start + hlen > bytes.size()) fail(what, "header runs past the bytes read (" + std::to_string(bytes.size()) + ")");
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + start, static_cast<std::size_t>(hlen));
  const NpyHeader h = HeaderParser(text, what).parse();

  NpyLayout t;
  t.dtype = dtype_of_descr(h.descr, u2_is_bf16, what);
  if (h.fortran_order) fail(what, "fortran_order not supported (only C order)");
  const std::optional<std::uint64_t> nbytes = detail::checked_byte_size(h.shape, dtype_size(t.dtype));
  if (!nbytes) {
    fail(what, "shape " + shape_for_message(h.shape) + " overflows 64-bit sizes");
  }
  const std::uint64_t data_len = size - start - hlen;
  if (data_len < *nbytes) {
    fail(what, "data is " + std::to_string(data_len) + " bytes but " + h.descr + " shape " +
                   shape_for_message(h.shape) + " needs " + std::to_string(*nbytes) + " (truncated)");
  }
  if (data_len > *nbytes) {
    fail(what, std::to_string(data_len - *nbytes) + " trailing bytes after the data");
  }
  t.shape = h.shape;
  t.offset = start + hlen;
  t.bytes = *nbytes;
  return t;
}

Tensor parse_npy(std::span<const std::uint8_t> bytes, std::string name, std::string_view what, bool u2_is_bf16) {
  const detail::NpyLayout l = detail::npy_layout(bytes, bytes.size(), what, u2_is_bf16);
  Tensor t;
  t.name = std::move(name);
  t.dtype = l.dtype;
  t.shape = l.shape;
  t.data.assign(bytes.data() + l.offset, bytes.data() + l.offset + l.bytes);
  return t;
}

Tensor read_npy(const std::filesystem::path& path, bool u2_is_bf16) {
  const std::vector<std::uint8_t> bytes = detail::read_file(path);
  return parse_npy(bytes, path.stem().string(), path.string(), u2_is_bf16);
}

std::vector<std::uint8_t> detail::npy_header(const TensorInfo& t) {
  // Exactly what NumPy's _write_array_header + _wrap_header write for version 1.0.
  std::string dict = "{'descr': '" + std::string(descr_of(t.dtype)) +
                     "', 'fortran_order': False, 'shape': " + shape_repr(t.shape) + ", }";
  if (!t.shape.empty()) {
    const std::size_t digits = std::to_string(t.shape[0]).size();
    if (digits < kGrowthAxisMaxDigits) dict.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  const std::size_t hlen = dict.size() + 1;  // + '\n'
  const std::size_t padlen = kArrayAlign - (kMagic.size() + 2 + 2 + hlen) % kArrayAlign;
  const std::size_t header_len = hlen + padlen;
  if (header_len > kMaxHeaderLen) {
    throw InputError("cannot write tensor " + quote_name(t.name) + " as .npy: " + std::to_string(t.shape.size()) +
                      " dimensions make the header longer than NumPy reads");
  }
  // Filled in place: GCC 12 warns falsely (-Wstringop-overflow) on a chain of vector inserts here.
  std::vector<std::uint8_t> out(10 + header_len, std::uint8_t{' '});
  std::uint8_t* p = out.data();
  for (const char c : kMagic) *p++ = static_cast<std::uint8_t>(c);
  *p++ = 1;  // version 1.0
  *p++ = 0;
  *p++ = static_cast<std::uint8_t>(header_len & 0xFFu);
  *p++ = static_cast<std::uint8_t>(header_len >> 8);
  for (const char c : dict) *p++ = static_cast<std::uint8_t>(c);
  p += padlen;  // spaces
  *p = '\n';
  return out;
}

std::vector<std::uint8_t> serialize_npy(const Tensor& t) {
  validate(t);
  std::vector<std::uint8_t> out = detail::npy_header({t.name, t.dtype, t.shape});
  const std::size_t h = out.size();
  out.resize(h + t.data.size());
  if (!t.data.empty()) std::memcpy(out.data() + h, t.data.data(), t.data.size());
  return out;
}

// ---- .npz ------------------------------------------------------------------------------------

std::unique_ptr<zip_t, detail::ZipDiscard> detail::open_npz(std::span<const std::uint8_t> bytes, std::string_view what) {
  // libzip opens a 0-byte buffer as an empty archive; a real one has at least its 22-byte end record.
  if (bytes.size() < 22) {
    fail(what, "not a valid .npz (zip) archive: " + std::to_string(bytes.size()) +
                   " bytes, shorter than a zip end-of-central-directory record");
  }
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &ze);
  if (!src) {
    const std::string m = zip_error_text(&ze);
    zip_error_fini(&ze);
    fail(what, "cannot read the archive: " + m);
  }
  std::unique_ptr<zip_t, ZipDiscard> za(zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze));
  if (!za) {
    zip_source_free(src);
    const int code = zip_error_code_zip(&ze);
    const std::string m = zip_error_text(&ze);
    zip_error_fini(&ze);
    if (code == ZIP_ER_EXISTS) fail(what, "not a valid .npz: two members have the same name");
    fail(what, "not a valid .npz (zip) archive: " + m);
  }
  zip_error_fini(&ze);
  return za;
}

std::vector<detail::NpzMember> detail::npz_members(zip_t* za, std::string_view what, std::uint64_t archive_size,
                                                   std::uint64_t max_member_bytes) {
  const zip_int64_t count = zip_get_num_entries(za, 0);
  if (count < 0) fail(what, "cannot read the archive's entries");
  std::uint64_t total_comp = 0;
  std::set<std::string> names;
  std::vector<NpzMember> out;
  for (zip_uint64_t i = 0; i < static_cast<zip_uint64_t>(count); ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(za, i, 0, &st) != 0) {
      fail(what, "cannot read member " + std::to_string(i) + ": " + zip_error_text(zip_get_error(za)));
    }
    constexpr zip_uint64_t kNeed = ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD;
    if ((st.valid & kNeed) != kNeed || !st.name) fail(what, "member " + std::to_string(i) + " has no name or size");
    const std::string member = st.name;
    const std::string mq = "member " + quote_name(member);
    if (member.size() < 4 || member.compare(member.size() - 4, 4, ".npy") != 0) {
      fail(what, mq + " does not end in .npy");
    }
    if (!names.insert(member).second) fail(what, "two members are named " + quote_name(member));
    if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE) {
      fail(what, mq + " is encrypted");
    }
    // Declared sizes are checked against the archive before anything is allocated from them.
    if (st.comp_size > archive_size - std::min(archive_size, total_comp)) {
      fail(what, mq + " declares " + std::to_string(st.comp_size) + " compressed bytes; the members together exceed the " +
                     std::to_string(archive_size) + "-byte archive");
    }
    total_comp += st.comp_size;
    if (st.size > max_member_bytes) {
      fail(what, mq + " declares " + std::to_string(st.size) + " bytes, more than the " +
                     std::to_string(max_member_bytes) + " the largest tensor it could be compared with needs");
    }
    if (st.comp_method == ZIP_CM_STORE) {
      if (st.size != st.comp_size) {
        fail(what, mq + " is stored but declares " + std::to_string(st.size) + " bytes and " +
                       std::to_string(st.comp_size) + " compressed bytes");
      }
    } else if (st.comp_method == ZIP_CM_DEFLATE) {
      const std::optional<std::uint64_t> max = detail::checked_mul(st.comp_size, 1032);  // deflate's max ratio
      if (max && st.size > *max + 64) {
        fail(what, mq + " declares " + std::to_string(st.size) + " bytes from " + std::to_string(st.comp_size) +
                       " deflated bytes, more than deflate can produce");
      }
    } else {
      fail(what, mq + " uses unsupported compression method " + std::to_string(st.comp_method) +
                     " (supported: stored, deflate)");
    }
    out.push_back({i, member, st.size, st.comp_method == ZIP_CM_STORE});
  }
  return out;
}

std::string detail::zip_error_text(zip_error_t* e) { return ropecheck::io::zip_error_text(e); }

std::vector<Tensor> parse_npz(std::span<const std::uint8_t> bytes, std::string_view what, bool u2_is_bf16,
                              std::uint64_t max_member_bytes) {
  const std::unique_ptr<zip_t, detail::ZipDiscard> za = detail::open_npz(bytes, what);
  std::vector<Tensor> out;
  for (const detail::NpzMember& m : detail::npz_members(za.get(), what, bytes.size(), max_member_bytes)) {
    const std::string mq = "member " + quote_name(m.name);
    std::unique_ptr<zip_file_t, ZipFileClose> f(zip_fopen_index(za.get(), m.index, 0));
    if (!f) fail(what, "cannot open " + mq + ": " + zip_error_text(zip_get_error(za.get())));
    std::vector<std::uint8_t> data;
    data.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(m.size, std::uint64_t{1} << 26)));
    std::vector<std::uint8_t> buf(std::size_t{1} << 16);
    for (;;) {
      const zip_int64_t got = zip_fread(f.get(), buf.data(), buf.size());
      if (got < 0) fail(what, "cannot read " + mq + ": " + zip_error_text(zip_file_get_error(f.get())));
      if (got == 0) break;
      if (static_cast<std::uint64_t>(got) > m.size - data.size()) {
        fail(what, mq + " holds more than its declared " + std::to_string(m.size) + " bytes");
      }
      data.insert(data.end(), buf.begin(), buf.begin() + got);
    }
    if (data.size() != m.size) {
      fail(what, mq + " holds " + std::to_string(data.size()) + " bytes, not its declared " + std::to_string(m.size));
    }
    f.reset();
    const std::string member_what = std::string(what) + " " + mq;
    out.push_back(parse_npy(data, m.name.substr(0, m.name.size() - 4), member_what, u2_is_bf16));
  }
  return out;
}

std::vector<Tensor> read_npz(const std::filesystem::path& path, bool u2_is_bf16, std::uint64_t max_member_bytes) {
  const std::vector<std::uint8_t> bytes = detail::read_file(path);
  return parse_npz(bytes, path.string(), u2_is_bf16, max_member_bytes);
}

std::vector<std::uint8_t> serialize_npz(const std::vector<Tensor>& tensors) {
  std::vector<const Tensor*> order;
  order.reserve(tensors.size());
  std::set<std::string_view> names;
  for (const Tensor& t : tensors) {
    if (!names.insert(t.name).second) throw InputError("cannot write .npz: duplicate tensor name " + quote_name(t.name));
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](const Tensor* a, const Tensor* b) { return a->name < b->name; });
  std::vector<std::vector<std::uint8_t>> files;
  files.reserve(order.size());
  std::vector<detail::ZipMember> members;
  members.reserve(order.size());
  for (const Tensor* t : order) {
    files.push_back(serialize_npy(*t));
    members.push_back({t->name + ".npy", files.back()});
  }
  return detail::write_zip_stored(members);
}

// ---- ZIP writing -----------------------------------------------------------------------------

namespace detail {

namespace {
constexpr std::uint32_t kMax32 = 0xFFFFFFFFu;
constexpr std::uint16_t kMax16 = 0xFFFFu;
constexpr std::uint16_t kDosTime = 0;       // 00:00:00
constexpr std::uint16_t kDosDate = 0x0021;  // 1980-01-01, the earliest DOS date
constexpr std::uint32_t kExternalAttr = 0100644u << 16;  // regular file, rw-r--r--
constexpr std::uint16_t kMadeByUnix = 3 << 8;

std::uint16_t name_flags(const std::string& name) {
  const bool ascii = std::all_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  return ascii ? 0 : 0x0800;  // bit 11: the name is UTF-8
}
}  // namespace

bool zip_member_needs_zip64(std::uint64_t size, std::uint64_t offset, bool force_zip64) {
  return force_zip64 || size >= kMax32 || offset >= kMax32;
}

std::vector<std::uint8_t> zip_local_header(const ZipRecord& r, bool force_zip64) {
  if (r.name.size() > kMax16) throw InputError("cannot write .npz: member name longer than 65535 bytes");
  const bool zip64 = zip_member_needs_zip64(r.size, r.offset, force_zip64);
  std::vector<std::uint8_t> out;
  out.reserve(30 + r.name.size() + 20);
  put_u32(out, 0x04034b50);
  put_u16(out, zip64 ? 45 : 20);  // version needed to extract
  put_u16(out, name_flags(r.name));
  put_u16(out, 0);  // STORED
  put_u16(out, kDosTime);
  put_u16(out, kDosDate);
  put_u32(out, r.crc);
  put_u32(out, zip64 ? kMax32 : static_cast<std::uint32_t>(r.size));  // compressed size
  put_u32(out, zip64 ? kMax32 : static_cast<std::uint32_t>(r.size));  // uncompressed size
  put_u16(out, static_cast<std::uint16_t>(r.name.size()));
  put_u16(out, zip64 ? 20 : 0);  // extra field length
  out.insert(out.end(), r.name.begin(), r.name.end());
  if (zip64) {
    put_u16(out, 0x0001);
    put_u16(out, 16);
    put_u64(out, r.size);  // uncompressed
    put_u64(out, r.size);  // compressed
  }
  return out;
}

std::vector<std::uint8_t> zip_central_directory(const std::vector<ZipRecord>& records, std::uint64_t cd_offset,
                                                bool force_zip64) {
  std::vector<std::uint8_t> out;
  for (const ZipRecord& r : records) {
    const bool zip64 = zip_member_needs_zip64(r.size, r.offset, force_zip64);
    put_u32(out, 0x02014b50);
    put_u16(out, static_cast<std::uint16_t>(kMadeByUnix | (zip64 ? 45 : 20)));
    put_u16(out, zip64 ? 45 : 20);
    put_u16(out, name_flags(r.name));
    put_u16(out, 0);  // STORED
    put_u16(out, kDosTime);
    put_u16(out, kDosDate);
    put_u32(out, r.crc);
    put_u32(out, zip64 ? kMax32 : static_cast<std::uint32_t>(r.size));
    put_u32(out, zip64 ? kMax32 : static_cast<std::uint32_t>(r.size));
    put_u16(out, static_cast<std::uint16_t>(r.name.size()));
    put_u16(out, zip64 ? 28 : 0);
    put_u16(out, 0);  // comment length
    put_u16(out, 0);  // disk number start
    put_u16(out, 0);  // internal attributes
    put_u32(out, kExternalAttr);
    put_u32(out, zip64 ? kMax32 : static_cast<std::uint32_t>(r.offset));
    out.insert(out.end(), r.name.begin(), r.name.end());
    if (zip64) {
      put_u16(out, 0x0001);
      put_u16(out, 24);
      put_u64(out, r.size);  // uncompressed
      put_u64(out, r.size);  // compressed
      put_u64(out, r.offset);
    }
  }
  const std::uint64_t cd_size = out.size();
  const std::uint64_t n = records.size();
  if (force_zip64 || n >= kMax16 || cd_offset >= kMax32 || cd_size >= kMax32) {
    const std::uint64_t eocd64_offset = cd_offset + out.size();
    put_u32(out, 0x06064b50);
    put_u64(out, 44);  // size of the rest of this record
    put_u16(out, kMadeByUnix | 45);
    put_u16(out, 45);
    put_u32(out, 0);  // this disk
    put_u32(out, 0);  // disk of the central directory
    put_u64(out, n);
    put_u64(out, n);
    put_u64(out, cd_size);
    put_u64(out, cd_offset);
    put_u32(out, 0x07064b50);  // zip64 end of central directory locator
    put_u32(out, 0);
    put_u64(out, eocd64_offset);
    put_u32(out, 1);  // total disks
  }
  put_u32(out, 0x06054b50);
  put_u16(out, 0);
  put_u16(out, 0);
  put_u16(out, static_cast<std::uint16_t>(std::min<std::uint64_t>(n, kMax16)));
  put_u16(out, static_cast<std::uint16_t>(std::min<std::uint64_t>(n, kMax16)));
  put_u32(out, static_cast<std::uint32_t>(std::min<std::uint64_t>(cd_size, kMax32)));
  put_u32(out, static_cast<std::uint32_t>(std::min<std::uint64_t>(cd_offset, kMax32)));
  put_u16(out, 0);  // comment length
  return out;
}

std::vector<std::uint8_t> write_zip_stored(const std::vector<ZipMember>& members, bool force_zip64) {
  std::uint64_t total = 22;
  for (const ZipMember& m : members) total += 2 * (46 + m.name.size() + 28) + m.data.size();
  std::vector<std::uint8_t> out;
  out.reserve(static_cast<std::size_t>(total));
  std::vector<ZipRecord> records;
  records.reserve(members.size());
  for (const ZipMember& m : members) {
    uLong crc = crc32(0L, Z_NULL, 0);
    for (std::size_t done = 0; done < m.data.size();) {
      const std::size_t chunk = std::min<std::size_t>(m.data.size() - done, std::size_t{1} << 30);
      crc = crc32(crc, m.data.data() + done, static_cast<uInt>(chunk));
      done += chunk;
    }
    records.push_back({m.name, m.data.size(), out.size(), static_cast<std::uint32_t>(crc)});
    const std::vector<std::uint8_t> h = zip_local_header(records.back(), force_zip64);
    out.insert(out.end(), h.begin(), h.end());
    out.insert(out.end(), m.data.begin(), m.data.end());
  }
  const std::vector<std::uint8_t> tail = zip_central_directory(records, out.size(), force_zip64);
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

}  // namespace detail

}  // namespace ropecheck::io
