// Tensor file I/O (io/): safetensors, .npy and .npz, whole or written piece by piece (TensorFileWriter).
//
// Expected bytes are written out here by hand or copied from the reference implementations'
// own tests (the safetensors crate's tensor.rs test vectors; np.save's header for a (2, 3)
// float32 array), never produced by the code under test. Every rejection rule of the readers has
// a hand-made byte vector and checks that the one-line InputError names the file and the problem.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "ropecheck/io/detail/tensor_io.hpp"  // white-box: the ZIP writer with forced zip64
#include "ropecheck/io/npy.hpp"
#include "ropecheck/io/safetensors.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/io/tensor_file_writer.hpp"
#include "ropecheck/io/sha256.hpp"

namespace ropecheck::golden {
using namespace ropecheck::io;

// Readable failures (found by ADL).
void PrintTo(const Tensor& t, std::ostream* os) {
  *os << "Tensor{" << t.name << ", " << to_string(t.dtype) << ", " << shape_string(t.shape) << ", " << t.data.size()
      << " bytes}";
}

namespace {

using Bytes = std::vector<std::uint8_t>;
using namespace std::string_view_literals;

Bytes bytes_of(std::string_view s) { return Bytes(s.begin(), s.end()); }

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Bytes le64(std::uint64_t v) {
  Bytes b;
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  return b;
}

// A safetensors file: 8-byte length (of `header` unless `n` is given), header, data.
Bytes st_file(std::string_view header, const Bytes& data = {}, std::optional<std::uint64_t> n = std::nullopt) {
  return cat({le64(n ? *n : header.size()), bytes_of(header), data});
}

// Expects `f` to throw InputError with a one-line message that contains `what` and `needle`.
template <class F>
void expect_reject(F&& f, std::string_view what, std::string_view needle) {
  try {
    f();
    ADD_FAILURE() << "no InputError; expected one containing \"" << needle << "\"";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(what), std::string::npos) << m;
    EXPECT_NE(m.find(needle), std::string::npos) << "message: " << m << "\nexpected to contain: " << needle;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

void reject_st(const Bytes& file, std::string_view needle) {
  expect_reject([&] { parse_safetensors(file, "bad.safetensors"); }, "bad.safetensors: ", needle);
}

// One tensor of every dtype, including a scalar and empty shapes.
std::vector<Tensor> all_dtypes() {
  std::vector<Tensor> ts;
  ts.push_back(make_f64("f64", {2, 2}, {1.0, -0.0, std::numeric_limits<double>::infinity(), 0x1p-1074}));
  ts.push_back(make_f32("f32", {2, 3}, {0, 1, 2, 3, 4.5f, -1e30f}));
  ts.push_back(make_bits16("f16", TensorDType::f16, {3}, {0x3C00, 0x0001, 0xFC00}));
  ts.push_back(make_bits16("bf16", TensorDType::bf16, {2, 1}, {0x3F80, 0x4049}));
  ts.push_back(make_i64("i64", {2}, {std::numeric_limits<std::int64_t>::min(), 7}));
  ts.push_back(make_i32("i32", {2, 2}, {1, -2, 3, std::numeric_limits<std::int32_t>::max()}));
  ts.push_back(make_bytes("u8", TensorDType::u8, {3}, {0, 0x7F, 0xFF}));
  ts.push_back(make_u32("u32", {2}, {0x12345678u, 0xFFFFFFFFu}));
  ts.push_back(make_f64("scalar", {}, {2.5}));
  ts.push_back(make_f32("empty", {0, 3}, {}));
  ts.push_back(make_i64("empty_last", {4, 0}, {}));
  return ts;
}

std::map<std::string, Tensor> by_name(const std::vector<Tensor>& ts) {
  std::map<std::string, Tensor> m;
  for (const Tensor& t : ts) m.emplace(t.name, t);
  return m;
}

// ---- Tensor ----------------------------------------------------------------------------------

TEST(Tensor, DtypeNamesAndSizes) {
  EXPECT_EQ(dtype_size(TensorDType::f64), 8u);
  EXPECT_EQ(dtype_size(TensorDType::bf16), 2u);
  EXPECT_EQ(dtype_size(TensorDType::i32), 4u);
  for (TensorDType t : {TensorDType::f64, TensorDType::f32, TensorDType::f16, TensorDType::bf16, TensorDType::i64,
                        TensorDType::i32, TensorDType::u8, TensorDType::u32, TensorDType::e4m3fn, TensorDType::e5m2}) {
    EXPECT_EQ(parse_tensor_dtype(to_string(t)), t);
    EXPECT_EQ(parse_safetensors_dtype(safetensors_name(t)), t);
  }
  EXPECT_EQ(safetensors_name(TensorDType::bf16), "BF16");
  EXPECT_EQ(to_string(TensorDType::bf16), "bf16");
  EXPECT_FALSE(parse_tensor_dtype("F32"));
  EXPECT_FALSE(parse_safetensors_dtype("I8"));
  EXPECT_EQ(parse_safetensors_dtype("F8_E4M3"), TensorDType::e4m3fn);
  EXPECT_EQ(shape_string({131072, 64}), "[131072, 64]");
  EXPECT_EQ(shape_string({}), "[]");
  for (DType d : {DType::f64, DType::f32, DType::f16, DType::bf16}) {  // same name, storage size of the format
    EXPECT_EQ(to_string(tensor_dtype(d)), to_string(d));
    EXPECT_EQ(dtype_size(tensor_dtype(d)) * 8, static_cast<std::size_t>(format_info(d).storage_bits));
  }
}

TEST(Tensor, ValuesOfEveryDtype) {
  const auto m = by_name(all_dtypes());
  EXPECT_EQ(m.at("f64").value(2), std::numeric_limits<double>::infinity());
  EXPECT_EQ(m.at("f64").value(3), 0x1p-1074);
  EXPECT_TRUE(std::signbit(m.at("f64").value(1)));
  EXPECT_EQ(m.at("f32").value(5), static_cast<double>(-1e30f));
  EXPECT_EQ(m.at("f16").value(0), 1.0);
  EXPECT_EQ(m.at("f16").value(1), 0x1p-24);  // smallest f16 subnormal
  EXPECT_EQ(m.at("f16").value(2), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(m.at("bf16").value(0), 1.0);
  EXPECT_EQ(m.at("bf16").value(1), 3.140625);
  EXPECT_EQ(m.at("i64").int_value(0), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(m.at("i32").int_value(3), std::numeric_limits<std::int32_t>::max());
  EXPECT_EQ(m.at("i32").value(1), -2.0);
  EXPECT_EQ(m.at("scalar").numel(), 1);
  EXPECT_EQ(m.at("scalar").value(0), 2.5);
  EXPECT_EQ(m.at("empty").numel(), 0);
  // Little-endian bytes.
  EXPECT_EQ(m.at("bf16").data, (Bytes{0x80, 0x3F, 0x49, 0x40}));
}

TEST(Tensor, MisuseIsRejected) {
  const auto m = by_name(all_dtypes());
  expect_reject([&] { (void)m.at("f32").value(6); }, "'f32'", "out of range");
  expect_reject([&] { (void)m.at("f32").value(-1); }, "'f32'", "out of range");
  expect_reject([&] { (void)m.at("f32").int_value(0); }, "'f32'", "i64, i32, u8 or u32");
  expect_reject([] { make_f32("x", {2, 2}, {1, 2, 3}); }, "'x'", "4 elements but 3 values");
  expect_reject([] { make_f32("x", {-1}, {}); }, "'x'", "negative dimension");
  expect_reject([] { make_bits16("x", TensorDType::f32, {1}, {1}); }, "'x'", "f16 or bf16");
  Tensor t = make_f32("bad", {2}, {1, 2});
  t.data.pop_back();
  expect_reject([&] { validate(t); }, "'bad'", "7 data bytes");
  expect_reject([&] { (void)t.value(0); }, "'bad'", "needs 8");
  t.shape = {std::int64_t{1} << 62, 4};
  expect_reject([&] { validate(t); }, "'bad'", "overflows");
  t.shape = {std::int64_t{1} << 62, 4, 0};  // the product is 0, but a prefix leaves int64
  t.data.clear();
  expect_reject([&] { validate(t); }, "'bad'", "overflows");
}

// A zeroed buffer to fill in place (golden's outputs, the checker's kernel outputs), its shape checked.
TEST(Tensor, MakeZerosIsZeroedAndRefusesBadShapes) {
  const Tensor t = make_zeros("pe.bf16", TensorDType::bf16, {3, 5});
  EXPECT_EQ(t.name, "pe.bf16");
  EXPECT_EQ(t.shape, (std::vector<std::int64_t>{3, 5}));
  EXPECT_EQ(t.data, Bytes(30, 0));
  EXPECT_NO_THROW(validate(t));
  EXPECT_EQ(make_zeros("s", TensorDType::i64, {}).data, Bytes(8, 0));  // a scalar
  expect_reject([] { make_zeros("x", TensorDType::f64, {-1}); }, "'x'", "invalid shape");
  expect_reject([] { make_zeros("x", TensorDType::f64, {std::int64_t{1} << 62, 4}); }, "'x'", "overflow");
}

// ---- safetensors: writing --------------------------------------------------------------------

TEST(Safetensors, ByteExactSmallFile) {
  // I64 sorts before F32 (descending alignment); __metadata__ first; 133-byte JSON + 3 spaces.
  const std::vector<Tensor> ts = {make_f32("a", {2}, {1.0f, 2.0f}), make_i64("b", {1}, {7})};
  const Bytes expected = cat({
      {0x88, 0, 0, 0, 0, 0, 0, 0},
      bytes_of(R"({"__metadata__":{"k":"v"},"b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
               R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}   )"),
      {0x07, 0, 0, 0, 0, 0, 0, 0},
      {0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0x40},
  });
  EXPECT_EQ(serialize_safetensors(ts, {{"k", "v"}}), expected);
}

TEST(Safetensors, ByteExactCrateVectors) {
  // safetensors/src/tensor.rs: test_serialization, test_serialization_forced_alignement, test_empty.
  const std::vector<float> six = {0, 1, 2, 3, 4, 5};
  const Bytes six_bytes = {0, 0, 0, 0, 0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64};
  EXPECT_EQ(serialize_safetensors({make_f32("attn.0", {1, 2, 3}, six)}, {}),
            cat({{64, 0, 0, 0, 0, 0, 0, 0},
                 bytes_of(R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})"), six_bytes}));
  EXPECT_EQ(serialize_safetensors({make_f32("attn0", {1, 1, 2, 3}, six)}, {}),
            cat({{72, 0, 0, 0, 0, 0, 0, 0},
                 bytes_of(R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       )"),
                 six_bytes}));
  EXPECT_EQ(serialize_safetensors({}, {}), (Bytes{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '}));
  EXPECT_EQ(serialize_safetensors({}, {{"framework", "pt"}}),
            cat({{40, 0, 0, 0, 0, 0, 0, 0}, bytes_of(R"({"__metadata__":{"framework":"pt"}}     )")}));
}

TEST(Safetensors, ReadsTheCrateTestVector) {
  const Bytes data = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF};
  const Bytes file = cat({{0x3C, 0, 0, 0, 0, 0, 0, 0},
                          bytes_of(R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})"), data});
  std::map<std::string, std::string> md = {{"stale", "x"}};
  const std::vector<Tensor> ts = parse_safetensors(file, "vector", &md);
  ASSERT_EQ(ts.size(), 1u);
  EXPECT_TRUE(md.empty());
  EXPECT_EQ(ts[0].name, "test");
  EXPECT_EQ(ts[0].dtype, TensorDType::i32);
  EXPECT_EQ(ts[0].shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(ts[0].data, data);
  EXPECT_EQ(ts[0].int_value(3), -1);
}

TEST(Safetensors, RoundTripEveryDtypeScalarAndEmpty) {
  const std::vector<Tensor> ts = all_dtypes();
  const std::map<std::string, std::string> md = {{"format", "pt"}, {"generator", "ropecheck \"golden\"\n"}};
  const Bytes file = serialize_safetensors(ts, md);
  std::map<std::string, std::string> md_back;
  const std::vector<Tensor> back = parse_safetensors(file, "rt", &md_back);
  EXPECT_EQ(md_back, md);
  EXPECT_EQ(by_name(back), by_name(ts));
}

TEST(Safetensors, LayoutIsAlignedAndDeterministic) {
  std::vector<Tensor> ts = all_dtypes();
  const Bytes a = serialize_safetensors(ts, {{"b", "2"}, {"a", "1"}});
  EXPECT_EQ(serialize_safetensors(ts, {{"a", "1"}, {"b", "2"}}), a);
  std::reverse(ts.begin(), ts.end());
  EXPECT_EQ(serialize_safetensors(ts, {{"a", "1"}, {"b", "2"}}), a);  // input order does not matter

  const std::uint64_t n = detail::load_u64(a.data());
  EXPECT_EQ(n % 8, 0u);
  const std::string header(a.begin() + 8, a.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  EXPECT_EQ(header.substr(header.find_last_not_of(' ')), "}");  // padded with spaces only
  // Tensors come back in file order: the crate's Dtype order reversed (I64, F64, F32, U32, I32, BF16, F16,
  // U8), then name.
  const std::vector<Tensor> back = parse_safetensors(a, "layout");
  std::vector<std::string> names;
  for (const Tensor& t : back) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"empty_last", "i64", "f64", "scalar", "empty", "f32", "u32", "i32", "bf16",
                                             "f16", "u8"}));
  // Every tensor's data starts at a multiple of its element size (from the file start).
  std::size_t offset = 0;
  for (const Tensor& t : back) {
    EXPECT_EQ((8 + n + offset) % dtype_size(t.dtype), 0u) << t.name;
    offset += t.data.size();
  }
}

TEST(Safetensors, WriterRejectsBadTensors) {
  const Tensor t = make_f32("x", {1}, {1});
  expect_reject([&] { serialize_safetensors({t, t}, {}); }, "cannot write safetensors", "duplicate tensor name 'x'");
  expect_reject([&] { serialize_safetensors({make_f32("__metadata__", {1}, {1})}, {}); }, "cannot write safetensors",
                "__metadata__");
  expect_reject([&] { serialize_safetensors({make_f32("a\xff", {1}, {1})}, {}); }, "cannot write safetensors",
                "not valid UTF-8");
  expect_reject([&] { serialize_safetensors({t}, {{"k", "\xc0\x80"}}); }, "cannot write safetensors",
                "not valid UTF-8");
  Tensor bad = t;
  bad.data.push_back(0);
  expect_reject([&] { serialize_safetensors({bad}, {}); }, "'x'", "5 data bytes");
}

TEST(Safetensors, AcceptsWhitespaceAndIgnoresUnknownEntryKeys) {
  // The crate accepts JSON whitespace around the object (writers may pad to a page boundary).
  const Bytes f = st_file(" \n{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}\t  ",
                          {0, 0, 128, 63});
  const std::vector<Tensor> ts = parse_safetensors(f, "ws");
  ASSERT_EQ(ts.size(), 1u);
  EXPECT_EQ(ts[0].value(0), 1.0);
  // Two empty tensors may share offsets [0, 0].
  const Bytes e = st_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                          R"("b":{"dtype":"I64","shape":[2,0],"data_offsets":[0,0]}})");
  EXPECT_EQ(parse_safetensors(e, "empty").size(), 2u);
}

// ---- safetensors: every rejection rule --------------------------------------------------------

TEST(SafetensorsReject, FileShorterThan8Bytes) {
  reject_st({}, "0 bytes, too short");
  reject_st({1, 0, 0, 0, 0, 0, 0}, "7 bytes, too short");
}

TEST(SafetensorsReject, HeaderTooLarge) {
  reject_st(st_file("{}", {}, 100'000'001), "header length 100000001 exceeds the limit of 100000000");
  reject_st(st_file("{}", {}, ~std::uint64_t{0}), "exceeds the limit");
}

TEST(SafetensorsReject, HeaderPastEndOfFile) {
  reject_st(st_file("{}", {}, 3), "header length 3 runs past the end of the file (10 bytes)");
  reject_st(st_file("", {}, 100'000'000), "runs past the end");
}

TEST(SafetensorsReject, HeaderNotUtf8) {
  reject_st(st_file("{\"a\xff\":{}}"), "not valid UTF-8");
  reject_st(st_file("{\"\xed\xa0\x80\":{}}"), "not valid UTF-8");  // a surrogate
  reject_st(st_file("{\"\xc1\xbf\":{}}"), "not valid UTF-8");      // overlong
  reject_st(st_file("\xef\xbb\xbf{}"), "byte-order mark");
}

TEST(SafetensorsReject, InvalidJson) {
  reject_st(st_file(R"({"a":)"), "header is not valid JSON");
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},})"), "not valid JSON");
  reject_st(st_file("{} x"), "not valid JSON");
  reject_st(st_file(""), "not valid JSON");
  reject_st(st_file("[]"), "header is not a JSON object");
  reject_st(st_file("7"), "header is not a JSON object");
  reject_st(st_file(std::string(20, '[') + std::string(20, ']')), "nests deeper than 8 levels");
}

TEST(SafetensorsReject, WrongTypes) {
  reject_st(st_file(R"({"a":5})"), "tensor 'a': header entry is not an object");
  reject_st(st_file(R"({"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})"), "\"dtype\" is not a string");
  reject_st(st_file(R"({"a":{"shape":[1],"data_offsets":[0,4]}})"), "no \"dtype\"");
  reject_st(st_file(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})"), "no \"shape\"");
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[1]}})"), "no \"data_offsets\"");
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})"), "\"shape\" is not an array");
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})"),
            "\"shape\" is not an array of non-negative integers");
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})"), "\"data_offsets\" is not [BEGIN, END]");
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})"), "\"data_offsets\" is not");
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,-4]}})"), "\"data_offsets\" is not");
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":{"b":0}}})"), "\"data_offsets\" is not");
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551616]}})"),
            "\"data_offsets\" is not");
}

