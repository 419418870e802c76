// The correctly rounded truth of an attention score from an installed ropecheck (ropecheck::attention):
// the logit of one (query, key) pair, here against a plain double evaluation of the same formula, and
// the property that it depends on the positions only through their distance.
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>
#include <ropecheck/attention/engine.hpp>
#include <ropecheck/reference/presets.hpp>

namespace ra = ropecheck::attention;

namespace {

// The f64 score of the query at position m against the key at n, with every channel of q 0.25 and of
// k 0.5 (one head: a group of 1).
double score(const ra::AttentionEngine& engine, std::int64_t m, std::int64_t n) {
  const std::vector<ropecheck::Position> at = {ropecheck::Position::uniform(m), ropecheck::Position::uniform(n)};
  const std::vector<double> q(2 * 128, 0.25), k(2 * 128, 0.5);
  const std::vector<std::int64_t> query = {0}, key = {1};
  const std::vector<ropecheck::DType> dtypes = {ropecheck::DType::f64};
  double s = 0;
  const std::vector<ra::AttentionOut> out = {{&s, nullptr}};
  ropecheck::RoundingStats stats;
  engine.pairs(at, q, k, query, key, dtypes, out, stats);
  return s;
}

TEST(MyScores, TruthOfOnePair) {
  const ropecheck::EncodingSpec spec = ropecheck::load_preset("llama-3-8b");  // base 500000, head_dim 128
  const ra::AttentionEngine engine(spec.rope, std::nullopt, ra::AttentionSpec{}, 1 << 20);
  // With q and k constant, each pair j adds (q_a k_a + q_b k_b) cos(d w_j) = 0.25 cos(d w_j), and the
  // scale is 1 / sqrt(128). Error of this double evaluation at d = 2: w_j from pow (1 ulp) makes the
  // angle 2 w_j <= 2 off by 2^-52 at most, cos adds 1 ulp, the 64-term sum 63 u times the sum of |terms|,
  // the square root and the division 2 u: within (64 + 8) u sum|terms| / sqrt(128) of the truth, which
  // the engine's f64 value is within half an ulp of.
  double mine = 0, sum_abs = 0;
  for (int j = 0; j < 64; ++j) {
    const double t = 0.25 * std::cos(2.0 * std::pow(500000.0, -j / 64.0));
    mine += t;
    sum_abs += std::fabs(t);
  }
  mine /= std::sqrt(128.0);
  const double bound = (64 + 8) * 0x1p-53 * sum_abs / std::sqrt(128.0) + 0x1p-53 * std::fabs(mine);
  EXPECT_NEAR(score(engine, 5, 3), mine, bound);
  // The truth depends only on the distance, bit for bit.
  EXPECT_EQ(score(engine, 5, 3), score(engine, 1000005, 1000003));
  EXPECT_NE(score(engine, 5, 3), score(engine, 5, 5));
}

}  // namespace
