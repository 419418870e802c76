// One hypothesis evaluated exactly: the MPFR reference with the mistake applied (positions rounded,
// shifted or wrapped, frequencies rounded or inverted, base / factor / rotary width / pairing / scaling
// / sections / LongRoPE lists changed, cos and sin exchanged, the attention factor dropped, squared,
// folded or replaced), per element of a golden output, with its class bound.
#include <cmath>
#include <cstring>

#include "internal.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/reference/scalar.hpp"

namespace ropecheck::checker::diagnose_detail {
// The checker's vocabulary from the modules below it.
using golden::GoldenSet;
using golden::ManifestTensor;
using io::Tensor;
using io::TensorDType;

// YaRN's get_mscale(factor, mscale) alone (what a kernel folds in when it forgets mscale_all_dim).
double mscale_of(const RopeSpec& r) {
  return yarn_get_mscale(effective_factor(r), r.scaling.mscale.value_or(1.0));
}

RopeSpec mistaken_spec(const RopeSpec& truth, const Mistake& m) {
  RopeSpec r = truth;
  if (m.base) r.base = *m.base;
  if (m.factor) r.scaling.factor = *m.factor;
  if (m.rotary_dim) r.rotary_dim = *m.rotary_dim;
  if (m.rotary_offset) r.rotary_offset = *m.rotary_offset;
  if (m.whole_head) {
    r.rotary_dim = r.head_dim;
    r.rotary_offset = 0;
  }
  if (m.swap_longrope_factors) {  // the other list, with the attention factor that goes with it
    std::swap(r.scaling.short_factor, r.scaling.long_factor);
    std::swap(r.scaling.short_mscale, r.scaling.long_mscale);
  }
  if (m.ignore_scaling) r.scaling = RopeScaling{};
  if (m.flip_truncate) r.scaling.truncate = !r.scaling.truncate;
  if (m.flip_layout) r.layout = r.layout == RopeLayout::half_split ? RopeLayout::interleaved : RopeLayout::half_split;
  if (m.flip_mrope_mode && r.mrope != MropeMode::none)
    r.mrope = r.mrope == MropeMode::chunked ? MropeMode::interleaved : MropeMode::chunked;
  return r;
}

// The MLA mistakes need an MLA set: a slice to misplace, q_nope to rotate or scale, a k_pe key, a YaRN
// mscale whose ratio differs from its numerator.
static bool evaluable_mla(const RopeSpec& truth, const Mistake& m) {
  const bool yarn_mscales = truth.scaling.type == ScalingType::yarn && truth.scaling.mscale && truth.scaling.mscale_all_dim;
  if (m.rotary_offset && (*m.rotary_offset == truth.rotary_offset || *m.rotary_offset < 0 ||
                          *m.rotary_offset > truth.head_dim - truth.rotary_dim))
    return false;
  if (m.whole_head && (!is_mla_layout(truth) || truth.rotary_dim == truth.head_dim)) return false;
  if (m.passthrough_mscale && (!is_mla_layout(truth) || !yarn_mscales || truth.rotary_dim == truth.head_dim)) return false;
  if (m.att == Mistake::Att::yarn_mscale &&
      (!yarn_mscales || yarn_attention_factor<double>(truth) == mscale_of(truth)))
    return false;
  if (m.first_position && truth.key_layout != KeyLayout::k_pe) return false;
  if (m.norm != Mistake::Norm::keep && !has_qk_norm(truth)) return false;  // a norm stage to get wrong
  return true;
}

bool evaluable(const RopeSpec& truth, const Mistake& m) {
  const ScalingType t = truth.scaling.type;
  if (m.ignore_scaling && t == ScalingType::proportional) return false;
  if (m.swap_longrope_factors && t != ScalingType::longrope) return false;
  if (m.factor && !(t == ScalingType::linear || t == ScalingType::yarn || t == ScalingType::llama3)) return false;
  if (m.base && (!(*m.base > 1) || *m.base == truth.base)) return false;
  // A rotary width of its own: prefix-partial RoPE without per-pair lists (LongRoPE) or sections (mrope).
  if (m.rotary_dim && (t == ScalingType::longrope || t == ScalingType::proportional || truth.mrope != MropeMode::none ||
                       *m.rotary_dim <= 0 || *m.rotary_dim % 2 != 0 || *m.rotary_dim > truth.head_dim - truth.rotary_offset))
    return false;
  return evaluable_mla(truth, m);
}

bool wraps(const GoldenSet& g, int bits) {
  for (const Position& p : g.positions())
    for (std::int64_t v : {p.t, p.h, p.w})
      if (wrapped_position(v, bits) != v) return true;
  return false;
}

std::int64_t wrapped_position(std::int64_t p, int bits) {
  if (bits == 16) return static_cast<std::int16_t>(static_cast<std::uint16_t>(static_cast<std::uint64_t>(p) & 0xFFFFu));
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(p) & 0xFFFFFFFFu));
}