TEST(SafetensorsReject, UnknownAndUnsupportedDtypes) {
  reject_st(st_file(R"({"a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})", Bytes(16)), "unknown dtype 'F128'");
  reject_st(st_file(R"({"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", Bytes(4)), "unknown dtype 'f32'");
  // A valid safetensors file, but I8 is not a TensorDType.
  reject_st(st_file(R"({"a":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}})", {1, 2}),
            "tensor 'a': unsupported dtype I8 (supported: F64, F32, F16, BF16, I64, I32, U8, U32, F8_E4M3, F8_E5M2)");
  reject_st(st_file(R"({"a":{"dtype":"F8_E4M3FNUZ","shape":[1],"data_offsets":[0,1]}})", {1}),
            "unsupported dtype F8_E4M3FNUZ");
}

TEST(SafetensorsReject, MetadataNotStringToString) {
  reject_st(st_file(R"({"__metadata__":{"k":1}})"), "__metadata__ value for key 'k' is not a string");
  reject_st(st_file(R"({"__metadata__":{"k":{"x":"y"}}})"), "__metadata__ value for key 'k' is not a string");
  reject_st(st_file(R"({"__metadata__":["k"]})"), "__metadata__ is not an object of strings");
  reject_st(st_file(R"({"__metadata__":"k"})"), "__metadata__ is not an object of strings");
  reject_st(st_file(R"({"__metadata__":{},"__metadata__":{}})"), "duplicate __metadata__");
}

TEST(SafetensorsReject, OffsetsNotContiguousFromZero) {
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", Bytes(8)),
            "tensor 'a': data_offsets [4, 8]: the first tensor does not begin at 0");
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                    Bytes(12)),
            "tensor 'b': data_offsets [8, 12] leaves a gap after tensor 'a' (which ends at 4)");
}

