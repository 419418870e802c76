// set_files.hpp's attention file: the correctly rounded outputs of one block of tokens.
#include <string>
#include <vector>

#include "ropecheck/attention/engine.hpp"
#include "ropecheck/attention/set_files.hpp"

namespace ropecheck::attention {
namespace {

std::vector<double> doubles(std::span<const float> v) { return {v.begin(), v.end()}; }

std::string mask_text(const AttentionSpec& a) {
  std::string s = a.causal ? "causal" : "bidirectional";
  if (a.window > 0) s += ", sliding window of " + std::to_string(a.window) + " tokens";
  return s;
}

}  // namespace

double attention_file_memory(const Block& b, int group, int head_dim, int value_dim, std::size_t dtypes) {
  const double T = static_cast<double>(b.tokens);
  // inputs as floats and doubles, outputs as doubles and stored, and each worker's row of logits
  return T * (group * head_dim + head_dim + value_dim) * 12 + T * group * value_dim * 16 * static_cast<double>(dtypes) +
         T * 64 * 2;
}

io::DescribedFile attention_file(const SetFileContext& c, const Block& b, std::span<const float> q,
                                 std::span<const float> k, std::span<const float> v) {
  AttentionSpec a = c.attention;
  a.causal = b.causal;
  a.window = b.window;
  const std::int64_t T = b.tokens, G = a.group, D = c.rope->head_dim, Dv = value_dim(a, *c.rope);
  std::vector<Position> at;
  std::vector<std::int64_t> pos;
  for (std::int64_t i = 0; i < T; ++i) {
    at.push_back(Position::uniform(b.start + i));  // text tokens: every stream of a multimodal spec at p
    pos.push_back(b.start + i);
  }
  const AttentionEngine engine(*c.rope, c.seq_len, a, b.start + T - 1, {.force_fallback = false, .threads = c.threads});
  const std::size_t nd = c.dtypes.size(), n = static_cast<std::size_t>(T * G * Dv);
  std::vector<std::vector<double>> values(nd, std::vector<double>(n));
  std::vector<AttentionOut> out(nd);
  for (std::size_t i = 0; i < nd; ++i) out[i].outputs = values[i].data();
  RoundingStats stats;
  engine.block(at, doubles(q), doubles(k), doubles(v), c.dtypes, out, stats);

  io::DescribedFile f{"attention", "attention", {}, {}};
  f.tensors.push_back({io::make_i64("attention_positions", {T}, pos), "position of each token of the block"});
  f.tensors.push_back({io::make_f32("attention_q", {T, G, D}, {q.begin(), q.end()}),
                       "the queries of the block [tokens, group, head_dim]: the set's q of tokens 0..T-1"});
  f.tensors.push_back({io::make_f32("attention_k", {T, D}, {k.begin(), k.end()}),
                       "the keys of the block [tokens, head_dim]: the set's k of tokens 0..T-1, head 0"});
  f.tensors.push_back({io::make_f32("attention_v", {T, Dv}, {v.begin(), v.end()}),
                       "the values of the block [tokens, value_dim], from the generator's stream v"});
  if (!a.sinks.empty())
    f.tensors.push_back({io::make_f64("attention_sinks", {G}, a.sinks), "the sink logit of each query head"});
  for (std::size_t i = 0; i < nd; ++i) {
    const DType d = c.dtypes[i];
    io::Tensor t = io::make_zeros("attention_out." + std::string(to_string(d)), io::tensor_dtype(d), {T, G, Dv});
    const std::size_t sz = io::dtype_size(t.dtype);
    for (std::size_t j = 0; j < n; ++j) store_element(t.data.data() + j * sz, values[i][j], d);
    f.tensors.push_back({std::move(t), "softmax(t + mask) V of each token and query head [tokens, group, value_dim], "
                                       "correctly rounded once to " + std::string(to_string(d))});
  }
  f.record = {{"argument", b.argument},
              {"tokens", T},
              {"positions", {{"min", b.start}, {"max", b.start + T - 1}}},
              {"group", G},
              {"value_dim", Dv},
              {"mask", mask_text(a)},
              {"causal", a.causal},
              {"window", a.window},
              {"sinks", !a.sinks.empty()},
              {"scale_binary64", engine.scale()},
              {"softcap", a.softcap ? nlohmann::json(*a.softcap) : nlohmann::json(nullptr)},
              {"engine", "attention::AttentionEngine: double-double with a proven error bound, MPFR ball-arithmetic "
                         "fallback (Ziv)"},
              {"fast_path_values", stats.fast_values},
              {"mpfr_fallback_values", stats.fallback_values}};
  return f;
}

}  // namespace ropecheck::attention