struct MistakenTruth::State {
  const GoldenSet* g = nullptr;
  Mistake m;
  RopeSpec spec;
  std::vector<Real> inv;
  std::vector<double> log_freq;
  Real att{1}, table_factor{1};
  std::vector<int> pair_of, first_of;  // per channel: pair (-1 pass-through), whether it is the pair's first channel
  int P = 0, D = 0, H = 1;
  bool is_key = false;     // k_pe_rot's state: the slice alone, one head
  Real passthrough{1};     // what a pass-through channel is multiplied by (mla-yarn-mscale-on-nope)
  struct CosSin {
    Real c, s;
    double theta;
    bool finite;
  };
  std::unordered_map<std::int64_t, CosSin> cache;  // token * P + pair

  const CosSin& cos_sin(std::int64_t token, int j) {
    const std::int64_t key = token * P + j;
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    int stream = spec.mrope == MropeMode::none ? 0 : mrope_stream(spec, j);
    if (m.swap_hw_streams && stream > 0) stream = 3 - stream;
    // mla-k-pe-one-position: every key at the first token's position.
    const Position& pos = g->positions()[is_key && m.first_position ? 0 : static_cast<std::size_t>(token)];
    std::int64_t p = stream == 0 ? pos.t : (stream == 1 ? pos.h : pos.w);
    if (m.position_wrap_bits) p = wrapped_position(p, *m.position_wrap_bits);
    p += m.position_shift;
    double pd = static_cast<double>(p);
    if (m.position_rounding) pd = round_to_double(Real(pd), *m.position_rounding);  // +-inf past the dtype's range
    CosSin cs;
    cs.finite = std::isfinite(pd);
    if (cs.finite) {
      const Real theta = Real(pd) * inv[static_cast<std::size_t>(j)];
      cs.c = cos(theta);
      cs.s = sin(theta);
      if (m.negate_sin) cs.s = -cs.s;
      if (m.swap_cos_sin) std::swap(cs.c, cs.s);
      cs.theta = std::fabs(to_f64(theta));
    } else {
      cs.theta = 0;
    }
    return cache.emplace(key, std::move(cs)).first->second;
  }
  double input(const std::string& base, std::int64_t i) const {
    const Tensor& t = g->tensor(base == "q_rot" ? "q" : (base == "k_pe_rot" ? "k_pe" : "k"));
    float v;
    std::memcpy(&v, t.data.data() + 4 * static_cast<std::size_t>(i), 4);
    return static_cast<double>(v);
  }
  // The norm stage of the output's input (q_rot: q_norm, k_rot: k_norm), nullptr when none.
  // (Looked up per element: the common case, no norm stage, answers without building a string.)
  const RmsNormStage* norm(const std::string& base) const {
    if (!has_qk_norm(g->spec().rope)) return nullptr;
    return base == "q_rot" ? norm_stage(g->spec().rope, "q") : base == "k_rot" ? norm_stage(g->spec().rope, "k") : nullptr;
  }
  std::unordered_map<std::int64_t, std::vector<Real>> normed;  // head's first flat index * 2 + (k_rot)
  // What the rotation takes at element i: the input, normalized exactly (with the norm mistake) under a
  // norm stage (formulas/qk_norm.hpp's rms_norm_head, in the working precision).
  Real in(const std::string& base, std::int64_t i) {
    const RmsNormStage* n = norm(base);
    if (n == nullptr) return Real(input(base, i));
    const std::int64_t row = i - i % D, key = row * 2 + (base == "k_rot");
    auto it = normed.find(key);
    if (it == normed.end()) {
      using N = Mistake::Norm;
      const std::int64_t span = m.norm == N::whole_row ? H * D : D, first = m.norm == N::whole_row ? row - row % (H * D) : row;
      Real sum(0);
      for (std::int64_t c = 0; c < span; ++c) sum += Real(input(base, first + c)) * Real(input(base, first + c));
      const Real mean = sum / Real(static_cast<double>(m.norm == N::mean_over_pairs ? D / 2 : span));
      const Real scale = Real(1) / sqrt(mean + Real(m.norm == N::eps_omitted ? 0.0 : n->eps));
      const bool one_plus = (n->weight_form == NormWeightForm::one_plus_w) != (m.norm == N::weight_form_swapped);
      std::vector<Real> y(static_cast<std::size_t>(D));
      for (std::int64_t c = 0; c < D; ++c) {
        const Real w(n->weight[static_cast<std::size_t>(c)]);
        y[static_cast<std::size_t>(c)] = Real(input(base, row + c)) * scale;
        if (m.norm != N::weight_omitted) y[static_cast<std::size_t>(c)] *= one_plus ? Real(1) + w : w;
      }
      it = normed.emplace(key, std::move(y)).first;
    }
    return it->second[static_cast<std::size_t>(i - row)];
  }
  // The norm stage's relative term (ERROR_MODEL.md section 17), 0 without one.
  double norm_term(const std::string& base) const { return norm(base) ? accuracy::qk_norm_relative_term(spec.head_dim) : 0; }
};