TEST(SafetensorsReject, EndBeforeBegin) {
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", Bytes(8)),
            "data_offsets [8, 4] end before begin");
}

TEST(SafetensorsReject, Overlapping) {
  reject_st(st_file(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F64","shape":[1],"data_offsets":[4,12]}})",
                    Bytes(12)),
            "tensor 'b': data_offsets [4, 12] overlaps tensor 'a' (which ends at 8)");
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                    Bytes(4)),
            "overlaps tensor 'a'");
}

TEST(SafetensorsReject, OutOfBounds) {
  reject_st(st_file(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", Bytes(4)),
            "tensors need 8 data bytes but the file has only 4 after the header (truncated or out of bounds)");
  reject_st(st_file(R"({"a":{"dtype":"F64","shape":[536870912],"data_offsets":[0,4294967296]}})", Bytes(8)),
            "truncated or out of bounds");
}

TEST(SafetensorsReject, SizeDoesNotMatchShapeAndDtype) {
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", Bytes(8)),
            "tensor 'a': data_offsets [0, 8] hold 8 bytes but F32 [3] needs 12");
  reject_st(st_file(R"({"a":{"dtype":"BF16","shape":[],"data_offsets":[0,4]}})", Bytes(4)), "BF16 [] needs 2");
}

TEST(SafetensorsReject, ShapeOverflow) {
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})"),
            "tensor 'a': shape [4294967296, 4294967296] overflows 64-bit sizes");
  reject_st(st_file(R"({"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}})"),
            "overflows 64-bit sizes");  // 2^61 elements * 8 bytes
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[9223372036854775808,0],"data_offsets":[0,0]}})"),
            "dimension 9223372036854775808 overflows");
  // Found by fuzz_npy: a prefix of the shape overflows int64 before a 0 makes the product 0. Tensor
  // sizes are int64 (numel()), so this is an overflow for every reader and for validate().
  reject_st(st_file(R"({"a":{"dtype":"I64","shape":[42949,429429496649642,0],"data_offsets":[0,0]}})"),
            "shape [42949, 429429496649642, 0] overflows 64-bit sizes");
}

