// `drift --scores` (drift/scores.hpp, drift/DRIFT.md "Scores"): the exact side (correctly rounded scores
// from the attention engine, the exact rotated vectors and the class's bounds), then every kernel's rotated
// q and k scored with a compensated dot product against them.
#include <chrono>
#include <cmath>
#include <map>
#include <memory>

#include <fmt/core.h>

#include "ropecheck/accuracy/attention_bounds.hpp"
#include "ropecheck/accuracy/element_geometry.hpp"
#include "ropecheck/attention/engine.hpp"
#include "ropecheck/attention/pairs.hpp"
#include "ropecheck/drift/exact.hpp"
#include "ropecheck/drift/sampling.hpp"
#include "ropecheck/drift/scores.hpp"
#include "ropecheck/drift/swept_kernel.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/golden/input_generator.hpp"
#include "parallel.hpp"

namespace ropecheck::drift {

std::string default_score_pairs(std::int64_t N) {
  std::string s;
  for (std::int64_t q = 15; q < N - 1; q = 2 * q + 1) s += fmt::format("dist:{}:4,", q);
  s += fmt::format("dist:{}:4", N - 1);
  if (N >= 2) s += fmt::format(",tail:{}:2:127", N);
  return s;
}

namespace scores_detail {

// Every element array the run keeps is [token][head][head_dim]; their product is bounded so that a pair
// set over a long context (tail:L:N without a stride) is refused before it allocates about 60 bytes each.
constexpr std::int64_t kMaxScoreValues = std::int64_t{1} << 24;
// V's stream of golden's generator (q = 1, k = 2; drift/DRIFT.md "Scores").
constexpr auto kValueStream = golden::InputStream::v;

std::size_t at(std::int64_t v) { return static_cast<std::size_t>(v); }

struct ScoreSetup {
  attention::PairSet set;
  attention::PairTokens tokens;
  std::int64_t T = 0, seq_len = 0;
  int H = 0, D = 0;
  std::vector<float> xq, xk, v;                // inputs [T][H][D]
  std::vector<double> Q, K, Eq, Ek;            // exact rotated values and the class's bounds, [T][H][D]
  std::vector<std::vector<double>> exact;      // [head][pair] correctly rounded f64 scores
  std::map<std::int64_t, std::vector<std::int64_t>> rows;  // query token -> its pairs, in pair order
  double scale = 0;
  std::size_t off(std::int64_t t, int h) const { return at((t * H + h) * D); }
};

attention::PairSet parse_score_pairs(const ScoresOptions& o) {
  attention::PairSet set = attention::parse_pairs(o.pairs.empty() ? default_score_pairs(o.max_pos) : o.pairs,
                                                  kMaxScorePairs);
  for (const attention::ScorePair& p : set.pairs)
    if (std::max(p.query, p.key) >= kMaxSweepPositions)
      throw SpecError(fmt::format("--pairs: position {} is beyond the kernels' range [0, 2^24)", std::max(p.query, p.key)));
  return set;
}

void make_inputs(ScoreSetup& s, std::uint64_t seed) {
  const std::size_t n = at(s.T * s.H * s.D);
  s.xq.resize(n);
  s.xk.resize(n);
  s.v.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    s.xq[i] = golden::generate_input(seed, golden::InputStream::q, i);
    s.xk[i] = golden::generate_input(seed, golden::InputStream::k, i);
    s.v[i] = golden::generate_input(seed, kValueStream, i);
  }
}

// The exact rotated q and k (nearest doubles of the double-double values) and the class's per-channel
// bounds for the storage dtype (ERROR_MODEL.md 16.2: rotated_errors at the token's position).
void exact_vectors(ScoreSetup& s, const EncodingSpec& spec, const ScoresOptions& o) {
  const ExactRope ex(spec.rope, s.seq_len);
  const int P = ex.pairs();
  std::vector<double> w;
  for (int j = 0; j < P; ++j) w.push_back(ex.inv_freq(j));
  const accuracy::RopeGeometry g(spec.rope, w, ex.attention_factor_f64());
  const std::size_t n = at(s.T * s.H * s.D);
  s.Q.resize(n);
  s.K.resize(n);
  s.Eq.resize(n);
  s.Ek.resize(n);
  std::vector<DD> c(at(P)), sn(at(P));
  std::vector<double> x(at(s.D));
  for (std::int64_t t = 0; t < s.T; ++t) {
    const Position pos = Position::uniform(s.tokens.positions[at(t)]);
    ex.cos_sin_row(pos, c, sn);
    for (int h = 0; h < s.H; ++h)
      for (int which = 0; which < 2; ++which) {
        const float* in = (which == 0 ? s.xq : s.xk).data() + s.off(t, h);
        double* out = (which == 0 ? s.Q : s.K).data() + s.off(t, h);
        for (int ch = 0; ch < s.D; ++ch) out[ch] = x[at(ch)] = in[ch];  // pass-through channels stay
        for (int j = 0; j < P; ++j) {
          const auto [ia, ib] = pair_channels(spec.rope, j);
          const RotatedPair r = exact_rotation(in[ia], in[ib], c[at(j)], sn[at(j)], ex.attention_factor());
          out[ia] = r.a.hi + r.a.lo;
          out[ib] = r.b.hi + r.b.lo;
        }
        const std::vector<double> e = accuracy::rotated_errors(g, o.bound_class, o.storage, pos, x);
        std::copy(e.begin(), e.end(), (which == 0 ? s.Eq : s.Ek).begin() + static_cast<std::ptrdiff_t>(s.off(t, h)));
      }
  }
}

void exact_scores(ScoreSetup& s, const EncodingSpec& spec, const ScoresOptions& o) {
  std::int64_t top = 0;
  for (std::int64_t p : s.tokens.positions) top = std::max(top, p);
  const attention::AttentionEngine engine(spec.rope, s.seq_len, attention::AttentionSpec{}, top,
                                          {.force_fallback = false, .threads = o.threads});
  s.scale = engine.scale();
  const std::vector<Position> pos = [&] {
    std::vector<Position> p;
    for (std::int64_t x : s.tokens.positions) p.push_back(Position::uniform(x));
    return p;
  }();
  std::vector<double> q(at(s.T * s.D)), k(q.size());
  const DType f64 = DType::f64;
  RoundingStats stats;
  for (int h = 0; h < s.H; ++h) {
    for (std::int64_t t = 0; t < s.T; ++t)
      for (int c = 0; c < s.D; ++c) {
        q[at(t * s.D + c)] = s.xq[s.off(t, h) + at(c)];
        k[at(t * s.D + c)] = s.xk[s.off(t, h) + at(c)];
      }
    std::vector<double> out(s.set.pairs.size());
    const attention::AttentionOut o64{.scores = out.data(), .outputs = nullptr};
    engine.pairs(pos, q, k, s.tokens.query_token, s.tokens.key_token, std::span(&f64, 1), std::span(&o64, 1), stats);
    s.exact.push_back(std::move(out));
  }
}

ScoreSetup make_score_setup(const EncodingSpec& spec, const ScoresOptions& o) {
  ScoreSetup s;
  s.set = check_scores_options(spec, o);
  s.tokens = attention::pair_tokens(s.set);
  s.T = static_cast<std::int64_t>(s.tokens.positions.size());
  s.H = o.heads;
  s.D = spec.rope.head_dim;
  s.seq_len = o.seq_len.value_or(o.max_pos);
  for (std::size_t p = 0; p < s.set.pairs.size(); ++p) s.rows[s.tokens.query_token[p]].push_back(static_cast<std::int64_t>(p));
  make_inputs(s, o.seed);
  exact_vectors(s, spec, o);
  exact_scores(s, spec, o);
  return s;
}

// One pair and head: the kernel's score against the exact one, in every unit.
ScoreRecord score_record(const ScoreSetup& s, std::span<const double> rq, std::span<const double> rk, std::size_t p,
                         int h, const ScoresOptions& o) {
  const std::int64_t qt = s.tokens.query_token[p], kt = s.tokens.key_token[p];
  const std::size_t D = at(s.D);
  const std::span<const double> Qe(s.Q.data() + s.off(qt, h), D), Ke(s.K.data() + s.off(kt, h), D);
  ScoreRecord r;
  r.query = s.set.pairs[p].query;
  r.key = s.set.pairs[p].key;
  r.head = h;
  r.exact = s.exact[at(h)][p];
  const accuracy::ScoreBound b =
      accuracy::score_bound(o.bound_class, DType::f32, Qe, std::span(s.Eq.data() + s.off(qt, h), D), Ke,
                            std::span(s.Ek.data() + s.off(kt, h), D), s.scale, std::nullopt, r.exact);
  const double cand = s.scale * dd_dot(rq.subspan(s.off(qt, h), D), rk.subspan(s.off(kt, h), D));
  r.nonfinite = !std::isfinite(cand);
  // A non-finite score counts at the cap (metrics.hpp): twice the score's magnitude.
  r.error = r.nonfinite ? kUnitCap * b.magnitude : std::fabs(cand - r.exact);
  r.candidate = r.nonfinite ? r.exact + r.error : cand;
  r.f32_units = r.error / logit_rounding(r.exact, DType::f32);
  r.bf16_units = r.error / logit_rounding(r.exact, DType::bf16);
  r.rel = b.magnitude > 0 ? r.error / b.magnitude : 0.0;
  // The propagated part (the rotations' errors alone, 16.3): the scores here are formed exactly, so the
  // class's accumulation allowance does not apply. Saturated (or 0: the exact class) -> no ratio.
  if (b.propagated > 0 && b.propagated < b.magnitude) r.bound_ratio = r.error / b.propagated;
  return r;
}

// Each query row (per head): the softmax over its keys from the exact and from the kernel's scores.
void row_records(const ScoreSetup& s, ScoresKernel& k) {
  const std::size_t D = at(s.D);
  for (const auto& [qt, idx] : s.rows)
    for (int h = 0; h < s.H; ++h) {
      std::vector<double> ex, cand, v;
      bool bad = false;
      for (std::int64_t p : idx) {
        const ScoreRecord& r = k.records[at(p) * at(s.H) + at(h)];
        ex.push_back(r.exact);
        cand.push_back(r.candidate);
        bad = bad || r.nonfinite;
        const float* vp = s.v.data() + s.off(s.tokens.key_token[at(p)], h);
        v.insert(v.end(), vp, vp + D);
      }
      RowRecord row;
      row.query = s.tokens.positions[at(qt)];
      row.head = h;
      row.keys = static_cast<std::int64_t>(idx.size());
      row.error = bad ? RowError{kUnitCap, kUnitCap} : softmax_row_error(ex, cand, v, s.D);
      k.rows.push_back(row);
    }
}

ScoresKernel score_kernel(const ScoreSetup& s, SweptKernel& kern, const ScoresOptions& o) {
  ScoresKernel k;
  k.name = kern.name();
  k.description = kern.description();
  k.known_bad = kern.known_bad();
  std::vector<double> rq(s.xq.size()), rk(s.xk.size());
  kern.rotate(s.tokens.positions, s.H, s.xq, rq);
  kern.rotate(s.tokens.positions, s.H, s.xk, rk);
  k.records.reserve(s.set.pairs.size() * at(s.H));
  for (std::size_t p = 0; p < s.set.pairs.size(); ++p)
    for (int h = 0; h < s.H; ++h) k.records.push_back(score_record(s, rq, rk, p, h, o));
  row_records(s, k);
  summarize_scores(k);
  return k;
}

}  // namespace scores_detail

