// The attention engine's resolved problem: frequencies, attention factor and scale from MPFR at
// kStoredBits (the fallback's inputs) and as triple- / double-doubles (the fast path's). The evaluations
// are in evaluate.cpp; see engine.hpp for the overview.
#include <cmath>
#include <string>

#include "engine_impl.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/scalar.hpp"

namespace ropecheck::attention {
namespace {

using detail::Impl;
using detail::kStoredBits;

std::unique_ptr<MpfrValue> stored_copy(const Real& v) {
  auto m = std::make_unique<MpfrValue>(kStoredBits);
  mpfr_set(m->get(), v.backend().data(), MPFR_RNDN);
  return m;
}

std::array<double, 3> triple_of(mpfr_srcptr v) { return triple_double_of(v, kStoredBits + 64); }

// A stored value is taken as exact when it is a double (an irrational value never is, to 4224 bits).
bool is_double(mpfr_srcptr v) { return mpfr_cmp_d(v, mpfr_get_d(v, MPFR_RNDN)) == 0; }

void resolve_constants(Impl& m, std::optional<std::int64_t> seq_len) {
  ScopedPrecision prec(static_cast<unsigned>(kStoredBits));
  const RopeFrequencies<Real> f = rope_frequencies<Real>(m.rope, seq_len);
  for (const Real& v : f.inv_freq) m.inv_mp.push_back(stored_copy(v));
  m.att_mp = stored_copy(f.attention_factor);
  const int dim = scale_sqrt_dim(m.attn, m.rope);
  m.scale_mp = stored_copy(dim > 0 ? Real(1) / sqrt(Real(dim)) : Real(*m.attn.scale));
}

DD dd_of(mpfr_srcptr v, bool& exact, double& rel) {
  const std::array<double, 3> t = triple_of(v);
  exact = is_double(v);
  rel = exact ? 0.0 : 0x1p-104;
  return {t[0], t[1]};
}

}  // namespace

AttentionEngine::AttentionEngine(const RopeSpec& rope, std::optional<std::int64_t> seq_len,
                                 const AttentionSpec& attention, std::int64_t max_abs_position,
                                 AttentionEngineOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (max_abs_position < 0 || max_abs_position > kMaxPosition)
    throw SpecError("max_abs_position " + std::to_string(max_abs_position) + " is outside [0, 2^53]");
  EncodingSpec spec;
  spec.name = "rope";
  spec.family = Family::rope;
  spec.rope = rope;
  validate(spec);
  validate(attention, rope);
  Impl& m = *impl_;
  m.rope = rope;
  m.attn = attention;
  m.options = options;
  m.P = rope_pairs(rope);
  m.D = rope.head_dim;
  m.Dv = attention::value_dim(attention, rope);
  m.G = attention.group;
  m.cap = attention.softcap;
  m.sinks = attention.sinks;
  resolve_constants(m, seq_len);
  std::vector<bool> covered(static_cast<std::size_t>(m.D), false);
  for (int j = 0; j < m.P; ++j) {
    m.stream.push_back(mrope_stream(rope, j));
    const auto [ia, ib] = pair_channels(rope, j);
    m.channels.push_back({ia, ib});
    covered[static_cast<std::size_t>(ia)] = covered[static_cast<std::size_t>(ib)] = true;
    m.inv3.push_back(triple_of(m.inv_mp[static_cast<std::size_t>(j)]->get()));
    m.inv_exact.push_back(is_double(m.inv_mp[static_cast<std::size_t>(j)]->get()) ? 1 : 0);
  }
  for (int ch = 0; ch < m.D; ++ch)
    if (!covered[static_cast<std::size_t>(ch)]) m.passthrough.push_back(ch);
  m.att = dd_of(m.att_mp->get(), m.att_exact, m.att_rel);
  m.att_one = m.att_exact && m.att.hi == 1.0;
  m.scale = dd_of(m.scale_mp->get(), m.scale_exact, m.scale_rel);
  // Angles reach |2 max_abs_position| * w_max; the fallback starts 160 bits above their size.
  m.start_bits = 160 + static_cast<long>(std::ceil(std::log2(2.0 * static_cast<double>(max_abs_position) + 1.0)));
}

AttentionEngine::~AttentionEngine() = default;
AttentionEngine::AttentionEngine(AttentionEngine&&) noexcept = default;
AttentionEngine& AttentionEngine::operator=(AttentionEngine&&) noexcept = default;

int AttentionEngine::head_dim() const { return impl_->D; }
int AttentionEngine::value_dim() const { return impl_->Dv; }
int AttentionEngine::group() const { return impl_->G; }
double AttentionEngine::scale() const { return impl_->scale.hi; }
double AttentionEngine::attention_factor() const { return impl_->att.hi; }

}  // namespace ropecheck::attention