TEST(SafetensorsReject, TrailingBytes) {
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", Bytes(5)),
            "1 trailing bytes after the last tensor");
  reject_st(st_file("{}", Bytes(3)), "3 trailing bytes");
}

TEST(SafetensorsReject, DuplicateNamesAndKeys) {
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                    Bytes(8)),
            "duplicate tensor name 'a' in header");
  reject_st(st_file(R"({"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})", Bytes(4)),
            "duplicate key 'dtype' in header");
  reject_st(st_file(R"({"__metadata__":{"k":"1","k":"2"}})"), "duplicate key 'k'");
}

TEST(SafetensorsReject, NegativeDimensions) {
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})"),
            "tensor 'a': negative dimension -1 in \"shape\"");
  reject_st(st_file(R"({"a":{"dtype":"F32","shape":[2,-3],"data_offsets":[0,0]}})"), "negative dimension -3");
}

TEST(SafetensorsReject, MessagesEscapeHostileNames) {
  // A name with a newline must not break the one-line message.
  reject_st(st_file("{\"x\\ny\":{\"dtype\":\"I8\",\"shape\":[0],\"data_offsets\":[0,0]}}"),
            "tensor 'x\\x0ay': unsupported dtype I8");
}

TEST(Safetensors, FileReadAndErrors) {
  const auto dir = std::filesystem::temp_directory_path() / ("ropecheck_tensor_io_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto p = dir / "x.safetensors";
  const Bytes file = serialize_safetensors(all_dtypes(), {{"a", "b"}});
  {
    std::ofstream out(p, std::ios::binary);
    out.write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  }
  std::map<std::string, std::string> md;
  EXPECT_EQ(by_name(read_safetensors(p, &md)), by_name(all_dtypes()));
  EXPECT_EQ(md.at("a"), "b");
  expect_reject([&] { read_safetensors(dir / "missing.safetensors"); }, "missing.safetensors", "no such file");
  expect_reject([&] { read_safetensors(dir); }, dir.string(), "not a regular file");
  {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << "1234";
  }
  expect_reject([&] { read_safetensors(p); }, "x.safetensors: ", "too short");
  std::filesystem::remove_all(dir);
}

// ---- .npy ------------------------------------------------------------------------------------

Bytes npy_v1(std::string_view header, const Bytes& data = {}) {
  Bytes b = bytes_of("\x93NUMPY\x01\x00"sv);
  b.push_back(static_cast<std::uint8_t>(header.size() & 0xFF));
  b.push_back(static_cast<std::uint8_t>(header.size() >> 8));
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

void reject_npy(const Bytes& file, std::string_view needle, bool u2_is_bf16 = true) {
  expect_reject([&] { parse_npy(file, "t", "bad.npy", u2_is_bf16); }, "bad.npy: ", needle);
}

TEST(Npy, ByteExactHeaderAsNumpyWritesIt) {
  // np.save(np.zeros((2, 3), np.float32)): 128-byte preamble, header length 118 ('v').
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const Bytes expected = cat({bytes_of(std::string_view("\x93NUMPY\x01\x00\x76\x00", 10)), bytes_of(dict),
                              Bytes(58, ' '), {'\n'}, Bytes(24, 0)});
  EXPECT_EQ(serialize_npy(make_f32("z", {2, 3}, std::vector<float>(6, 0.0f))), expected);
  // 1-d shapes are written (n,), scalars ().
  const Bytes one = serialize_npy(make_i64("v", {5}, {1, 2, 3, 4, 5}));
  EXPECT_NE(std::string(one.begin(), one.end()).find("'shape': (5,), }"), std::string::npos);
  const Bytes scalar = serialize_npy(make_f64("s", {}, {1.5}));
  EXPECT_NE(std::string(scalar.begin(), scalar.end()).find("{'descr': '<f8', 'fortran_order': False, 'shape': (), }"),
            std::string::npos);
  const Bytes bf = serialize_npy(make_bits16("b", TensorDType::bf16, {1}, {0x3F80}));
  EXPECT_NE(std::string(bf.begin(), bf.end()).find("'descr': '<u2'"), std::string::npos);
}

TEST(Npy, DataStartsAtAMultipleOf64) {
  const std::vector<std::vector<std::int64_t>> shapes = {
      {}, {0}, {1}, {7}, {2, 3}, {0, 3}, {1, 1, 1, 1, 1, 1, 1, 1}, {123456789012, 0}, std::vector<std::int64_t>(40, 1)};
  for (const auto& shape : shapes) {
    for (TensorDType dt : {TensorDType::f64, TensorDType::f16, TensorDType::i32}) {
      Tensor t;
      t.name = "t";
      t.dtype = dt;
      t.shape = shape;
      t.data.assign(static_cast<std::size_t>(t.numel()) * dtype_size(dt), 0x5A);
      const Bytes b = serialize_npy(t);
      const std::size_t hlen = detail::load_u16(b.data() + 8);
      EXPECT_EQ((10 + hlen) % 64, 0u) << shape_string(shape);
      EXPECT_EQ(b[10 + hlen - 1], '\n');
      EXPECT_EQ(b.size(), 10 + hlen + t.data.size());
      EXPECT_EQ(parse_npy(b, "t", "x.npy"), t);
    }
  }
}

TEST(Npy, RoundTripEveryDtype) {
  for (Tensor t : all_dtypes()) {
    const Tensor back = parse_npy(serialize_npy(t), t.name, "rt.npy");
    EXPECT_EQ(back, t) << t.name;
  }
  // '<u2' is bf16 bit patterns only when asked.
  const Bytes bf = serialize_npy(make_bits16("b", TensorDType::bf16, {1}, {0x3F80}));
  reject_npy(bf, "unsupported descr '<u2'", /*u2_is_bf16=*/false);
}

TEST(Npy, AcceptsOtherValidHeaderSpellings) {
  // Minimal, unaligned, other key order, double quotes, trailing comma in the shape.
  const Tensor a = parse_npy(npy_v1("{\"shape\":(2,1,),'descr':'<i4','fortran_order':False}", Bytes(8, 1)), "a", "x");
  EXPECT_EQ(a.dtype, TensorDType::i32);
  EXPECT_EQ(a.shape, (std::vector<std::int64_t>{2, 1}));
  // Version 2.0 and 3.0 use a 4-byte header length.
  for (const std::uint8_t major : {std::uint8_t{2}, std::uint8_t{3}}) {
    const std::string h = "{'descr': '<f2', 'fortran_order': False, 'shape': (1,), }\n";
    Bytes b = bytes_of("\x93NUMPY");
    b.push_back(major);
    b.push_back(0);
    const Bytes len = le64(h.size());
    b.insert(b.end(), len.begin(), len.begin() + 4);
    b.insert(b.end(), h.begin(), h.end());
    b.push_back(0x00);
    b.push_back(0x3C);
    EXPECT_EQ(parse_npy(b, "h", "v2").value(0), 1.0);
  }
}

TEST(NpyReject, BadMagic) {
  reject_npy(bytes_of("\x93NUMPX\x01\x00\x02\x00{}"sv), "not a .npy file (bad magic");
  reject_npy(bytes_of("PK\x03\x04"), "bad magic");
  reject_npy({}, "bad magic");
}

TEST(NpyReject, UnsupportedVersion) {
  reject_npy(bytes_of(std::string_view("\x93NUMPY\x04\x00\x00\x00", 10)), "unsupported .npy format version 4.0");
  reject_npy(bytes_of(std::string_view("\x93NUMPY\x01\x01\x00\x00", 10)), "version 1.1");
  reject_npy(bytes_of(std::string_view("\x93NUMPY\x02\x00\x00", 9)), "file ends inside the header length");
}

TEST(NpyReject, HeaderLength) {
  Bytes b = npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (), }");
  b[8] = 0xFF;  // 0x00FF > the 56 bytes present
  reject_npy(b, "header length 255 runs past the end of the file");
  Bytes big(12 + 10001, ' ');
  const std::string_view v2_prefix("\x93NUMPY\x02\x00\x11\x27\x00\x00", 12);  // header length 10001
  std::copy(v2_prefix.begin(), v2_prefix.end(), big.begin());
  reject_npy(big, "header length 10001 exceeds the limit of 10000");
  reject_npy(bytes_of(std::string_view("\x93NUMPY\x03\x00\xff\xff\xff\xff", 12)), "exceeds the limit");
}

TEST(NpyReject, HeaderNotTheExactDict) {
  reject_npy(npy_v1("['descr', '<f4']"), "header is not the NumPy dict literal");
  reject_npy(npy_v1("{'descr': '<f4', 'shape': ()}"), "header lacks the key 'fortran_order'");
  reject_npy(npy_v1("{'descr': '<f4', 'fortran_order': False}"), "lacks the key 'shape'");
  reject_npy(npy_v1("{'fortran_order': False, 'shape': ()}"), "lacks the key 'descr'");
  reject_npy(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}"),
             "unexpected key 'x' (expected exactly 'descr', 'fortran_order' and 'shape')");
  reject_npy(npy_v1("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}"),
             "the key 'descr' twice");
  reject_npy(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (3)}", Bytes(12)),
             "'shape' (n) is not a tuple");
  reject_npy(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': [3]}", Bytes(12)), "expected '('");
  reject_npy(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (3.0,)}", Bytes(12)), "expected ',' or ')'");
  reject_npy(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (03,)}", Bytes(12)), "leading zero");
  reject_npy(npy_v1("{'descr': '<f4', 'fortran_order': 0, 'shape': ()}", Bytes(4)), "must be True or False");
  reject_npy(npy_v1("{'descr': ['<f4'], 'fortran_order': False, 'shape': ()}", Bytes(4)), "expected a quoted string");
  reject_npy(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': ()} x", Bytes(4)), "text after the closing");
  reject_npy(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': ()", Bytes(4)), "expected ',' or '}'");
  reject_npy(npy_v1("{'descr': '<f\xc3\xa9', 'fortran_order': False, 'shape': ()}", Bytes(4)),
             "unsupported character");
}

TEST(NpyReject, FortranOrder) {
  reject_npy(npy_v1("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", Bytes(24)),
             "fortran_order not supported");
}

TEST(NpyReject, UnsupportedAndBigEndianDescr) {
  reject_npy(npy_v1("{'descr': '>f4', 'fortran_order': False, 'shape': (), }", Bytes(4)),
             "big-endian descr '>f4' is not supported");
  reject_npy(npy_v1("{'descr': '<c8', 'fortran_order': False, 'shape': (), }", Bytes(8)), "unsupported descr '<c8'");
  reject_npy(npy_v1("{'descr': '|i1', 'fortran_order': False, 'shape': (), }", Bytes(1)), "unsupported descr '|i1'");
  reject_npy(npy_v1("{'descr': '>u4', 'fortran_order': False, 'shape': (), }", Bytes(4)), "big-endian descr '>u4'");
  reject_npy(npy_v1("{'descr': 'bfloat16', 'fortran_order': False, 'shape': (), }", Bytes(2)),
             "unsupported descr 'bfloat16'");
}

TEST(NpyReject, DataLengthAndTrailingData) {
  reject_npy(npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", Bytes(15)),
             "data is 15 bytes but <f8 shape [2] needs 16 (truncated)");
  reject_npy(npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", Bytes(17)),
             "1 trailing bytes after the data");
  reject_npy(npy_v1("{'descr': '<i4', 'fortran_order': False, 'shape': (0, 3), }", Bytes(1)), "1 trailing bytes");
}

TEST(NpyReject, ShapeOverflowAndNegativeDims) {
  reject_npy(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"),
             "shape [4294967296, 4294967296] overflows 64-bit sizes");
  reject_npy(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775807,), }"),
             "overflows 64-bit sizes");
  reject_npy(npy_v1("{'descr': '<i8', 'fortran_order': False, 'shape': (42949, 429429496649642, 0), }"),
             "shape [42949, 429429496649642, 0] overflows 64-bit sizes");  // found by fuzz_npy
  reject_npy(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"),
             "dimension too large");
  reject_npy(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }"), "negative dimension");
}

