// AttentionBlock (attention_block.hpp): the attention file read and checked against the manifest, the
// exact logits from the attention engine, the exact rotated vectors from the RoPE engine.
#include "attention_block.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ropecheck/attention/engine.hpp"
#include "ropecheck/core/input_error.hpp"
#include "ropecheck/io/memory_budget.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/fast_rounding.hpp"

namespace ropecheck::checker::check_detail {

namespace attention_block {

std::vector<double> decoded_values(const io::Tensor& t) {
  std::vector<double> out(static_cast<std::size_t>(t.numel()));
  if (t.dtype == io::TensorDType::i64) {
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::int64_t x;
      std::memcpy(&x, t.data.data() + 8 * i, 8);
      out[i] = static_cast<double>(x);
    }
    return out;
  }
  decode(t.data.data(), t.dtype == io::TensorDType::f64 ? DType::f64 : DType::f32, out);
  return out;
}

std::int64_t int_field(const nlohmann::json& r, const char* key, const std::string& where) {
  if (!r.contains(key) || !r[key].is_number_integer())
    throw InputError(where + ": attention." + key + " missing or not an integer");
  return r[key].get<std::int64_t>();
}

// The manifest's record as the engine's problem (the scale: 1 / sqrt(head_dim), as golden --attention
// writes it, unless the recorded binary64 scale says otherwise).
attention::AttentionSpec spec_of(const golden::GoldenSet& g, const nlohmann::json& r, const std::string& where) {
  attention::AttentionSpec a;
  a.group = static_cast<int>(int_field(r, "group", where));
  a.value_dim = static_cast<int>(int_field(r, "value_dim", where));
  a.window = int_field(r, "window", where);
  if (!r.contains("causal") || !r["causal"].is_boolean()) throw InputError(where + ": attention.causal missing or not a boolean");
  a.causal = r["causal"].get<bool>();
  if (r.contains("softcap") && r["softcap"].is_number()) a.softcap = r["softcap"].get<double>();
  if (r.contains("sinks") && r["sinks"].is_boolean() && r["sinks"].get<bool>()) {
    const io::Tensor& s = g.tensor("attention_sinks");
    if (s.dtype != io::TensorDType::f64 || s.shape != std::vector<std::int64_t>{a.group})
      throw InputError(where + ": attention_sinks is not f64 [group]");
    a.sinks = decoded_values(s);
  }
  if (!r.contains("scale_binary64") || !r["scale_binary64"].is_number())
    throw InputError(where + ": attention.scale_binary64 missing or not a number");
  const double recorded = r["scale_binary64"].get<double>();
  if (recorded != 1 / std::sqrt(static_cast<double>(g.spec().rope.head_dim))) a.scale = recorded;
  try {
    attention::validate(a, g.spec().rope);
  } catch (const SpecError& e) {
    throw InputError(where + ": the attention record is not a valid problem: " + e.what());
  }
  return a;
}

// The set's record, or InputError when it has none.
const nlohmann::json& record_of(const golden::GoldenSet& g) {
  const nlohmann::json& m = g.manifest();
  if (!g.is_rope() || !m.contains("attention") || !m["attention"].is_object())
    throw InputError(g.dir().string() + ": the golden set has no attention block (write it with golden --attention)");
  return m["attention"];
}

AttentionParams params_of(const attention::AttentionSpec& a) {
  return {a.group, a.scale, a.scale_dim, a.softcap, a.causal, a.window, a.sinks, a.value_dim};
}

}  // namespace attention_block

AttentionParams block_params(const golden::GoldenSet& g) {
  return attention_block::params_of(attention_block::spec_of(g, attention_block::record_of(g), g.dir().string() + "/manifest.json"));
}

