#include "ropecheck/io/tensor.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <system_error>

#include "ropecheck/core/quantized.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"

namespace ropecheck::io {

namespace detail {

}  // namespace detail

std::string shape_for_message(const std::vector<std::int64_t>& shape) {
  constexpr std::size_t kMax = 16;
  if (shape.size() <= kMax) return shape_string(shape);
  std::string s = shape_string(std::vector<std::int64_t>(shape.begin(), shape.begin() + kMax));
  s.pop_back();
  return s + ", ... (" + std::to_string(shape.size()) + " dims)]";
}

namespace detail {

void fail(std::string_view what, const std::string& problem) { input_error(what, problem); }

std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<std::uint64_t> checked_byte_size(const std::vector<std::int64_t>& shape, std::size_t element_size) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<std::int64_t>(element_size), &bytes)) return std::nullopt;
  return static_cast<std::uint64_t>(bytes);
}

bool is_valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // no overlong forms
      if (c == 0xED) hi = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // no overlong forms
      if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
      return false;
    }
    if (n - i < len) return false;
    if (p[i + 1] < lo || p[i + 1] > hi) return false;
    for (std::size_t k = 2; k < len; ++k) {
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return false;
    }
    i += len;
  }
  return true;
}

std::vector<std::uint8_t> read_file(const std::filesystem::path& p) {
  const std::string what = p.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) {
    fail(what, std::filesystem::exists(p, ec) ? "not a regular file" : "no such file");
  }
  const std::uintmax_t size = std::filesystem::file_size(p, ec);
  if (ec) fail(what, "cannot read the file size: " + ec.message());
  std::ifstream in(p, std::ios::binary);
  if (!in) fail(what, "cannot open the file for reading");
  if (size > static_cast<std::uintmax_t>(std::numeric_limits<std::streamsize>::max())) {
    fail(what, "file too large");
  }
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  if (size > 0) {
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  }
  if (!in || static_cast<std::uintmax_t>(in.gcount()) != size) fail(what, "cannot read the whole file");
  in.peek();
  if (!in.eof()) fail(what, "the file grew while it was read");
  return bytes;
}

}  // namespace detail

namespace {
constexpr TensorDType kAllTensorDTypes[] = {TensorDType::f64, TensorDType::f32,    TensorDType::f16,
                                            TensorDType::bf16, TensorDType::i64,   TensorDType::i32,
                                            TensorDType::u8,  TensorDType::u32,    TensorDType::e4m3fn,
                                            TensorDType::e5m2};
}  // namespace

bool is_byte_dtype(TensorDType t) {
  return t == TensorDType::u8 || t == TensorDType::e4m3fn || t == TensorDType::e5m2;
}

std::size_t dtype_size(TensorDType t) {
  switch (t) {
    case TensorDType::f64: return 8;
    case TensorDType::f32: return 4;
    case TensorDType::f16: return 2;
    case TensorDType::bf16: return 2;
    case TensorDType::i64: return 8;
    case TensorDType::i32: return 4;
    case TensorDType::u8: return 1;
    case TensorDType::u32: return 4;
    case TensorDType::e4m3fn: return 1;
    case TensorDType::e5m2: return 1;
  }
  throw InputError("invalid TensorDType value " + std::to_string(static_cast<int>(t)));
}

std::string_view to_string(TensorDType t) {
  switch (t) {
    case TensorDType::f64: return "f64";
    case TensorDType::f32: return "f32";
    case TensorDType::f16: return "f16";
    case TensorDType::bf16: return "bf16";
    case TensorDType::i64: return "i64";
    case TensorDType::i32: return "i32";
    case TensorDType::u8: return "u8";
    case TensorDType::u32: return "u32";
    case TensorDType::e4m3fn: return "e4m3fn";
    case TensorDType::e5m2: return "e5m2";
  }
  throw InputError("invalid TensorDType value " + std::to_string(static_cast<int>(t)));
}

TensorDType tensor_dtype(DType t) {
  switch (t) {
    case DType::f64: return TensorDType::f64;
    case DType::f32: return TensorDType::f32;
    case DType::f16: return TensorDType::f16;
    case DType::bf16: return TensorDType::bf16;
  }
  return TensorDType::f64;
}

std::optional<TensorDType> parse_tensor_dtype(std::string_view s) {
  for (TensorDType t : kAllTensorDTypes) {
    if (to_string(t) == s) return t;
  }
  return std::nullopt;
}

