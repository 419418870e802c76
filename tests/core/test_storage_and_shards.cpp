// core's storing of an element of a storage format (dtype.hpp: store_element, the inverse of
// load_element) and the list of missing shards that merges report (shard.hpp: missing_shards).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/shard.hpp"

namespace ropecheck {
namespace {

TEST(StoreElement, IsTheInverseOfLoadElement) {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    for (double v : {0.0, -0.0, 1.0, -2.5, 0.15625, std::ldexp(3.0, -10), inf, -inf}) {
      unsigned char buf[8] = {0xAA, 0xAA, 0xAA, 0xAA, 0xAA, 0xAA, 0xAA, 0xAA};
      store_element(buf, v, t);
      EXPECT_EQ(load_element(buf, t), v) << to_string(t) << " " << v;
      EXPECT_EQ(std::signbit(load_element(buf, t)), std::signbit(v)) << to_string(t) << " " << v;
      const int width = format_info(t).storage_bits / 8;
      for (int i = width; i < 8; ++i) EXPECT_EQ(buf[i], 0xAA) << to_string(t) << ": wrote past its width";
    }
  }
  unsigned char buf[8] = {};
  store_element(buf, 65504.0, DType::f16);
  EXPECT_EQ(buf[0], 0xFF);  // little-endian 0x7BFF, the largest f16
  EXPECT_EQ(buf[1], 0x7B);
  EXPECT_THROW(store_element(buf, 1.0 + std::ldexp(1.0, -11), DType::f16), std::invalid_argument);
  EXPECT_THROW(store_element(buf, 257.0, DType::bf16), std::invalid_argument);
}

TEST(MissingShards, CountsAllAndListsTheFirstEight) {
  MissingShards m = missing_shards(4, [](int i) { return i != 2 && i != 4; });
  EXPECT_EQ(m.count, 2);
  EXPECT_EQ(m.listed, "2, 4");
  m = missing_shards(3, [](int) { return true; });
  EXPECT_EQ(m.count, 0);
  EXPECT_EQ(m.listed, "");
  m = missing_shards(8, [](int) { return false; });
  EXPECT_EQ(m.count, 8);
  EXPECT_EQ(m.listed, "1, 2, 3, 4, 5, 6, 7, 8");
  m = missing_shards(20, [](int i) { return i == 3; });
  EXPECT_EQ(m.count, 19);
  EXPECT_EQ(m.listed, "1, 2, 4, 5, 6, 7, 8, 9, ...");
}

}  // namespace
}  // namespace ropecheck
