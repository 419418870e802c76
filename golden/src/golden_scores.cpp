// --scores (golden_values.hpp): the correctly rounded attention scores of a list of (query, key) pairs for
// one head group, from attention/'s engine, written as the set's scores file (GOLDEN_FORMAT.md,
// "Attention scores"). The query heads are token 0's q (every head: the set's heads are one group) and
// the key its k head 0, the same vectors at every position: a pair's score then depends on its positions
// only through the rotation, which is what a score probes.
#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "golden_values.hpp"
#include "ropecheck/attention/engine.hpp"
#include "ropecheck/golden/input_generator.hpp"
#include "ropecheck/io/memory_budget.hpp"

namespace ropecheck::golden::detail {
namespace {

// The engine takes q and k per token; each chunk of pairs gets its own tokens so that the copies of the
// (constant) vectors stay near 2^21 doubles (16 MiB) whatever the pair set.
constexpr std::int64_t kChunkValues = std::int64_t{1} << 21;

std::span<const std::uint8_t> bytes_of(const void* p, std::size_t n) {
  return {static_cast<const std::uint8_t*>(p), n};
}

// "--pairs: ..." (the grammar's own option name) as "--scores: ...".
SpecError as_scores_error(const SpecError& e, std::int64_t group) {
  std::string m = e.what();
  if (m.rfind("--pairs: ", 0) == 0) m = "--scores: " + m.substr(9);
  if (m.find("more than") != std::string::npos)
    m += " (a set holds at most " + std::to_string(kMaxScores) + " scores per dtype: pairs x --heads " +
         std::to_string(group) + ")";
  return SpecError(m);
}

}  // namespace

attention::PairSet plan_scores(const GoldenOptions& opt, const RunPlan& plan) {
  if (!plan.rope) throw SpecError("--scores: needs a RoPE spec (a sinusoidal encoding has no q and k to score)");
  if (opt.shard)
    throw SpecError("--scores: not with --shard (the scores are not split by token; write them in an unsharded run)");
  const std::int64_t G = plan.H;
  attention::PairSet set;
  try {
    set = attention::parse_pairs(opt.scores, kMaxScores / G);
  } catch (const SpecError& e) {
    throw as_scores_error(e, G);
  }
  // The rounded values of every dtype, held as doubles and as the stored bytes, and one chunk's tokens.
  const double values = static_cast<double>(set.pairs.size()) * static_cast<double>(G);
  double bytes = values * 8 * 2 * static_cast<double>(plan.dtypes.size()) + 3.0 * kChunkValues * 8;
  io::require_memory(static_cast<std::uint64_t>(bytes), opt.max_memory, "--scores " + opt.scores);
  return set;
}

nlohmann::json write_scores(const GoldenOptions& opt, const RunPlan& plan, GoldenFiles& files) {
  const std::vector<attention::ScorePair>& pairs = plan.scores->pairs;
  const std::int64_t N = static_cast<std::int64_t>(pairs.size()), G = plan.H, D = plan.D;
  const std::size_t file = files.groups() - 1, gd = static_cast<std::size_t>(G * D), d = static_cast<std::size_t>(D);
  std::vector<std::int64_t> pos;
  pos.reserve(2 * pairs.size());
  std::int64_t lo = pairs.front().query, hi = lo;
  for (const attention::ScorePair& p : pairs) {
    pos.insert(pos.end(), {p.query, p.key});
    lo = std::min({lo, p.query, p.key});
    hi = std::max({hi, p.query, p.key});
  }
  files.group(file).write(0, 0, bytes_of(pos.data(), pos.size() * 8));
  // The generator is indexed by element: its first G * D q values are q[0] of the set, its first D k values k[0, 0].
  const std::vector<float> q = generate_inputs(opt.seed, InputStream::q, gd);
  const std::vector<float> k = generate_inputs(opt.seed, InputStream::k, d);
  files.group(file).write(1, 0, bytes_of(q.data(), q.size() * 4));
  files.group(file).write(2, 0, bytes_of(k.data(), k.size() * 4));

  attention::AttentionSpec spec;
  spec.group = static_cast<int>(G);
  const attention::AttentionEngine engine(opt.spec.rope, plan.seq_len, spec, hi,
                                          {.force_fallback = false, .threads = plan.threads});
  const std::size_t nd = plan.dtypes.size();
  std::vector<std::vector<double>> all(nd, std::vector<double>(static_cast<std::size_t>(G * N)));
  RoundingStats stats;
  const std::int64_t chunk = std::max<std::int64_t>(1, kChunkValues / (2 * G * D));
  for (std::int64_t p0 = 0; p0 < N; p0 += chunk) {
    const std::int64_t n = std::min(chunk, N - p0);
    attention::PairSet part;
    part.pairs.assign(pairs.begin() + p0, pairs.begin() + p0 + n);
    const attention::PairTokens tok = attention::pair_tokens(part);
    std::vector<Position> at;
    std::vector<double> qv, kv;
    for (std::int64_t p : tok.positions) {
      at.push_back(Position::uniform(p));  // text tokens: every stream of a multimodal spec at p
      qv.insert(qv.end(), q.begin(), q.end());
      kv.insert(kv.end(), k.begin(), k.end());
    }
    std::vector<std::vector<double>> buf(nd, std::vector<double>(static_cast<std::size_t>(G * n)));
    std::vector<attention::AttentionOut> out(nd);
    for (std::size_t i = 0; i < nd; ++i) out[i].scores = buf[i].data();
    engine.pairs(at, qv, kv, tok.query_token, tok.key_token, plan.dtypes, out, stats);
    for (std::size_t i = 0; i < nd; ++i)
      for (std::int64_t h = 0; h < G; ++h)
        std::copy_n(buf[i].begin() + h * n, n, all[i].begin() + h * N + p0);
  }
  for (std::size_t i = 0; i < nd; ++i) {
    const std::size_t sz = dtype_size(tensor_dtype(plan.dtypes[i]));
    std::vector<std::uint8_t> b(all[i].size() * sz);
    for (std::size_t j = 0; j < all[i].size(); ++j) store_element(b.data() + j * sz, all[i][j], plan.dtypes[i]);
    files.group(file).write(3 + i, 0, b);
  }
  return {{"argument", plan.scores->argument},
          {"pairs", N},
          {"positions", {{"min", lo}, {"max", hi}}},
          {"file", files.file_name(file)},
          {"group", G},
          {"query", "q[0]: token 0's q, heads 0.." + std::to_string(G - 1) + " (score_q)"},
          {"key", "k[0, 0]: token 0's k, head 0 (score_k)"},
          {"scale", "1/sqrt(" + std::to_string(D) + ")"},
          {"scale_binary64", engine.scale()},
          {"softcap", nullptr},
          {"engine", "attention::AttentionEngine: double-double with a proven error bound, MPFR ball-arithmetic "
                     "fallback (Ziv)"},
          {"fast_path_values", stats.fast_values},
          {"mpfr_fallback_values", stats.fallback_values}};
}

}  // namespace ropecheck::golden::detail