AttentionBlock::AttentionBlock(const golden::GoldenSet& g, int threads, std::uint64_t max_memory) {
  using attention_block::decoded_values;
  const nlohmann::json& r = attention_block::record_of(g);
  if (r.contains("argument") && r["argument"].is_string()) argument = r["argument"].get<std::string>();
  const attention::AttentionSpec a = attention_block::spec_of(g, r, g.dir().string() + "/manifest.json");
  params = attention_block::params_of(a);
  const RopeSpec& rope = g.spec().rope;
  const io::Tensor& tp = g.tensor("attention_positions");
  const io::Tensor& tq = g.tensor("attention_q");
  const io::Tensor& tk = g.tensor("attention_k");
  const io::Tensor& tv = g.tensor("attention_v");
  const io::Tensor& tt = g.tensor("attention_out.f64");
  T = tp.numel(), G = a.group, D = rope.head_dim, Dv = attention::value_dim(a, rope);
  using S = std::vector<std::int64_t>;
  if (tp.dtype != io::TensorDType::i64 || tp.shape != S{T} || T < 1 || tq.shape != S{T, G, D} || tk.shape != S{T, D} ||
      tv.shape != S{T, Dv} || tt.shape != S{T, G, Dv})
    throw InputError(g.dir().string() + ": the attention file's tensors disagree with its record (attention_positions "
                     "[T], attention_q [T][group][head_dim], attention_k [T][head_dim], attention_v [T][value_dim], "
                     "attention_out.f64 [T][group][value_dim])");
  // Every visible logit is held (a causal block of T tokens has T (T + 1) / 2 per head), with the inputs,
  // the rotated vectors and one class's bounds on them, as doubles.
  const double logit_count = static_cast<double>(G) * static_cast<double>(attention_score_count(params, T));
  const double t = static_cast<double>(T), g1 = static_cast<double>(G + 1), hd = static_cast<double>(D),
               gdv = static_cast<double>(G * Dv), dv = static_cast<double>(Dv);
  io::require_memory(static_cast<std::uint64_t>(8 * (logit_count + 5.0 * t * g1 * hd + 2.0 * t * gdv + t * dv)),
                     max_memory, "check of the attention block " + argument);
  std::int64_t hi = 0;
  for (double x : decoded_values(tp)) {
    pos.push_back(static_cast<std::int64_t>(x));
    hi = std::max(hi, std::abs(pos.back()));
  }
  q = decoded_values(tq), k = decoded_values(tk), v = decoded_values(tv), truth = decoded_values(tt);
  for (const std::vector<double>* x : {&q, &k, &v})
    if (!std::all_of(x->begin(), x->end(), [](double e) { return std::isfinite(e); }))
      throw InputError(g.dir().string() + ": the attention file's inputs are not all finite");
  std::vector<Position> at;
  for (std::int64_t p : pos) at.push_back(Position::uniform(p));  // text tokens (GOLDEN_FORMAT.md)

  // The exact logits, rounded once to binary64 (the probabilities and the spread are computed from them).
  const attention::AttentionEngine engine(rope, g.seq_len(), a, hi, {.force_fallback = false, .threads = threads});
  scale = engine.scale();
  offset.assign(static_cast<std::size_t>(T) + 1, 0);
  for (std::int64_t i = 0; i < T; ++i) offset[static_cast<std::size_t>(i) + 1] = offset[static_cast<std::size_t>(i)] + keys(i).size();
  logits.assign(static_cast<std::size_t>(G * offset.back()), 0.0);
  const DType f64 = DType::f64;
  attention::AttentionOut lo{logits.data(), nullptr};
  RoundingStats stats;
  engine.block(at, q, k, {}, std::span<const DType>(&f64, 1), std::span<const attention::AttentionOut>(&lo, 1), stats);

  // The exact rotated vectors (nearest doubles), what score_bound weighs each channel's error with.
  const RopeRoundingEngine rot(rope, g.seq_len(), hi);
  Q.assign(q.size(), 0.0);
  K.assign(k.size(), 0.0);
  for (std::int64_t i = 0; i < T; ++i) {
    const std::size_t gd = static_cast<std::size_t>(G * D), d = static_cast<std::size_t>(D), ii = static_cast<std::size_t>(i);
    RoundedOut oq, ok;
    oq.rot = Q.data() + ii * gd;
    ok.rot = K.data() + ii * d;
    rot.evaluate(at[ii], std::span<const double>(q).subspan(ii * gd, gd), static_cast<int>(G), std::span<const DType>(&f64, 1),
                 std::span<const RoundedOut>(&oq, 1), stats);
    rot.evaluate(at[ii], std::span<const double>(k).subspan(ii * d, d), 1, std::span<const DType>(&f64, 1),
                 std::span<const RoundedOut>(&ok, 1), stats);
  }
  geo.emplace(rope, rope_frequencies<double>(rope, g.seq_len()).inv_freq, g.attention_factor());
}