std::string_view safetensors_name(TensorDType t) {
  switch (t) {
    case TensorDType::f64: return "F64";
    case TensorDType::f32: return "F32";
    case TensorDType::f16: return "F16";
    case TensorDType::bf16: return "BF16";
    case TensorDType::i64: return "I64";
    case TensorDType::i32: return "I32";
    case TensorDType::u8: return "U8";
    case TensorDType::u32: return "U32";
    case TensorDType::e4m3fn: return "F8_E4M3";
    case TensorDType::e5m2: return "F8_E5M2";
  }
  throw InputError("invalid TensorDType value " + std::to_string(static_cast<int>(t)));
}

std::optional<TensorDType> parse_safetensors_dtype(std::string_view s) {
  for (TensorDType t : kAllTensorDTypes) {
    if (safetensors_name(t) == s) return t;
  }
  return std::nullopt;
}

namespace {

// Product of the shape; nullopt on a negative dimension or when the product leaves int64.
std::optional<std::int64_t> checked_numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

[[noreturn]] void tensor_fail(const Tensor& t, const std::string& problem) {
  throw InputError("tensor " + quote_name(t.name) + ": " + problem);
}

double half_to_double(std::uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exp = (h >> 10) & 0x1F;
  const int mant = h & 0x3FF;
  double v = 0;
  if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), -24);
  } else if (exp == 31) {
    v = mant == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    v = std::ldexp(static_cast<double>(mant | 0x400), exp - 25);
  }
  return sign ? -v : v;
}

// Checks i against the tensor and returns the byte offset of element i.
std::size_t element_offset(const Tensor& t, std::int64_t i) {
  validate(t);
  const std::int64_t n = *checked_numel(t.shape);
  if (i < 0 || i >= n) {
    tensor_fail(t, "element index " + std::to_string(i) + " out of range for shape " + shape_for_message(t.shape));
  }
  return static_cast<std::size_t>(i) * dtype_size(t.dtype);
}

template <class T>
Tensor make_le(std::string name, TensorDType dt, std::vector<std::int64_t> shape, const std::vector<T>& v) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dt;
  t.shape = std::move(shape);
  const std::optional<std::int64_t> n = checked_numel(t.shape);
  if (!n) tensor_fail(t, "invalid shape " + shape_for_message(t.shape) + " (negative dimension or overflow)");
  if (static_cast<std::uint64_t>(*n) != v.size()) {
    tensor_fail(t, "shape " + shape_for_message(t.shape) + " has " + std::to_string(*n) + " elements but " +
                       std::to_string(v.size()) + " values were given");
  }
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);
  t.data.resize(v.size() * sizeof(T));
  if constexpr (std::endian::native == std::endian::little || sizeof(T) == 1) {
    if (!v.empty()) std::memcpy(t.data.data(), v.data(), t.data.size());
  } else {
    using U = std::conditional_t<sizeof(T) <= 2, std::uint16_t,
                                 std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const U u = std::bit_cast<U>(v[i]);
      for (std::size_t b = 0; b < sizeof(T); ++b) {
        t.data[i * sizeof(T) + b] = static_cast<std::uint8_t>((u >> (8 * b)) & 0xFFu);
      }
    }
  }
  return t;
}

}  // namespace

void validate(const Tensor& t) {
  for (std::int64_t d : t.shape) {
    if (d < 0) tensor_fail(t, "negative dimension in shape " + shape_for_message(t.shape));
  }
  const std::optional<std::uint64_t> bytes = detail::checked_byte_size(t.shape, dtype_size(t.dtype));
  if (!bytes) tensor_fail(t, "shape " + shape_for_message(t.shape) + " overflows 64-bit sizes");
  if (*bytes != t.data.size()) {
    tensor_fail(t, "has " + std::to_string(t.data.size()) + " data bytes but " + std::string(to_string(t.dtype)) +
                       " shape " + shape_for_message(t.shape) + " needs " + std::to_string(*bytes));
  }
}

std::uint64_t detail::TensorInfo::data_bytes() const {
  const std::optional<std::uint64_t> b = detail::checked_byte_size(shape, dtype_size(dtype));
  if (!b) throw InputError("tensor " + quote_name(name) + ": shape " + shape_for_message(shape) +
                            " overflows 64-bit sizes");
  return *b;
}

std::int64_t Tensor::numel() const {
  const std::optional<std::int64_t> n = checked_numel(shape);
  if (!n) tensor_fail(*this, "invalid shape " + shape_for_message(shape) + " (negative dimension or overflow)");
  return *n;
}