attention::PairSet check_scores_options(const EncodingSpec& spec, const ScoresOptions& o) {
  if (spec.family != Family::rope)
    throw SpecError("drift --scores measures RoPE only; '" + spec.name + "' is a sinusoidal spec");
  validate(spec);
  if (o.heads < 1 || o.heads > 64) throw SpecError("--heads must be in [1, 64], got " + std::to_string(o.heads));
  if (o.seq_len && *o.seq_len < 1) throw SpecError("--seq-len must be >= 1, got " + std::to_string(*o.seq_len));
  attention::PairSet set = scores_detail::parse_score_pairs(o);
  const std::int64_t T = static_cast<std::int64_t>(attention::pair_tokens(set).positions.size());
  if (T * o.heads * spec.rope.head_dim > scores_detail::kMaxScoreValues)
    throw SpecError(fmt::format("--pairs: {} tokens x {} heads x head_dim {} is more than 2^24 values; give tail: a "
                                "stride (tail:L:N:S) or fewer --heads",
                                T, o.heads, spec.rope.head_dim));
  return set;
}

ScoresResult run_scores(const EncodingSpec& spec, std::span<const plugin::KernelName> kernels,
                        const ScoresOptions& options) {
  using namespace scores_detail;
  const auto t0 = std::chrono::steady_clock::now();
  const ScoreSetup s = make_score_setup(spec, options);
  ScoresResult r;
  r.spec = spec;
  r.options = options;
  r.pairs = s.set.argument;
  r.pair_count = static_cast<std::int64_t>(s.set.pairs.size());
  r.seq_len = s.seq_len;
  r.scale = s.scale;
  const int threads = detail::resolve_threads(options.threads);
  for (const plugin::KernelName& n : kernels) {
    std::unique_ptr<SweptKernel> kern = make_swept_kernel(n, spec, options.storage, s.seq_len, threads, options.plugin);
    r.kernels.push_back(score_kernel(s, *kern, options));
    kern->finish();
    if (const SweptKernel::KernelFailures f = kern->failures(); f.failed > 0)
      r.kernel_failures.push_back(describe_failures(f));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace ropecheck::drift
