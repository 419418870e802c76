// The correct-rounding engines: RopeRoundingEngine and SinusoidalRoundingEngine run the
// double-double fast path for a whole row and settle what it leaves with the MPFR fallback. See
// fast_rounding.hpp for the overview.
#include <cmath>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fast_rounding_internal.hpp"
#include "ropecheck/reference/fast_rounding.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"

namespace ropecheck {
namespace {

using fast_rounding_detail::AngleIn;
using fast_rounding_detail::kInf;
using fast_rounding_detail::rotate_head;
using fast_rounding_detail::RotIn;
using fast_rounding_detail::sincos_batch;
using fast_rounding_detail::ZivInputs;
using fast_rounding_detail::ziv_round;
using fast_rounding_detail::ZivQuantity;

// An exact double rounded to t (pass-through channels).
double round_exact(double x, DType t) {
  if (const std::optional<double> r = round_dd(x, 0.0, 0.0, t)) return *r;
  MpfrValue m(64);
  mpfr_set_d(m.get(), x, MPFR_RNDN);
  return round_to_double(m.get(), t);
}

constexpr mpfr_prec_t kStoredBits = RopeRoundingEngine::kZivMaxBits + 128;
constexpr long kStoredGuardBits = kStoredBits - 64;  // stored values: relative error <= 2^-kStoredGuardBits
// Relative error of the triple-double inverse frequency: splitting gives <= 2^-159; the stored
// value adds 2^-kStoredGuardBits. 2^-150 is used.
constexpr double kInvRelErr = 0x1p-150;

std::unique_ptr<MpfrValue> stored_copy(const Real& v) {
  auto m = std::make_unique<MpfrValue>(kStoredBits);
  mpfr_set(m->get(), v.backend().data(), MPFR_RNDN);
  return m;
}

std::array<double, 3> triple_of(mpfr_srcptr v) { return triple_double_of(v, kStoredBits + 64); }

void check_position(std::int64_t p) {
  if (p > kMaxPosition || p < -kMaxPosition)
    throw std::invalid_argument("ropecheck: position " + std::to_string(p) + " is beyond +-2^53");
}

void check_max_position(std::int64_t m) {
  if (m > kMaxPosition || m < -kMaxPosition)
    throw SpecError("max_abs_position " + std::to_string(m) + " is beyond 2^53");
}

// Per-thread scratch for evaluate().
struct Scratch {
  std::vector<AngleIn> angles;
  std::vector<SinCosDD> sc;
  std::vector<unsigned char> ok;
  std::vector<DD> y;
  std::vector<double> e;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// RoPE engine

struct RopeRoundingEngine::Impl {
  int P = 0, D = 0;
  std::vector<int> stream;      // per pair
  std::vector<RotIn> channels;  // per pair
  std::vector<std::array<double, 3>> inv;
  std::vector<std::unique_ptr<MpfrValue>> inv_mp;
  std::vector<int> passthrough;
  std::unique_ptr<MpfrValue> att_mp, zero_mp;
  DD att;
  bool att_one = false, att_exact = false;
  double att_rel_err = 0.0;
  EngineOptions options;
};

RopeRoundingEngine::RopeRoundingEngine(const RopeSpec& rope, std::optional<std::int64_t> seq_len,
                                       std::int64_t max_abs_position, EngineOptions options)
    : impl_(std::make_unique<Impl>()) {
  check_max_position(max_abs_position);
  EncodingSpec spec;
  spec.name = "rope";
  spec.family = Family::rope;
  spec.rope = rope;
  validate(spec);
  Impl& m = *impl_;
  m.options = options;
  m.P = rope_pairs(rope);
  m.D = rope.head_dim;
  {
    ScopedPrecision prec(static_cast<unsigned>(kStoredBits));
    const RopeFrequencies<Real> f = rope_frequencies<Real>(rope, seq_len);
    for (const Real& v : f.inv_freq) m.inv_mp.push_back(stored_copy(v));
    m.att_mp = stored_copy(f.attention_factor);
  }
  std::vector<bool> covered(static_cast<std::size_t>(m.D), false);
  for (int j = 0; j < m.P; ++j) {
    m.stream.push_back(mrope_stream(rope, j));
    const auto [ia, ib] = pair_channels(rope, j);
    m.channels.push_back({ia, ib});
    covered[static_cast<std::size_t>(ia)] = covered[static_cast<std::size_t>(ib)] = true;
    m.inv.push_back(triple_of(m.inv_mp[static_cast<std::size_t>(j)]->get()));
  }
  for (int ch = 0; ch < m.D; ++ch)
    if (!covered[static_cast<std::size_t>(ch)]) m.passthrough.push_back(ch);
  const std::array<double, 3> att3 = triple_of(m.att_mp->get());
  m.att = {att3[0], att3[1]};
  m.att_one = mpfr_cmp_ui(m.att_mp->get(), 1) == 0;
  m.att_exact = mpfr_cmp_d(m.att_mp->get(), att3[0]) == 0;
  m.att_rel_err = m.att_exact ? 0.0 : 0x1p-104;
  m.zero_mp = std::make_unique<MpfrValue>(2);
  mpfr_set_zero(m.zero_mp->get(), 1);
}

RopeRoundingEngine::~RopeRoundingEngine() = default;
RopeRoundingEngine::RopeRoundingEngine(RopeRoundingEngine&&) noexcept = default;
RopeRoundingEngine& RopeRoundingEngine::operator=(RopeRoundingEngine&&) noexcept = default;

int RopeRoundingEngine::pairs() const { return impl_->P; }
int RopeRoundingEngine::head_dim() const { return impl_->D; }
double RopeRoundingEngine::attention_factor() const { return impl_->att.hi; }

// One normalized head: its rotation inputs x * f (exact), s = 1 / sqrt(mean(x^2) + eps) and att * s.
// Relative errors at kStoredBits: the mean and the sum with eps are rounded once each, rec_sqrt once, so
// s is within 2^(1 - kStoredBits); att (2^-kStoredGuardBits) times s, rounded once: att * s is within
// 2^-(kStoredGuardBits - 1) (kNormGuardBits). The sum of squares is exact (f32 squares span < 600 bits).
struct RopeRoundingEngine::HeadScale {
  bool normed = false, exact = false;
  std::vector<double> xw;
  std::unique_ptr<MpfrValue> s_mp, att_mp;
  DD att;
};

namespace {
constexpr long kNormGuardBits = kStoredGuardBits - 1;

// A pass-through channel of a normalized head, s * (x f): a zero angle (cos 1, sin 0) with s as the
// factor, settled in MPFR (rare: partial rotary only).
void normed_passthrough(mpfr_srcptr zero, mpfr_srcptr s, double xf, std::span<const DType> dtypes,
                        std::span<const RoundedOut> out, std::size_t at, RoundingStats& stats) {
  ZivInputs in;
  in.inv = zero;
  in.att = s;
  in.guard_bits = kNormGuardBits;
  double results[4];
  unsigned char need[4];
  for (std::size_t d = 0; d < dtypes.size(); ++d) need[d] = out[d].rot != nullptr;
  stats.fallback_values += ziv_round(in, ZivQuantity::rot, xf, 0.0, dtypes, results, need);
  for (std::size_t d = 0; d < dtypes.size(); ++d)
    if (out[d].rot != nullptr) out[d].rot[at] = results[d];
}
}  // namespace

void RopeRoundingEngine::evaluate(const Position& pos, std::span<const double> x, int heads,
                                  std::span<const DType> dtypes, std::span<const RoundedOut> out,
                                  RoundingStats& stats) const {
  evaluate_heads(pos, x, heads, nullptr, dtypes, out, stats);
}

void RopeRoundingEngine::evaluate_normed(const Position& pos, std::span<const double> x, int heads,
                                         std::span<const RmsNormStage* const> norms, std::span<const DType> dtypes,
                                         std::span<const RoundedOut> out, RoundingStats& stats) const {
  const Impl& m = *impl_;
  const std::size_t D = static_cast<std::size_t>(m.D);
  if (heads < 0 || norms.size() != static_cast<std::size_t>(heads) || x.size() < static_cast<std::size_t>(heads) * D)
    throw std::invalid_argument("ropecheck: evaluate_normed: one norm per head and heads * head_dim values");
  std::vector<HeadScale> scales(static_cast<std::size_t>(heads));
  std::vector<double> xw(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(heads) * D));
  for (std::size_t h = 0; h < scales.size(); ++h) {
    const RmsNormStage* n = norms[h];
    if (n == nullptr) continue;
    if (n->weight.size() != D) throw std::invalid_argument("ropecheck: evaluate_normed: the norm's weights are not filled in");
    HeadScale& hs = scales[h];
    hs.normed = true;
    MpfrValue sum(kStoredBits), sq(128);
    mpfr_set_zero(sum.get(), 1);
    bool exact = true;
    for (std::size_t c = 0; c < D; ++c) {
      const double v = x[h * D + c];
      if (!std::isfinite(v)) throw std::invalid_argument("ropecheck: evaluate_normed: x must be finite");
      mpfr_set_d(sq.get(), v, MPFR_RNDN);
      exact = mpfr_sqr(sq.get(), sq.get(), MPFR_RNDN) == 0 && exact;  // exact: an f32 square has 48 bits
      exact = mpfr_add(sum.get(), sum.get(), sq.get(), MPFR_RNDN) == 0 && exact;
      xw[h * D + c] = v * norm_weight_factor(*n, static_cast<int>(c));  // exact (validate: <= 29-bit factor)
    }
    exact = mpfr_div_ui(sum.get(), sum.get(), static_cast<unsigned long>(D), MPFR_RNDN) == 0 && exact;
    exact = mpfr_add_d(sum.get(), sum.get(), n->eps, MPFR_RNDN) == 0 && exact;
    hs.s_mp = std::make_unique<MpfrValue>(kStoredBits);
    exact = mpfr_rec_sqrt(hs.s_mp->get(), sum.get(), MPFR_RNDN) == 0 && exact;
    hs.att_mp = std::make_unique<MpfrValue>(kStoredBits);
    exact = mpfr_mul(hs.att_mp->get(), m.att_mp->get(), hs.s_mp->get(), MPFR_RNDN) == 0 && exact && m.att_exact;
    const std::array<double, 3> a3 = triple_of(hs.att_mp->get());
    hs.att = {a3[0], a3[1]};
    hs.exact = exact && mpfr_cmp_d(hs.att_mp->get(), a3[0]) == 0;
  }
  for (std::size_t h = 0; h < scales.size(); ++h)
    if (scales[h].normed)
      scales[h].xw.assign(xw.begin() + static_cast<std::ptrdiff_t>(h * D), xw.begin() + static_cast<std::ptrdiff_t>((h + 1) * D));
  evaluate_heads(pos, xw, heads, scales.data(), dtypes, out, stats);
}

void RopeRoundingEngine::evaluate_heads(const Position& pos, std::span<const double> x, int heads,
                                        const HeadScale* scales, std::span<const DType> dtypes,
                                        std::span<const RoundedOut> out, RoundingStats& stats) const {
  const Impl& m = *impl_;
  if (out.size() != dtypes.size()) throw std::invalid_argument("ropecheck: evaluate: one RoundedOut per dtype");
  for (std::int64_t v : {pos.t, pos.h, pos.w}) check_position(v);
  bool any_rot = false;
  for (const RoundedOut& o : out) any_rot = any_rot || o.rot != nullptr;
  if (any_rot) {
    if (heads < 0 || x.size() < static_cast<std::size_t>(heads) * static_cast<std::size_t>(m.D))
      throw std::invalid_argument("ropecheck: evaluate: x needs heads * head_dim values");
    for (std::size_t i = 0; i < static_cast<std::size_t>(heads) * static_cast<std::size_t>(m.D); ++i)
      if (!std::isfinite(x[i])) throw std::invalid_argument("ropecheck: evaluate: x must be finite");
  }

  const std::size_t P = static_cast<std::size_t>(m.P), nd = dtypes.size();
  Scratch& sc = scratch();
  sc.angles.resize(P);
  sc.sc.resize(P);
  sc.ok.resize(P);
  for (std::size_t j = 0; j < P; ++j) {
    const int st = m.stream[j];
    const std::int64_t p = st == 0 ? pos.t : (st == 1 ? pos.h : pos.w);
    sc.angles[j] = {static_cast<double>(p), m.inv[j]};
  }
  sincos_batch(sc.angles.data(), m.P, kInvRelErr, sc.sc.data(), sc.ok.data());
  if (m.options.force_fallback)
    for (std::size_t j = 0; j < P; ++j)
      if (sc.sc[j].err != 0.0) sc.ok[j] = 0;

  double results[4];
  unsigned char need[4];
  if (nd > 4) throw std::invalid_argument("ropecheck: evaluate: at most 4 dtypes");
  const HeadScale* head_scale = nullptr;  // the head being rotated, when normalized
  auto inputs_for = [&](std::size_t j) {
    ZivInputs in;
    in.p = sc.angles[j].p;
    in.inv = m.inv_mp[j]->get();
    in.att = head_scale != nullptr ? head_scale->att_mp->get() : m.att_mp->get();
    in.att_exact = head_scale != nullptr ? head_scale->exact : m.att_exact;
    in.guard_bits = head_scale != nullptr ? kNormGuardBits : kStoredGuardBits;
    return in;
  };
  // Rounds one value for every dtype (fast path, then the fallback for the rest); writes via put.
  auto settle = [&](std::size_t j, bool ok, DD val, double err, ZivQuantity q, double u, double v, auto&& put) {
    int missing = 0;
    for (std::size_t d = 0; d < nd; ++d) {
      need[d] = 0;
      if (!put(d, nullptr)) continue;  // output not requested
      std::optional<double> r;
      if (ok) r = round_dd(val.hi, val.lo, err, dtypes[d]);
      if (r) {
        results[d] = *r;
        ++stats.fast_values;
      } else {
        need[d] = 1;
        ++missing;
      }
    }
    if (missing) stats.fallback_values += ziv_round(inputs_for(j), q, u, v, dtypes, results, need);
    for (std::size_t d = 0; d < nd; ++d)
      if (put(d, nullptr)) put(d, &results[d]);
  };

  for (std::size_t j = 0; j < P; ++j) {
    const SinCosDD& v = sc.sc[j];
    const bool ok = sc.ok[j] != 0;
    settle(j, ok, v.cos, v.err, ZivQuantity::cos, 0, 0, [&](std::size_t d, const double* r) {
      if (out[d].cos == nullptr) return false;
      if (r) out[d].cos[j] = *r;
      return true;
    });
    settle(j, ok, v.sin, v.err, ZivQuantity::sin, 0, 0, [&](std::size_t d, const double* r) {
      if (out[d].sin == nullptr) return false;
      if (r) out[d].sin[j] = *r;
      return true;
    });
  }
  if (!any_rot) return;

  sc.y.resize(2 * P);
  sc.e.resize(2 * P);
  const std::size_t D = static_cast<std::size_t>(m.D);
  for (int h = 0; h < heads; ++h) {
    const std::size_t base = static_cast<std::size_t>(h) * D;
    const double* xh = x.data() + base;
    head_scale = (scales != nullptr && scales[h].normed) ? &scales[h] : nullptr;
    const bool hs = head_scale != nullptr;  // a normalized head: its own factor att * s
    rotate_head(xh, m.channels.data(), sc.sc.data(), sc.ok.data(), m.P, hs ? head_scale->att : m.att, !hs && m.att_one,
                hs ? head_scale->exact : m.att_exact, hs ? (head_scale->exact ? 0.0 : 0x1p-104) : m.att_rel_err,
                sc.y.data(), sc.e.data());
    for (std::size_t j = 0; j < P; ++j) {
      const double a = xh[m.channels[j].ia], b = xh[m.channels[j].ib];
      for (int which = 0; which < 2; ++which) {
        const std::size_t ch = static_cast<std::size_t>(which == 0 ? m.channels[j].ia : m.channels[j].ib);
        double err = sc.e[2 * j + static_cast<std::size_t>(which)];
        if (m.options.force_fallback && err != 0.0) err = kInf;
        settle(j, true, sc.y[2 * j + static_cast<std::size_t>(which)], err, ZivQuantity::rot, which == 0 ? a : b,
               which == 0 ? -b : a, [&](std::size_t d, const double* r) {
                 if (out[d].rot == nullptr) return false;
                 if (r) out[d].rot[base + ch] = *r;
                 return true;
               });
      }
    }
    for (int ch : m.passthrough) {
      const std::size_t c = static_cast<std::size_t>(ch);
      if (head_scale != nullptr) {
        normed_passthrough(m.zero_mp->get(), head_scale->s_mp->get(), xh[c], dtypes, out, base + c, stats);
        continue;
      }
      for (std::size_t d = 0; d < nd; ++d)
        if (out[d].rot != nullptr) {
          out[d].rot[base + c] = round_exact(xh[c], dtypes[d]);
          ++stats.fast_values;
        }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Sinusoidal engine

struct SinusoidalRoundingEngine::Impl {
  SinusoidalSpec spec;
  int n = 0;  // frequencies
  std::vector<SinusoidalColumn> columns;
  std::vector<std::array<double, 3>> w;
  std::vector<std::unique_ptr<MpfrValue>> w_mp;
  std::unique_ptr<MpfrValue> one;
  EngineOptions options;
};

SinusoidalRoundingEngine::SinusoidalRoundingEngine(const SinusoidalSpec& s, std::int64_t max_abs_position,
                                                   EngineOptions options)
    : impl_(std::make_unique<Impl>()) {
  check_max_position(max_abs_position);
  EncodingSpec spec;
  spec.name = "sinusoidal";
  spec.family = Family::sinusoidal;
  spec.sinusoidal = s;
  validate(spec);
  Impl& m = *impl_;
  m.spec = s;
  m.options = options;
  m.n = sinusoidal_frequency_count(s);
  {
    ScopedPrecision prec(static_cast<unsigned>(kStoredBits));
    for (const Real& v : sinusoidal_frequencies<Real>(s)) m.w_mp.push_back(stored_copy(v));
  }
  for (const auto& v : m.w_mp) m.w.push_back(triple_of(v->get()));
  for (int c = 0; c < s.d_model; ++c) m.columns.push_back(sinusoidal_column(s, c));
  m.one = std::make_unique<MpfrValue>(2);
  mpfr_set_ui(m.one->get(), 1, MPFR_RNDN);
}

SinusoidalRoundingEngine::~SinusoidalRoundingEngine() = default;
SinusoidalRoundingEngine::SinusoidalRoundingEngine(SinusoidalRoundingEngine&&) noexcept = default;
SinusoidalRoundingEngine& SinusoidalRoundingEngine::operator=(SinusoidalRoundingEngine&&) noexcept = default;

int SinusoidalRoundingEngine::d_model() const { return impl_->spec.d_model; }

void SinusoidalRoundingEngine::evaluate(std::int64_t position, std::span<const DType> dtypes,
                                        std::span<double* const> rows, RoundingStats& stats) const {
  const Impl& m = *impl_;
  if (rows.size() != dtypes.size()) throw std::invalid_argument("ropecheck: evaluate: one row per dtype");
  if (dtypes.size() > 4) throw std::invalid_argument("ropecheck: evaluate: at most 4 dtypes");
  check_position(position);
  const std::int64_t p = position + m.spec.position_offset;
  check_position(p);
  const std::size_t n = static_cast<std::size_t>(m.n), nd = dtypes.size();
  Scratch& sc = scratch();
  sc.angles.resize(n);
  sc.sc.resize(n);
  sc.ok.resize(n);
  for (std::size_t i = 0; i < n; ++i) sc.angles[i] = {static_cast<double>(p), m.w[i]};
  sincos_batch(sc.angles.data(), m.n, kInvRelErr, sc.sc.data(), sc.ok.data());

  double results[4];
  unsigned char need[4];
  for (std::size_t c = 0; c < m.columns.size(); ++c) {
    const SinusoidalColumn col = m.columns[c];
    if (col.kind == SinusoidalKind::zero) {
      for (std::size_t d = 0; d < nd; ++d)
        if (rows[d]) {
          rows[d][c] = 0.0;
          ++stats.fast_values;
        }
      continue;
    }
    const std::size_t i = static_cast<std::size_t>(col.frequency);
    const SinCosDD& v = sc.sc[i];
    const bool sine = col.kind == SinusoidalKind::sine;
    const DD val = sine ? v.sin : v.cos;
    const bool ok = sc.ok[i] != 0 && !(m.options.force_fallback && v.err != 0.0);
    int missing = 0;
    for (std::size_t d = 0; d < nd; ++d) {
      need[d] = 0;
      if (!rows[d]) continue;
      std::optional<double> r;
      if (ok) r = round_dd(val.hi, val.lo, v.err, dtypes[d]);
      if (r) {
        results[d] = *r;
        ++stats.fast_values;
      } else {
        need[d] = 1;
        ++missing;
      }
    }
    if (missing) {
      ZivInputs in;
      in.p = static_cast<double>(p);
      in.inv = m.w_mp[i]->get();
      in.att = m.one->get();
      in.att_exact = true;
      in.guard_bits = kStoredGuardBits;
      stats.fallback_values += ziv_round(in, sine ? ZivQuantity::sin : ZivQuantity::cos, 0, 0, dtypes, results, need);
    }
    for (std::size_t d = 0; d < nd; ++d)
      if (rows[d]) rows[d][c] = results[d];
  }
}

}  // namespace ropecheck