MistakenTruth::MistakenTruth(const GoldenSet& g, const Mistake& m) : s_(std::make_unique<State>()) {
  init(*s_, g, m, g.spec().rope, g.heads());
  if (g.spec().rope.key_layout == KeyLayout::k_pe) {  // k_pe_rot: the slice alone, one head
    key_ = std::make_unique<State>();
    key_->is_key = true;
    init(*key_, g, m, key_rope(g.spec().rope), 1);
  }
}

void MistakenTruth::init(State& s, const GoldenSet& g, const Mistake& m, const RopeSpec& truth, int heads) {
  s.g = &g;
  s.m = m;
  s.spec = mistaken_spec(truth, m);
  const RopeFrequencies<Real> f = rope_frequencies<Real>(s.spec, g.seq_len());
  s.inv = f.inv_freq;
  for (Real& w : s.inv) {
    if (m.reciprocal_freq && w != 0) w = Real(1) / w;
    if (m.freq_rounding) w = Real(round_to_double(w, *m.freq_rounding));
  }
  for (const Real& w : s.inv) {
    const double wd = to_f64(w);
    s.log_freq.push_back(wd == 0 ? 0.0 : std::fabs(std::log(std::fabs(wd))));
  }
  s.att = f.attention_factor;
  if (m.att == Mistake::Att::missing) s.att = Real(1);
  if (m.att == Mistake::Att::squared) s.att = f.attention_factor * f.attention_factor;
  if (m.att == Mistake::Att::folded_in_table) s.table_factor = f.attention_factor;
  const auto yarn_mscale = [&] {
    return yarn_get_mscale(Real(effective_factor(truth)), Real(truth.scaling.mscale.value_or(1.0)));
  };
  if (m.att == Mistake::Att::yarn_mscale) s.att = yarn_mscale();
  if (m.passthrough_mscale) s.passthrough = yarn_mscale();
  if (m.attention) s.att = Real(*m.attention);
  s.P = rope_pairs(s.spec);
  s.D = s.spec.head_dim;
  s.H = heads;
  s.pair_of.assign(static_cast<std::size_t>(s.D), -1);
  s.first_of.assign(static_cast<std::size_t>(s.D), 0);
  for (int j = 0; j < s.P; ++j) {
    const auto [a, b] = pair_channels(s.spec, j);
    if (!is_rotary_channel(s.spec, a) || !is_rotary_channel(s.spec, b)) continue;
    s.pair_of[static_cast<std::size_t>(a)] = s.pair_of[static_cast<std::size_t>(b)] = j;
    s.first_of[static_cast<std::size_t>(a)] = 1;
  }
}
MistakenTruth::~MistakenTruth() = default;
MistakenTruth::MistakenTruth(MistakenTruth&&) noexcept = default;

