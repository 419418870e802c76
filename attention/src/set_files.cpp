// set_files.hpp: the engine's values for a golden set's attached files, chunked so that memory stays
// bounded whatever the pair set, and described for the manifest.
#include "ropecheck/attention/set_files.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "ropecheck/attention/engine.hpp"

namespace ropecheck::attention {
namespace {

// The engine takes q and k per token; each chunk of pairs gets its own tokens so that the copies of the
// (constant) vectors stay near 2^21 doubles (16 MiB) whatever the pair set.
constexpr std::int64_t kChunkValues = std::int64_t{1} << 21;

io::Tensor rounded_tensor(const std::string& name, DType d, std::vector<std::int64_t> shape,
                          const std::vector<double>& values) {
  io::Tensor t = io::make_zeros(name, io::tensor_dtype(d), std::move(shape));
  const std::size_t sz = io::dtype_size(t.dtype);
  for (std::size_t j = 0; j < values.size(); ++j) store_element(t.data.data() + j * sz, values[j], d);
  return t;
}

std::string rounded(DType d) { return ", correctly rounded once to " + std::string(to_string(d)); }

nlohmann::json softcap_json(const AttentionSpec& a) {
  return a.softcap ? nlohmann::json(*a.softcap) : nlohmann::json(nullptr);
}

std::string scale_text(const SetFileContext& c) {
  const int dim = scale_sqrt_dim(c.attention, *c.rope);
  return dim > 0 ? "1/sqrt(" + std::to_string(dim) + ")" : "given";
}

// Every pair's scores in every dtype, [dtype][head][pair].
std::vector<std::vector<double>> pair_values(const SetFileContext& c, const AttentionEngine& engine,
                                             const std::vector<ScorePair>& pairs, std::span<const float> q,
                                             std::span<const float> k, RoundingStats& stats) {
  const std::int64_t N = static_cast<std::int64_t>(pairs.size()), G = c.attention.group, D = c.rope->head_dim;
  const std::size_t nd = c.dtypes.size();
  std::vector<std::vector<double>> all(nd, std::vector<double>(static_cast<std::size_t>(G * N)));
  const std::int64_t chunk = std::max<std::int64_t>(1, kChunkValues / (2 * G * D));
  for (std::int64_t p0 = 0; p0 < N; p0 += chunk) {
    const std::int64_t n = std::min(chunk, N - p0);
    PairSet part;
    part.pairs.assign(pairs.begin() + p0, pairs.begin() + p0 + n);
    const PairTokens tok = pair_tokens(part);
    std::vector<Position> at;
    std::vector<double> qv, kv;
    for (std::int64_t p : tok.positions) {
      at.push_back(Position::uniform(p));  // text tokens: every stream of a multimodal spec at p
      qv.insert(qv.end(), q.begin(), q.end());
      kv.insert(kv.end(), k.begin(), k.end());
    }
    std::vector<std::vector<double>> buf(nd, std::vector<double>(static_cast<std::size_t>(G * n)));
    std::vector<AttentionOut> out(nd);
    for (std::size_t i = 0; i < nd; ++i) out[i].scores = buf[i].data();
    engine.pairs(at, qv, kv, tok.query_token, tok.key_token, c.dtypes, out, stats);
    for (std::size_t i = 0; i < nd; ++i)  // the engine's [head][chunk pairs] into [head][pairs]
      for (std::int64_t h = 0; h < G; ++h)
        std::copy_n(buf[i].begin() + h * n, n, all[i].begin() + h * N + p0);
  }
  return all;
}

}  // namespace

double score_file_memory(std::int64_t pairs, int group, std::size_t dtypes) {
  return static_cast<double>(pairs) * group * 8 * 2 * static_cast<double>(dtypes) + 3.0 * kChunkValues * 8;
}

io::DescribedFile score_file(const SetFileContext& c, const PairSet& set, std::span<const float> q,
                             std::span<const float> k) {
  const std::vector<ScorePair>& pairs = set.pairs;
  const std::int64_t N = static_cast<std::int64_t>(pairs.size()), G = c.attention.group, D = c.rope->head_dim;
  std::vector<std::int64_t> pos;
  std::int64_t lo = pairs.front().query, hi = lo;
  for (const ScorePair& p : pairs) {
    pos.insert(pos.end(), {p.query, p.key});
    lo = std::min({lo, p.query, p.key});
    hi = std::max({hi, p.query, p.key});
  }
  const AttentionEngine engine(*c.rope, c.seq_len, c.attention, hi, {.force_fallback = false, .threads = c.threads});
  RoundingStats stats;
  const std::vector<std::vector<double>> values = pair_values(c, engine, pairs, q, k, stats);
  io::DescribedFile f{"scores", "score", {}, {}};
  f.tensors.push_back({io::make_i64("score_positions", {N, 2}, pos), "(query position, key position) of each scored pair"});
  f.tensors.push_back({io::make_f32("score_q", {G, D}, {q.begin(), q.end()}),
                       "the query heads of the scores: q[0] (token 0's q, every head), one head group"});
  f.tensors.push_back({io::make_f32("score_k", {D}, {k.begin(), k.end()}),
                       "the key of the scores: k[0, 0] (token 0's k, head 0), the group's key / value head"});
  for (std::size_t i = 0; i < c.dtypes.size(); ++i)
    f.tensors.push_back({rounded_tensor("scores." + std::string(to_string(c.dtypes[i])), c.dtypes[i], {G, N}, values[i]),
                         "attention logit scale * <R(m) score_q[h], R(n) score_k> of each pair [group, pairs], R the "
                         "spec's rotation with its attention factor" + rounded(c.dtypes[i])});
  f.record = {{"argument", set.argument},
              {"pairs", N},
              {"positions", {{"min", lo}, {"max", hi}}},
              {"group", G},
              {"query", "q[0]: token 0's q, heads 0.." + std::to_string(G - 1) + " (score_q)"},
              {"key", "k[0, 0]: token 0's k, head 0 (score_k)"},
              {"scale", scale_text(c)},
              {"scale_binary64", engine.scale()},
              {"softcap", softcap_json(c.attention)},
              {"engine", "attention::AttentionEngine: double-double with a proven error bound, MPFR ball-arithmetic "
                         "fallback (Ziv)"},
              {"fast_path_values", stats.fast_values},
              {"mpfr_fallback_values", stats.fallback_values}};
  return f;
}

}  // namespace ropecheck::attention
