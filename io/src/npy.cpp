// .npy (NumPy's format 1.0 to 3.0, little-endian, C order): the hardened reader, fuzzed in fuzz/,
// and the writer of exactly NumPy's bytes. The .npz archive around it: npz.cpp.
#include "ropecheck/io/npy.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>

#include "ropecheck/io/detail/tensor_io.hpp"

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
    case TensorDType::u32: return "<u4";
    // .npy has no FP8 type (np.save writes ml_dtypes' arrays as '<V1'): bit patterns as uint8.
    case TensorDType::u8:
    case TensorDType::e4m3fn:
    case TensorDType::e5m2: return "|u1";
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
  if (d == "|u1") return TensorDType::u8;
  if (d == "<u4") return TensorDType::u32;
  if (d == "<u2" && u2_is_bf16) return TensorDType::bf16;
  if (d == "<u2") fail(what, "unsupported descr '<u2' (uint16; read it with u2_is_bf16 for bf16 bit patterns)");
  if (!d.empty() && d[0] == '>') fail(what, "big-endian descr " + quote_name(d) + " is not supported");
  fail(what, "unsupported descr " + quote_name(d) + " (supported: '<f8', '<f4', '<f2', '<i8', '<i4', '<u2', '|u1', '<u4')");
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

}  // namespace ropecheck::io