AttentionBlock::ClassErrors AttentionBlock::class_errors(accuracy::AccuracyClass c, DType dt) const {
  ClassErrors e;
  const std::size_t d = static_cast<std::size_t>(D);
  for (std::int64_t i = 0; i < T; ++i) {
    const Position at = Position::uniform(pos[static_cast<std::size_t>(i)]);
    for (std::int64_t h = 0; h < G; ++h) {
      const std::vector<double> x =
          accuracy::rotated_errors(*geo, c, dt, at, std::span<const double>(q).subspan(static_cast<std::size_t>(i * G + h) * d, d));
      e.Eq.insert(e.Eq.end(), x.begin(), x.end());
    }
    const std::vector<double> y = accuracy::rotated_errors(*geo, c, dt, at, std::span<const double>(k).subspan(static_cast<std::size_t>(i) * d, d));
    e.Ek.insert(e.Ek.end(), y.begin(), y.end());
  }
  return e;
}

// The probabilities in binary64 from the binary64 logits: relative errors of a few 2^-53 times the
// spread, far inside the (1 + g) slack output_bound carries (ERROR_MODEL.md 16.4, g = 1/32), as
// tests/attention/test_recipes.cpp validated the bound with.
void AttentionBlock::row(const ClassErrors& e, accuracy::AccuracyClass c, DType dt, std::int64_t i, std::int64_t h,
                         Row& out) const {
  const AttentionKeys kr = keys(i);
  const std::size_t n = static_cast<std::size_t>(kr.size()), d = static_cast<std::size_t>(D);
  const double* t = logits.data() + static_cast<std::size_t>(h * offset.back() + offset[static_cast<std::size_t>(i)]);
  const bool sink = !params.sinks.empty();
  const double z_sink = sink ? params.sinks[static_cast<std::size_t>(h)] : 0.0;
  double mx = sink ? z_sink : t[0], lo = mx;
  for (std::size_t j = 0; j < n; ++j) mx = std::max(mx, t[j]), lo = std::min(lo, t[j]);
  out.p.resize(n);
  out.eps.assign(n, 0.0);
  double z = sink ? std::exp(z_sink - mx) : 0.0;
  for (std::size_t j = 0; j < n; ++j) z += out.p[j] = std::exp(t[j] - mx);
  for (double& x : out.p) x /= z;
  out.p_sink = sink ? std::exp(z_sink - mx) / z : 0.0;
  out.spread = mx - lo;
  if (c == accuracy::AccuracyClass::exact) return;  // checked by identity: no logit allowance
  const std::size_t qo = static_cast<std::size_t>(i * G + h) * d;
  for (std::size_t j = 0; j < n; ++j) {
    const std::size_t ko = (static_cast<std::size_t>(kr.first) + j) * d;
    out.eps[j] = accuracy::score_bound(c, dt, std::span<const double>(Q).subspan(qo, d), std::span<const double>(e.Eq).subspan(qo, d),
                                       std::span<const double>(K).subspan(ko, d), std::span<const double>(e.Ek).subspan(ko, d),
                                       scale, params.softcap, t[j])
                     .internal;
  }
}

}  // namespace ropecheck::checker::check_detail