double Tensor::value(std::int64_t i) const {
  const std::uint8_t* p = data.data() + element_offset(*this, i);
  switch (dtype) {
    case TensorDType::f64: return std::bit_cast<double>(detail::load_u64(p));
    case TensorDType::f32: return static_cast<double>(std::bit_cast<float>(detail::load_u32(p)));
    case TensorDType::f16: return half_to_double(detail::load_u16(p));
    case TensorDType::bf16:
      return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(detail::load_u16(p)) << 16));
    case TensorDType::i64: return static_cast<double>(static_cast<std::int64_t>(detail::load_u64(p)));
    case TensorDType::i32: return static_cast<double>(static_cast<std::int32_t>(detail::load_u32(p)));
    case TensorDType::u8: return static_cast<double>(*p);
    case TensorDType::u32: return static_cast<double>(detail::load_u32(p));
    case TensorDType::e4m3fn: return quant::fp8_decode(*p, quant::Fp8::e4m3fn);
    case TensorDType::e5m2: return quant::fp8_decode(*p, quant::Fp8::e5m2);
  }
  tensor_fail(*this, "invalid dtype");
}

std::int64_t Tensor::int_value(std::int64_t i) const {
  if (dtype != TensorDType::i64 && dtype != TensorDType::i32 && dtype != TensorDType::u8 &&
      dtype != TensorDType::u32) {
    tensor_fail(*this, "int_value needs an i64, i32, u8 or u32 tensor, not " + std::string(to_string(dtype)));
  }
  const std::uint8_t* p = data.data() + element_offset(*this, i);
  if (dtype == TensorDType::i64) return static_cast<std::int64_t>(detail::load_u64(p));
  if (dtype == TensorDType::u8) return *p;
  if (dtype == TensorDType::u32) return detail::load_u32(p);
  return static_cast<std::int32_t>(detail::load_u32(p));
}

Tensor make_f64(std::string name, std::vector<std::int64_t> shape, const std::vector<double>& v) {
  return make_le(std::move(name), TensorDType::f64, std::move(shape), v);
}
Tensor make_f32(std::string name, std::vector<std::int64_t> shape, const std::vector<float>& v) {
  return make_le(std::move(name), TensorDType::f32, std::move(shape), v);
}
Tensor make_bits16(std::string name, TensorDType f16_or_bf16, std::vector<std::int64_t> shape,
                   const std::vector<std::uint16_t>& bits) {
  if (f16_or_bf16 != TensorDType::f16 && f16_or_bf16 != TensorDType::bf16) {
    throw InputError("tensor " + quote_name(name) + ": make_bits16 needs f16 or bf16, not " +
                      std::string(to_string(f16_or_bf16)));
  }
  return make_le(std::move(name), f16_or_bf16, std::move(shape), bits);
}
Tensor make_i64(std::string name, std::vector<std::int64_t> shape, const std::vector<std::int64_t>& v) {
  return make_le(std::move(name), TensorDType::i64, std::move(shape), v);
}
Tensor make_i32(std::string name, std::vector<std::int64_t> shape, const std::vector<std::int32_t>& v) {
  return make_le(std::move(name), TensorDType::i32, std::move(shape), v);
}
Tensor make_bytes(std::string name, TensorDType u8_or_fp8, std::vector<std::int64_t> shape,
                  const std::vector<std::uint8_t>& bytes) {
  if (!is_byte_dtype(u8_or_fp8)) {
    throw InputError("tensor " + quote_name(name) + ": make_bytes needs u8, e4m3fn or e5m2, not " +
                     std::string(to_string(u8_or_fp8)));
  }
  return make_le(std::move(name), u8_or_fp8, std::move(shape), bytes);
}
Tensor make_u32(std::string name, std::vector<std::int64_t> shape, const std::vector<std::uint32_t>& v) {
  return make_le(std::move(name), TensorDType::u32, std::move(shape), v);
}

Tensor make_zeros(std::string name, TensorDType dt, std::vector<std::int64_t> shape) {
  Tensor t{std::move(name), dt, std::move(shape), {}};
  const std::optional<std::uint64_t> bytes = detail::checked_byte_size(t.shape, dtype_size(dt));
  if (!bytes) tensor_fail(t, "invalid shape " + shape_for_message(t.shape) + " (negative dimension or overflow)");
  t.data.assign(static_cast<std::size_t>(*bytes), 0);
  return t;
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  s += "]";
  return s;
}

}  // namespace ropecheck::io
