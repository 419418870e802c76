// Position lists and the portable input generator of golden sets.
#include <gtest/gtest.h>

#include "test_paths.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "ropecheck/golden/input_generator.hpp"
#include "ropecheck/core/positions.hpp"
#include "ropecheck/core/dtype.hpp"

namespace ropecheck::golden {
namespace {

std::vector<std::int64_t> ts(const PositionSet& s) {
  std::vector<std::int64_t> v;
  for (const Position& p : s.positions) v.push_back(p.t);
  return v;
}

TEST(Positions, RangesListsAndSteps) {
  EXPECT_EQ(parse_positions("0:4").positions.size(), 4u);
  EXPECT_EQ(ts(parse_positions("0:10:4")), (std::vector<std::int64_t>{0, 4, 8}));
  EXPECT_EQ(ts(parse_positions("1,7,4095,131071,1048575")),
            (std::vector<std::int64_t>{1, 7, 4095, 131071, 1048575}));
  EXPECT_EQ(parse_positions("0:131072:97").positions.size(), 1352u);  // ceil(131072 / 97)
  EXPECT_EQ(ts(parse_positions("3,0:2")), (std::vector<std::int64_t>{3, 0, 1}));
  EXPECT_FALSE(parse_positions("0:4").has_triples);
}

TEST(Positions, LogSamplerIsIntegerDefined) {
  // K = 2 per octave up to 16: 0, then 2^e - 1, 2^e, 1.5 * 2^e (floored).
  EXPECT_EQ(ts(parse_positions("log:16:2")), (std::vector<std::int64_t>{0, 1, 2, 3, 4, 6, 7, 8, 12, 15, 16}));
  // MAX = 2^n - 1: the last point before 2^n and MAX itself are included.
  EXPECT_EQ(ts(parse_positions("log:15:2")), (std::vector<std::int64_t>{0, 1, 2, 3, 4, 6, 7, 8, 12, 15}));
  EXPECT_EQ(ts(parse_positions("log:131071:4")).back(), 131071);
  EXPECT_EQ(ts(parse_positions("log:100:1")).back(), 100);
  const auto big = ts(parse_positions("log:16777216:4"));
  EXPECT_EQ(big.front(), 0);
  EXPECT_EQ(big.back(), 16777216);
  EXPECT_TRUE(std::is_sorted(big.begin(), big.end()));
  EXPECT_NE(std::find(big.begin(), big.end(), 16777215), big.end());
  EXPECT_NE(std::find(big.begin(), big.end(), 3 * 2097152), big.end());  // 1.5 * 2^22
}

TEST(Positions, TriplesAndGrids) {
  const PositionSet s = parse_positions("5/2/3,7");
  ASSERT_EQ(s.positions.size(), 2u);
  EXPECT_EQ(s.positions[0], (Position{5, 2, 3}));
  EXPECT_EQ(s.positions[1], Position::uniform(7));
  EXPECT_TRUE(s.has_triples);
  const PositionSet g = parse_positions("grid:10:2:3");
  ASSERT_EQ(g.positions.size(), 6u);
  EXPECT_EQ(g.positions[4], (Position{10, 11, 11}));
}

TEST(Positions, BadInputNamesTheItem) {
  for (const char* bad : {"", "abc", "5:3", "0:10:0", "-1", "1,,2", "log:10", "1/2", "grid:1:0:3", "9007199254740993",
                          "0:99999999999"}) {
    try {
      parse_positions(bad, 1 << 20);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find("--positions"), std::string::npos) << e.what();
    }
  }
}

// The first values of several (seed, stream) pairs, pinned in tests/data/golden_contract (written
// once from a golden set's inputs; reproduced independently by tests/python/test_golden_contract.py).
// A change of the algorithm fails here: bump kGeneratorVersion and pin new values then.
TEST(InputGenerator, PinnedValuesAreReproduced) {
  const std::filesystem::path file = std::filesystem::path(ropecheck::test::data_dir()) / "golden_contract" / "input_generator_v1.json";
  std::ifstream in(file);
  ASSERT_TRUE(in) << "cannot read " << file;
  const nlohmann::json pinned = nlohmann::json::parse(in);
  EXPECT_EQ(pinned.at("generator"), kGeneratorName);
  EXPECT_EQ(pinned.at("version"), kGeneratorVersion);
  std::size_t n = 0;
  for (const auto& c : pinned.at("cases")) {
    const auto seed = c.at("seed").get<std::uint64_t>();
    const InputStream stream = c.at("stream") == "q" ? InputStream::q : InputStream::k;
    const auto first = c.at("first_index").get<std::uint64_t>();
    const auto& bits = c.at("f32_bits");
    ASSERT_EQ(bits.size(), c.at("values").size());
    for (std::size_t i = 0; i < bits.size(); ++i, ++n) {
      const float x = generate_input(seed, stream, first + i);
      std::uint32_t b = 0;
      std::memcpy(&b, &x, 4);
      EXPECT_EQ(b, std::stoul(bits[i].get<std::string>(), nullptr, 16))
          << "seed " << seed << " stream " << c.at("stream") << " index " << first + i;
      EXPECT_EQ(static_cast<double>(x), std::stod(c.at("values")[i].get<std::string>()));
    }
  }
  EXPECT_GE(n, 64u);  // the file really pins values
  EXPECT_EQ(splitmix64_finalize(0), 0u);
  EXPECT_EQ(splitmix64_finalize(0x9E3779B97F4A7C15ULL), 0xE220A8397B1DCDAFULL);  // SplitMix64's first output
}

TEST(InputGenerator, ValuesAreExactInBf16AndNearNormal) {
  const std::vector<float> v = generate_inputs(42, InputStream::k, 200000);
  double sum = 0, sq = 0;
  for (float x : v) {
    // Exactly representable in bf16: the low 16 bits of the float are zero.
    std::uint32_t bits;
    std::memcpy(&bits, &x, 4);
    ASSERT_EQ(bits & 0xFFFF, 0u) << x;
    ASSERT_LT(std::fabs(x), 4.0f);
    sum += x;
    sq += double(x) * x;
  }
  const double n = static_cast<double>(v.size());
  const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(sd, 37837.0 / 32768.0, 0.01);  // Irwin-Hall of four 16-bit uniforms, scaled by 2^-15
}

TEST(InputGenerator, IndependentOfHowItIsSplit) {
  const std::vector<float> all = generate_inputs(7, InputStream::q, 1000);
  for (std::uint64_t i : {0u, 1u, 999u}) EXPECT_EQ(all[i], generate_input(7, InputStream::q, i));
}

}  // namespace
}  // namespace ropecheck::golden
