// golden --scores: the scores file holds exactly what the attention engine gives for the documented
// inputs (token 0's q heads, k[0, 0]), which a plain MPFR evaluation of exact.hpp confirms for a handful
// of pairs; the bytes do not depend on the thread count; a set without --scores is unchanged; unusable
// requests write nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "ropecheck/attention/engine.hpp"
#include "ropecheck/attention/exact.hpp"
#include "ropecheck/attention/pairs.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/golden/input_generator.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/reference/scalar.hpp"

namespace ropecheck::golden {
namespace {

namespace fs = std::filesystem;

fs::path temp_root() {
  const fs::path p = fs::temp_directory_path() /
                     ("ropecheck-scores-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

constexpr const char* kPairs = "causal:0:6,dist:4096:2,pair:100:3,pair:3:100,tail:70000:1:9999";

GoldenOptions options(const fs::path& out, int threads = 2) {
  GoldenOptions o;
  o.spec = load_preset("llama-3.1-8b");
  o.positions = parse_positions("0:3");
  o.out = out;
  o.dtypes = {DType::f32, DType::f16, DType::bf16};
  o.heads = 3;
  o.seed = 5;
  o.threads = threads;
  o.scores = kPairs;
  return o;
}

template <class T>
std::vector<T> values(const GoldenSet& g, const std::string& name) {
  const std::span<const std::uint8_t> b = g.tensor_bytes(name);
  std::vector<T> v(b.size() / sizeof(T));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

std::vector<double> stored(const GoldenSet& g, const std::string& name, DType t) {
  const std::span<const std::uint8_t> b = g.tensor_bytes(name);
  const std::size_t sz = io::dtype_size(io::tensor_dtype(t));
  std::vector<double> v(b.size() / sz);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = load_element(b.data() + i * sz, t);
  return v;
}

std::string text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(GoldenScores, AreTheEnginesValuesAndTheExactOnes) {
  const fs::path root = temp_root();
  const GoldenOptions o = options(root / "set");
  const GoldenSummary s = write_golden_set(o);
  const GoldenSet g = load_golden_set(o.out);
  const attention::PairSet set = attention::parse_pairs(kPairs);
  const std::int64_t N = static_cast<std::int64_t>(set.pairs.size()), G = 3, D = 128;
  ASSERT_TRUE(s.manifest.contains("scores"));
  EXPECT_EQ(s.manifest["scores"]["pairs"], N);
  EXPECT_EQ(s.manifest["scores"]["group"], G);
  EXPECT_EQ(s.manifest["scores"]["file"], "scores.safetensors");
  EXPECT_EQ(g.find("scores.bf16")->shape, (std::vector<std::int64_t>{G, N}));
  EXPECT_EQ(g.find("scores.bf16")->role, "score");
  EXPECT_EQ(g.output_names().size(), 16u);  // the scores are not per-token outputs

  // The documented inputs: the set's q[0] (every head) and k[0, 0].
  const std::vector<float> q = values<float>(g, "score_q"), k = values<float>(g, "score_k");
  const std::vector<float> set_q = values<float>(g, "q"), set_k = values<float>(g, "k");
  ASSERT_EQ(q.size(), static_cast<std::size_t>(G * D));
  EXPECT_TRUE(std::equal(q.begin(), q.end(), set_q.begin()));
  EXPECT_TRUE(std::equal(k.begin(), k.end(), set_k.begin()));
  const std::vector<std::int64_t> pos = values<std::int64_t>(g, "score_positions");
  ASSERT_EQ(pos.size(), static_cast<std::size_t>(2 * N));
  for (std::int64_t p = 0; p < N; ++p) {
    EXPECT_EQ(pos[static_cast<std::size_t>(2 * p)], set.pairs[static_cast<std::size_t>(p)].query);
    EXPECT_EQ(pos[static_cast<std::size_t>(2 * p + 1)], set.pairs[static_cast<std::size_t>(p)].key);
  }

  // The engine on the same pairs, one token per distinct position.
  attention::AttentionSpec a;
  a.group = static_cast<int>(G);
  const std::int64_t seq_len = s.manifest["seq_len"];
  const attention::AttentionEngine engine(o.spec.rope, seq_len, a, 70000);
  const attention::PairTokens tok = attention::pair_tokens(set);
  std::vector<Position> at;
  std::vector<double> qv, kv;
  for (std::int64_t p : tok.positions) {
    at.push_back(Position::uniform(p));
    qv.insert(qv.end(), q.begin(), q.end());
    kv.insert(kv.end(), k.begin(), k.end());
  }
  const std::vector<DType> dtypes = {DType::f64, DType::f32, DType::f16, DType::bf16};
  std::vector<std::vector<double>> want(4, std::vector<double>(static_cast<std::size_t>(G * N)));
  std::vector<attention::AttentionOut> out(4);
  for (std::size_t d = 0; d < 4; ++d) out[d].scores = want[d].data();
  RoundingStats stats;
  engine.pairs(at, qv, kv, tok.query_token, tok.key_token, dtypes, out, stats);
  for (std::size_t d = 0; d < 4; ++d) {
    const std::vector<double> got = stored(g, "scores." + std::string(to_string(dtypes[d])), dtypes[d]);
    ASSERT_EQ(got.size(), want[d].size());
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[d][i]) << to_string(dtypes[d]) << " " << i;
  }

  // Independently: exact.hpp's relative form in MPFR at 600 bits, rounded once, for a handful of pairs
  // (the diagonal, neighbours both ways, a long distance, the tail).
  ScopedPrecision prec(600);
  const attention::ExactAttention<Real> e = attention::exact_attention<Real>(o.spec.rope, seq_len, a);
  const std::vector<Real> kr(k.begin(), k.end());
  const std::vector<double> f64 = stored(g, "scores.f64", DType::f64), bf16 = stored(g, "scores.bf16", DType::bf16);
  for (std::int64_t p : {std::int64_t{0}, std::int64_t{4}, N - 5, N - 4, N - 3, N - 1}) {
    const attention::ScorePair& sp = set.pairs[static_cast<std::size_t>(p)];
    for (std::int64_t h = 0; h < G; ++h) {
      const std::vector<Real> qr(q.begin() + h * D, q.begin() + (h + 1) * D);
      const Real x = attention::relative_logit<Real>(o.spec.rope, e, Position::uniform(sp.query), qr,
                                                     Position::uniform(sp.key), kr);
      const std::size_t i = static_cast<std::size_t>(h * N + p);
      EXPECT_EQ(f64[i], x == 0 ? 0.0 : round_to_double(x, DType::f64)) << sp.query << "," << sp.key;
      EXPECT_EQ(bf16[i], x == 0 ? 0.0 : round_to_double(x, DType::bf16)) << sp.query << "," << sp.key;
    }
  }
}

TEST(GoldenScores, BytesDoNotDependOnThreadsAndNoScoresChangesNothing) {
  const fs::path root = temp_root();
  const GoldenSummary one = write_golden_set(options(root / "one", 1));
  const GoldenSummary four = write_golden_set(options(root / "four", 4));
  EXPECT_EQ(one.manifest["files"], four.manifest["files"]);
  EXPECT_EQ(text(root / "one" / "manifest.json"), text(root / "four" / "manifest.json"));
  GoldenOptions plain = options(root / "plain");
  plain.scores.clear();
  const GoldenSummary p = write_golden_set(plain);
  EXPECT_FALSE(p.manifest.contains("scores"));
  EXPECT_FALSE(fs::exists(root / "plain" / "scores.safetensors"));
  for (std::size_t f = 0; f < p.manifest["files"].size(); ++f)  // the other files are the same bytes
    EXPECT_EQ(p.manifest["files"][f], one.manifest["files"][f]);
}

// golden --attention: the documented inputs (the set's q and head 0 of its k, token by token; v and the
// sinks from their own streams), shapes and record; thread-independent bytes. The values themselves are
// checked bit for bit against mpmath by tests/python/mpmath_golden_attention.py (ctest
// mpmath_golden_attention).
TEST(GoldenAttention, HoldsTheDocumentedInputsAndBytesDoNotDependOnThreads) {
  const fs::path root = temp_root();
  GoldenOptions o = options(root / "one", 1);
  o.positions = parse_positions("0:8");
  o.scores.clear();
  o.attention = "causal:4000:8:3";
  o.softcap = 30.0;
  o.sinks = true;
  const GoldenSummary one = write_golden_set(o);
  o.out = root / "four";
  o.threads = 4;
  const GoldenSummary four = write_golden_set(o);
  EXPECT_EQ(text(root / "one" / "manifest.json"), text(root / "four" / "manifest.json"));
  const GoldenSet g = load_golden_set(root / "one");
  const std::int64_t T = 8, G = 3, D = 128;
  const nlohmann::json& r = one.manifest["attention"];
  EXPECT_EQ(r["tokens"], T);
  EXPECT_EQ(r["group"], G);
  EXPECT_EQ(r["window"], 3);
  EXPECT_EQ(r["softcap"], 30.0);
  EXPECT_EQ(r["positions"]["min"], 4000);
  EXPECT_EQ(g.find("attention_out.bf16")->shape, (std::vector<std::int64_t>{T, G, D}));
  EXPECT_EQ(g.find("attention_out.bf16")->role, "attention");
  const std::vector<float> q = values<float>(g, "attention_q"), k = values<float>(g, "attention_k");
  const std::vector<float> set_q = values<float>(g, "q"), set_k = values<float>(g, "k");
  EXPECT_EQ(q, set_q);  // the set has T tokens of G heads
  for (std::int64_t t = 0; t < T; ++t)
    EXPECT_TRUE(std::equal(k.begin() + t * D, k.begin() + (t + 1) * D, set_k.begin() + t * G * D)) << t;
  EXPECT_EQ(values<float>(g, "attention_v"), generate_inputs(5, InputStream::v, T * D));
  const std::vector<double> sinks = values<double>(g, "attention_sinks");
  const std::vector<float> want_sinks = generate_inputs(5, InputStream::sinks, G);
  EXPECT_TRUE(std::equal(sinks.begin(), sinks.end(), want_sinks.begin()));
  EXPECT_EQ(values<std::int64_t>(g, "attention_positions"),
            (std::vector<std::int64_t>{4000, 4001, 4002, 4003, 4004, 4005, 4006, 4007}));
}

TEST(GoldenScores, UnusableRequestsWriteNothing) {
  const fs::path root = temp_root();
  auto refused = [&](GoldenOptions o, const std::string& words) {
    o.out = root / "out";
    try {
      write_golden_set(o);
      ADD_FAILURE() << "accepted: " << o.scores;
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
    EXPECT_FALSE(fs::exists(root / "out"));
  };
  GoldenOptions o = options(root / "out");
  o.scores = "causal:0";
  refused(o, "--scores: 'causal:0'");
  o.scores = "full:0:4096";  // 2^24 pairs x 3 heads
  refused(o, "scores per dtype");
  o.scores = "causal:0:4";
  o.shard = Shard{1, 2};
  refused(o, "not with --shard");
  o.shard.reset();
  o.spec = load_preset("transformer-base");
  refused(o, "needs a RoPE spec");
}

}  // namespace
}  // namespace ropecheck::golden