TEST(Npy, FileRead) {
  const auto dir = std::filesystem::temp_directory_path() / ("ropecheck_npy_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const Tensor t = make_bits16("q_rot.bf16", TensorDType::bf16, {2}, {1, 2});
  const Bytes b = serialize_npy(t);
  {
    std::ofstream out(dir / "q_rot.bf16.npy", std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  EXPECT_EQ(read_npy(dir / "q_rot.bf16.npy"), t);
  expect_reject([&] { read_npy(dir / "none.npy"); }, "none.npy", "no such file");
  std::filesystem::remove_all(dir);
}

// ---- .npz ------------------------------------------------------------------------------------

// CRC-32 (IEEE, reflected), bit by bit: independent of the zlib the writer uses.
std::uint32_t crc32_of(const Bytes& b) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::uint8_t x : b) {
    c ^= x;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

void reject_npz(const Bytes& file, std::string_view needle) {
  expect_reject([&] { parse_npz(file, "bad.npz"); }, "bad.npz", needle);
}

Bytes zip_of(const std::vector<std::pair<std::string, Bytes>>& files, bool zip64 = false) {
  std::vector<detail::ZipMember> members;
  for (const auto& [name, data] : files) members.push_back({name, data});
  return detail::write_zip_stored(members, zip64);
}

TEST(Npz, RoundTripEveryDtype) {
  const std::vector<Tensor> ts = all_dtypes();
  const Bytes z = serialize_npz(ts);
  const std::vector<Tensor> back = parse_npz(z, "rt.npz");
  EXPECT_EQ(by_name(back), by_name(ts));
  std::vector<std::string> names;
  for (const Tensor& t : back) names.push_back(t.name);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_TRUE(parse_npz(serialize_npz({}), "empty.npz").empty());
}

TEST(Npz, DeterministicStoredMembersWithFixedTimestamps) {
  std::vector<Tensor> ts = all_dtypes();
  const Bytes a = serialize_npz(ts);
  EXPECT_EQ(serialize_npz(ts), a);
  std::reverse(ts.begin(), ts.end());
  EXPECT_EQ(serialize_npz(ts), a);
  // First local header: signature, version 20, flags 0, STORED, 00:00 on 1980-01-01, then the
  // first member (sorted by name) "bf16.npy", which is its .npy bytes.
  EXPECT_EQ(Bytes(a.begin(), a.begin() + 14), (Bytes{'P', 'K', 3, 4, 20, 0, 0, 0, 0, 0, 0, 0, 0x21, 0}));
  EXPECT_EQ(std::string(a.begin() + 30, a.begin() + 38), "bf16.npy");
  const Bytes npy = serialize_npy(by_name(all_dtypes()).at("bf16"));
  EXPECT_TRUE(std::equal(npy.begin(), npy.end(), a.begin() + 38));
  EXPECT_EQ(detail::load_u32(a.data() + 14), crc32_of(npy));  // CRC-32 field
  EXPECT_EQ(detail::load_u32(a.data() + 18), npy.size());      // compressed size == size (STORED)
  EXPECT_EQ(detail::load_u32(a.data() + 22), npy.size());
  // End of central directory: 11 entries, no comment.
  const std::size_t e = a.size() - 22;
  EXPECT_EQ(detail::load_u32(a.data() + e), 0x06054b50u);
  EXPECT_EQ(detail::load_u16(a.data() + e + 10), 11u);
}

TEST(Npz, ReadsZip64Records) {
  const Bytes npy = serialize_npy(make_f32("a", {2}, {1, 2}));
  const Bytes z = zip_of({{"a.npy", npy}, {"b.npy", npy}}, /*zip64=*/true);
  const std::vector<Tensor> back = parse_npz(z, "z64.npz");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].name, "b");
  EXPECT_EQ(back[1].value(1), 2.0);
}

TEST(NpzReject, NotAZip) {
  reject_npz({}, "not a valid .npz (zip) archive: 0 bytes");
  reject_npz(bytes_of("PK\x05\x06 this is not a zip"), "not a valid .npz (zip) archive");
  const Bytes z = serialize_npz({make_f32("a", {1}, {1})});
  ASSERT_GT(z.size(), 30u);
  reject_npz(Bytes(z.begin(), z.end() - 30), "not a valid .npz (zip) archive");  // cut into the central directory
}

TEST(NpzReject, MemberNotEndingInNpy) {
  reject_npz(zip_of({{"a.txt", bytes_of("hello")}}), "member 'a.txt' does not end in .npy");
  reject_npz(zip_of({{"dir/", {}}}), "does not end in .npy");
}

TEST(NpzReject, DuplicateNames) {
  const Bytes npy = serialize_npy(make_f32("a", {1}, {1}));
  reject_npz(zip_of({{"a.npy", npy}, {"a.npy", npy}}), "same name");
  const Tensor t = make_f32("a", {1}, {1});
  expect_reject([&] { serialize_npz({t, t}); }, "cannot write .npz", "duplicate tensor name 'a'");
}

TEST(NpzReject, HugeDeclaredSizes) {
  const Bytes npy = serialize_npy(make_f32("a", {1}, {1}));
  Bytes z = zip_of({{"a.npy", npy}});
  const std::size_t cd = detail::load_u32(z.data() + z.size() - 22 + 16);
  for (std::size_t at : {std::size_t{18}, std::size_t{22}, cd + 20, cd + 24}) {  // local + central sizes
    z[at] = 0xF0;
    z[at + 1] = 0xFF;
    z[at + 2] = 0xFF;
    z[at + 3] = 0x7F;
  }
  reject_npz(z, "not a valid .npz");  // libzip (or our size check) rejects it; nothing of 2 GiB is allocated
  // A zip64 member that declares 2^60 bytes.
  Bytes z64 = zip_of({{"a.npy", npy}}, true);
  const std::size_t cd64 = detail::load_u32(z64.data() + z64.size() - 22 - 20 - 56 + 48);
  for (std::size_t at : {std::size_t{30 + 5 + 4}, std::size_t{30 + 5 + 12}, cd64 + 46 + 5 + 4, cd64 + 46 + 5 + 12}) {
    for (int i = 0; i < 8; ++i) z64[at + static_cast<std::size_t>(i)] = i == 7 ? 0x10 : 0;
  }
  reject_npz(z64, "not a valid .npz");
}

TEST(NpzReject, CorruptedData) {
  Bytes z = serialize_npz({make_f32("a", {4}, {1, 2, 3, 4})});
  z[30 + 5 + 128] ^= 0x01;  // first data byte of a.npy: CRC mismatch
  reject_npz(z, "CRC");
  const Bytes bad_npy = bytes_of("\x93NUMPY\x01\x00\x02\x00{}"sv);
  reject_npz(zip_of({{"x.npy", bad_npy}}), "bad.npz member 'x.npy': header lacks the key 'descr'");
}

TEST(Npz, FileRead) {
  const auto dir = std::filesystem::temp_directory_path() / ("ropecheck_npz_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const Bytes z = serialize_npz(all_dtypes());
  {
    std::ofstream out(dir / "x.npz", std::ios::binary);
    out.write(reinterpret_cast<const char*>(z.data()), static_cast<std::streamsize>(z.size()));
  }
  EXPECT_EQ(by_name(read_npz(dir / "x.npz")), by_name(all_dtypes()));
  expect_reject([&] { read_npz(dir / "y.npz"); }, "y.npz", "no such file");
  std::filesystem::remove_all(dir);
}

// ---- tensor files written piece by piece ------------------------------------------------------

// Several files finished at once (the files of a golden set): each one's bytes and hash are what the
// whole-file writers give for its tensors, whatever order the threads take them in; a writer's
// error comes back.
TEST(TensorFileWriter, FinishInParallelEqualsTheWholeFileWriters) {
  const auto dir = std::filesystem::temp_directory_path() / ("ropecheck_finish_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::vector<std::unique_ptr<detail::TensorFileWriter>> owned;
  std::vector<detail::TensorFileWriter*> writers;
  std::vector<Bytes> expected;
  for (int g = 0; g < 5; ++g) {
    const auto n = static_cast<std::size_t>(g * 1000 + 1);
    const Tensor t = make_f32("t", {static_cast<std::int64_t>(n)}, std::vector<float>(n, static_cast<float>(g)));
    const bool npz = g % 2 == 1;
    owned.push_back(std::make_unique<detail::TensorFileWriter>(
        dir / ("f" + std::to_string(g) + (npz ? ".npz" : ".safetensors")),
        std::vector<detail::TensorInfo>{{t.name, t.dtype, t.shape}}, npz ? FileFormat::npz : FileFormat::safetensors,
        std::map<std::string, std::string>{}, "test"));
    owned.back()->write(0, 0, t.data);
    writers.push_back(owned.back().get());
    expected.push_back(npz ? serialize_npz({t}) : serialize_safetensors({t}, {}));
  }
  const std::vector<detail::TensorFileWriter::Finished> finished = detail::finish_in_parallel(writers);
  ASSERT_EQ(finished.size(), writers.size());
  for (std::size_t g = 0; g < writers.size(); ++g) {
    EXPECT_EQ(finished[g].bytes, expected[g].size()) << g;
    EXPECT_EQ(finished[g].sha256, sha256_hex(expected[g])) << g;
  }
  detail::TensorFileWriter unwritten(dir / "u.safetensors", {{"u", TensorDType::f64, {4}}}, FileFormat::safetensors, {},
                                     "test");
  EXPECT_THROW(detail::finish_in_parallel({&unwritten}), std::logic_error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ropecheck::golden