unsigned MistakenTruth::precision_bits(const GoldenSet& g, const Mistake& m) {
  double max_pos = 0;
  for (const Position& p : g.positions())
    for (std::int64_t v : {p.t, p.h, p.w}) {
      const std::int64_t q = m.position_wrap_bits ? wrapped_position(v, *m.position_wrap_bits) : v;
      max_pos = std::max(max_pos, std::fabs(static_cast<double>(q)));
    }
  max_pos = max_pos * (1 + 1.0 / 64) + std::fabs(static_cast<double>(m.position_shift)) + 2;  // rounded to bf16 / f16
  // The largest frequency the mistake computes with (binary64 is enough to size the precision).
  const RopeFrequencies<double> f = rope_frequencies<double>(mistaken_spec(g.spec().rope, m), g.seq_len());
  double w = 0;
  for (double x : f.inv_freq) w = std::max(w, std::fabs(m.reciprocal_freq && x != 0 ? 1 / x : x));
  return working_precision_bits(53, max_pos * w * 1.01);
}

MistakenTruth::Value MistakenTruth::at(const std::string& base, std::int64_t i, accuracy::AccuracyClass c, DType dt) {
  State& s = base == "k_pe_rot" && key_ ? *key_ : *s_;
  Value v;
  const bool table = base == "cos" || base == "sin";
  if (table) {
    const std::int64_t token = i / s.P;
    const int j = static_cast<int>(i % s.P);
    const State::CosSin& cs = s.cos_sin(token, j);
    if (!cs.finite) return {std::nan(""), 0, false};
    v.value = to_f64((base == "cos" ? cs.c : cs.s) * s.table_factor);
    const double M = to_f64(s.table_factor);
    const accuracy::ClassBound b = accuracy::class_bound(c, dt, accuracy::Quantity::table);
    const double rel = b.relative({cs.theta, s.log_freq[static_cast<std::size_t>(j)]});
    v.allowed = rel * M + b.floor;
    v.saturated = rel >= 1;
    return v;
  }
  const std::int64_t D = s.D;
  const std::int64_t token = i / (s.H * D);
  const int ch = static_cast<int>(i % D);
  const int j = s.pair_of[static_cast<std::size_t>(ch)];
  const double nt = s.norm_term(base);  // a norm stage's term, as the check adds it
  if (j < 0) {
    const Real x = s.in(base, i);
    if (s.passthrough == 1) {
      v.value = to_f64(x);
      v.allowed = accuracy::class_bound(c, dt, accuracy::Quantity::passthrough).allowed({0, 0}, std::fabs(v.value)) +
                  nt * std::fabs(v.value);
      return v;
    }
    // Scaled by a factor (mla-yarn-mscale-on-nope): the product a rotation by 0 with that attention factor
    // makes, so the rotated channel's bound at angle 0.
    v.value = to_f64(x * s.passthrough);
    v.allowed = accuracy::class_bound(c, dt, accuracy::Quantity::rotated).allowed({0, 0}, std::fabs(v.value)) +
                nt * std::fabs(v.value);
    return v;
  }
  const auto [ca, cb] = pair_channels(s.spec, j);
  const std::int64_t row = i - ch;
  const Real xa = s.in(base, row + ca), xb = s.in(base, row + cb);
  const State::CosSin& cs = s.cos_sin(token, j);
  if (!cs.finite) return {std::nan(""), 0, false};
  const Real r = s.first_of[static_cast<std::size_t>(ch)] ? s.att * (xa * cs.c - xb * cs.s) : s.att * (xb * cs.c + xa * cs.s);
  v.value = to_f64(r);
  const double M = to_f64(s.att) * (std::fabs(to_f64(xa)) + std::fabs(to_f64(xb)));
  const accuracy::ClassBound b = accuracy::class_bound(c, dt, accuracy::Quantity::rotated);
  const double rel = b.relative({cs.theta, s.log_freq[static_cast<std::size_t>(j)]}) + nt;
  v.allowed = rel * M + b.floor;
  v.saturated = rel >= 1;
  return v;
}

}  // namespace ropecheck::checker::diagnose_detail
