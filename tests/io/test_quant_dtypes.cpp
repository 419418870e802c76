// The quantized stores' tensor dtypes in io/ (golden/GOLDEN_FORMAT.md, "Quantized stores"): FP8 codes as
// safetensors F8_E4M3 / F8_E5M2 and as .npy '|u1' bit patterns, packed words as U32 / '<u4'.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ropecheck/core/quantized.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"
#include "ropecheck/io/npy.hpp"
#include "ropecheck/io/safetensors.hpp"
#include "ropecheck/io/tensor.hpp"

namespace ropecheck::io {
namespace {

using Bytes = std::vector<std::uint8_t>;

TEST(QuantDtypes, Fp8ValuesDecodeExactly) {
  const Tensor a = make_bytes("a", TensorDType::e4m3fn, {4}, {0x7E, 0x01, 0xFF, 0x38});
  EXPECT_EQ(a.value(0), 448.0);
  EXPECT_EQ(a.value(1), 0x1p-9);
  EXPECT_TRUE(std::isnan(a.value(2)));
  EXPECT_EQ(a.value(3), 1.0);
  const Tensor b = make_bytes("b", TensorDType::e5m2, {3}, {0x7B, 0x7C, 0x01});
  EXPECT_EQ(b.value(0), 57344.0);
  EXPECT_EQ(b.value(1), INFINITY);
  EXPECT_EQ(b.value(2), 0x1p-16);
  EXPECT_EQ(make_bytes("c", TensorDType::u8, {1}, {200}).int_value(0), 200);
  EXPECT_EQ(make_u32("d", {1}, {0xFFFFFFFFu}).int_value(0), 0xFFFFFFFFll);
  EXPECT_THROW(make_bytes("e", TensorDType::f32, {1}, {0}), InputError);
  EXPECT_THROW(a.int_value(0), InputError);  // an FP8 code is a value, not an integer
  EXPECT_TRUE(is_byte_dtype(TensorDType::e5m2));
  EXPECT_FALSE(is_byte_dtype(TensorDType::u32));
}

TEST(QuantDtypes, SafetensorsRoundTripAndCrateOrder) {
  const std::vector<Tensor> ts = {make_bytes("k.e5m2", TensorDType::e5m2, {2}, {1, 2}),
                                  make_bytes("q.e4m3fn", TensorDType::e4m3fn, {3}, {3, 4, 5}),
                                  make_bytes("blocks", TensorDType::u8, {1}, {6}),
                                  make_u32("words", {1}, {7}), make_f32("s", {1}, {0.5f})};
  const Bytes file = serialize_safetensors(ts, {});
  const std::vector<Tensor> back = parse_safetensors(file, "rt");
  std::vector<std::string> names;
  for (const Tensor& t : back) names.push_back(t.name);
  // The crate's Dtype order (U8 < F8_E5M2 < F8_E4M3 < ... < U32 < F32), written descending.
  EXPECT_EQ(names, (std::vector<std::string>{"s", "words", "q.e4m3fn", "k.e5m2", "blocks"}));
  for (const Tensor& t : ts) {
    const auto it = std::find_if(back.begin(), back.end(), [&](const Tensor& b) { return b.name == t.name; });
    ASSERT_NE(it, back.end());
    EXPECT_EQ(*it, t) << t.name;
  }
  const std::string header(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(detail::load_u64(file.data())));
  EXPECT_NE(header.find("\"dtype\":\"F8_E4M3\""), std::string::npos);
  EXPECT_NE(header.find("\"dtype\":\"U32\""), std::string::npos);
}

TEST(QuantDtypes, ByteExactAsTheCrateWritesThem) {
  // safetensors 0.8.0's numpy writer on the same arrays (fuzz/corpus/fuzz_safetensors/quant_dtypes.safetensors).
  const std::vector<Tensor> ts = {
      make_bytes("q.e4m3fn", TensorDType::e4m3fn, {3}, {0x38, 0x7E, 0xB0}),
      make_bytes("k.e5m2", TensorDType::e5m2, {1, 2}, {0x3C, 0x7B}),
      make_bytes("blocks", TensorDType::u8, {2, 3}, {0, 1, 2, 3, 4, 5}),
      make_u32("words", {2}, {1u, 0xFFFFFFFFu}), make_f32("s", {1}, {0.25f})};
  const std::string header =
      R"({"s":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"words":{"dtype":"U32","shape":[2],)"
      R"("data_offsets":[4,12]},"q.e4m3fn":{"dtype":"F8_E4M3","shape":[3],"data_offsets":[12,15]},)"
      R"("k.e5m2":{"dtype":"F8_E5M2","shape":[1,2],"data_offsets":[15,17]},"blocks":{"dtype":"U8",)"
      R"("shape":[2,3],"data_offsets":[17,23]}}       )";
  Bytes want = {static_cast<std::uint8_t>(header.size() & 0xFF), static_cast<std::uint8_t>(header.size() >> 8), 0, 0, 0,
                0, 0, 0};
  want.insert(want.end(), header.begin(), header.end());
  for (int b : {0, 0, 0x80, 0x3E, 1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0x38, 0x7E, 0xB0, 0x3C, 0x7B, 0, 1, 2, 3, 4, 5}) {
    want.push_back(static_cast<std::uint8_t>(b));
  }
  EXPECT_EQ(serialize_safetensors(ts, {}), want);
}

TEST(QuantDtypes, NpyStoresFp8AsBitPatterns) {
  const Tensor q = make_bytes("q", TensorDType::e4m3fn, {2, 2}, {0x00, 0x7E, 0x80, 0xFE});
  const Bytes npy = serialize_npy(q);
  const std::string head(npy.begin(), npy.begin() + 64);
  EXPECT_NE(head.find("'descr': '|u1'"), std::string::npos);
  const Tensor back = parse_npy(npy, "q", "q.npy");
  EXPECT_EQ(back.dtype, TensorDType::u8);  // the manifest names the FP8 type
  EXPECT_EQ(back.data, q.data);
  EXPECT_EQ(back.shape, q.shape);
  const Tensor w = make_u32("w", {2}, {1u, 0x80000000u});
  const Bytes wn = serialize_npy(w);
  EXPECT_NE(std::string(wn.begin(), wn.begin() + 64).find("'<u4'"), std::string::npos);
  EXPECT_EQ(parse_npy(wn, "w", "w.npy"), w);
}

TEST(QuantDtypes, SafetensorsSizeMismatchIsRejected) {
  // An F8 tensor whose byte range does not match its shape: the one-line error every dtype gets.
  std::string h = R"({"a":{"dtype":"F8_E5M2","shape":[3],"data_offsets":[0,2]}})";
  while ((h.size() % 8) != 0) h += ' ';
  Bytes file(8);
  for (int i = 0; i < 8; ++i) file[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(h.size() >> (8 * i));
  file.insert(file.end(), h.begin(), h.end());
  file.push_back(1);
  file.push_back(2);
  try {
    parse_safetensors(file, "bad.safetensors");
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.safetensors"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ropecheck::io
