#include "ropecheck/core/spec.hpp"

#include <cmath>
#include <numeric>
#include <stdexcept>

#include "ropecheck/core/dtype.hpp"
#include <sstream>

namespace ropecheck {
namespace {

std::string num(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

[[noreturn]] void fail(const std::string& key, const std::string& value, const std::string& why) {
  throw SpecError("invalid spec: '" + key + "' = " + value + ": " + why);
}

void require_finite(const std::string& key, double v) {
  if (!std::isfinite(v)) fail(key, num(v), "must be a finite number");
}

void require_positive(const std::string& key, double v) {
  require_finite(key, v);
  if (!(v > 0)) fail(key, num(v), "must be > 0");
}

void validate_scaling(const RopeSpec& r) {
  const RopeScaling& s = r.scaling;
  const std::string k = "rope.scaling.";
  if (s.factor) require_positive(k + "factor", *s.factor);
  if (s.attention_factor) require_positive(k + "attention_factor", *s.attention_factor);
  if (s.original_max_position_embeddings && *s.original_max_position_embeddings <= 0)
    fail(k + "original_max_position_embeddings", std::to_string(*s.original_max_position_embeddings),
         "must be > 0");
  const int pairs = r.rotary_dim / 2;
  auto need_factor = [&] {
    if (!s.factor) fail(k + "factor", "(missing)", "required for rope type '" + std::string(to_string(s.type)) + "'");
  };
  auto need_orig_or_max = [&] {
    if (!s.original_max_position_embeddings && r.max_position_embeddings <= 0)
      fail(k + "original_max_position_embeddings", "(missing)",
           "required (or rope.max_position_embeddings) for rope type '" + std::string(to_string(s.type)) + "'");
  };
  switch (s.type) {
    case ScalingType::none:
      break;
    case ScalingType::linear:
      need_factor();
      break;
    case ScalingType::dynamic:
      need_factor();
      if (r.max_position_embeddings <= 0)
        fail("rope.max_position_embeddings", std::to_string(r.max_position_embeddings),
             "dynamic scaling needs the model's max_position_embeddings (> 0)");
      if (r.rotary_dim <= 2) fail("rope.rotary_dim", std::to_string(r.rotary_dim), "dynamic scaling needs rotary_dim > 2");
      break;
    case ScalingType::yarn:
      need_orig_or_max();
      if (!s.factor && (r.max_position_embeddings <= 0 || !s.original_max_position_embeddings))
        fail(k + "factor", "(missing)",
             "yarn needs a factor, or both max_position_embeddings and original_max_position_embeddings to derive it");
      require_positive(k + "beta_fast", s.beta_fast);
      require_positive(k + "beta_slow", s.beta_slow);
      if (s.mscale) require_finite(k + "mscale", *s.mscale);
      if (s.mscale_all_dim) require_finite(k + "mscale_all_dim", *s.mscale_all_dim);
      break;
    case ScalingType::llama3:
      need_factor();
      if (!s.original_max_position_embeddings)
        fail(k + "original_max_position_embeddings", "(missing)", "required for rope type 'llama3'");
      require_positive(k + "low_freq_factor", s.low_freq_factor);
      require_positive(k + "high_freq_factor", s.high_freq_factor);
      if (s.high_freq_factor < s.low_freq_factor)
        fail(k + "high_freq_factor", num(s.high_freq_factor),
             "must be >= low_freq_factor (" + num(s.low_freq_factor) + ")");
      break;
    case ScalingType::longrope: {
      need_orig_or_max();
      if (!s.factor && (r.max_position_embeddings <= 0 || !s.original_max_position_embeddings))
        fail(k + "factor", "(missing)",
             "longrope needs a factor, or both max_position_embeddings and original_max_position_embeddings");
      auto check_list = [&](const char* name, const std::vector<double>& v) {
        if (static_cast<int>(v.size()) != pairs)
          fail(k + name, "(list of " + std::to_string(v.size()) + ")",
               "must have rotary_dim/2 = " + std::to_string(pairs) + " entries");
        for (std::size_t i = 0; i < v.size(); ++i)
          require_positive(k + name + "[" + std::to_string(i) + "]", v[i]);
      };
      check_list("short_factor", s.short_factor);
      check_list("long_factor", s.long_factor);
      if (s.short_mscale) require_positive(k + "short_mscale", *s.short_mscale);
      if (s.long_mscale) require_positive(k + "long_mscale", *s.long_mscale);
      break;
    }
    case ScalingType::proportional:
      break;
  }
  if (s.type != ScalingType::longrope && (!s.short_factor.empty() || !s.long_factor.empty()))
    fail(k + "short_factor", "(list)", "only valid for rope type 'longrope'");
  if (s.type != ScalingType::longrope && (s.short_mscale || s.long_mscale))
    fail(k + (s.short_mscale ? "short_mscale" : "long_mscale"), num(s.short_mscale ? *s.short_mscale : *s.long_mscale),
         "only valid for rope type 'longrope'");
}

// Significant bits of a finite nonzero double (the span from its leading to its trailing one bit).
int significant_bits(double v) {
  int e = 0;
  double m = std::fabs(std::frexp(v, &e));  // m in [0.5, 1): exact
  int bits = 0;
  while (m != 0.0) {
    m = m * 2.0;
    const double whole = std::floor(m);
    m -= whole;
    ++bits;
  }
  return bits;
}

// The norm stage: eps > 0; the weights (when given) one per channel, each a bf16 value whose factor
// (w or 1 + w) multiplies an f32 input exactly in binary64 (the reference's rotation inputs are exact).
void validate_norm(const RmsNormStage& n, const std::string& key, int head_dim) {
  require_positive(key + ".eps", n.eps);
  if (n.weight.empty()) return;
  if (static_cast<int>(n.weight.size()) != head_dim)
    fail(key + ".weight", std::to_string(n.weight.size()) + " values",
         "needs head_dim (" + std::to_string(head_dim) + ") values");
  for (std::size_t c = 0; c < n.weight.size(); ++c) {
    const std::string k = key + ".weight[" + std::to_string(c) + "]";
    const double w = n.weight[c];
    require_finite(k, w);
    try {
      (void)double_to_bits(w, DType::bf16);
    } catch (const std::invalid_argument&) {
      fail(k, num(w), "must be exactly a bf16 value (weights are stored in bf16)");
    }
    const double f = norm_weight_factor(n, static_cast<int>(c));
    if (f != 0.0 && significant_bits(f) > kNormFactorBits)
      fail(k, num(w), "1 + w needs more than " + std::to_string(kNormFactorBits) + " significant bits");
  }
}

// The MLA layout: a rotary slice inside the head, a k_pe key of the slice's width.
void validate_mla(const RopeSpec& r) {
  if (r.rotary_offset < 0 || r.rotary_offset > r.head_dim - r.rotary_dim)
    fail("rope.rotary_offset", std::to_string(r.rotary_offset),
         "must be within 0 .. head_dim - rotary_dim (" + std::to_string(r.head_dim - r.rotary_dim) + ")");
  // Proportional RoPE's pairs span the whole head: there is no slice to place.
  if (r.scaling.type == ScalingType::proportional && is_mla_layout(r))
    fail(r.rotary_offset != 0 ? "rope.rotary_offset" : "rope.key_layout",
         r.rotary_offset != 0 ? std::to_string(r.rotary_offset) : "\"k_pe\"", "not valid with rope type 'proportional'");
}

void validate_rope(const RopeSpec& r) {
  if (r.head_dim <= 0 || r.head_dim % 2 != 0)
    fail("rope.head_dim", std::to_string(r.head_dim), "must be even and > 0");
  if (r.rotary_dim <= 0 || r.rotary_dim % 2 != 0)
    fail("rope.rotary_dim", std::to_string(r.rotary_dim), "must be even and > 0");
  if (r.rotary_dim > r.head_dim)
    fail("rope.rotary_dim", std::to_string(r.rotary_dim),
         "must be <= head_dim (" + std::to_string(r.head_dim) + ")");
  require_finite("rope.base", r.base);
  if (!(r.base > 1)) fail("rope.base", num(r.base), "must be > 1");
  if (r.max_position_embeddings < 0)
    fail("rope.max_position_embeddings", std::to_string(r.max_position_embeddings), "must be >= 0");
  validate_scaling(r);
  validate_mla(r);
  if (r.mrope != MropeMode::none) {
    const auto& sec = r.mrope_section;
    for (int i = 0; i < 3; ++i)
      if (sec[static_cast<std::size_t>(i)] < 0)
        fail("rope.mrope.section[" + std::to_string(i) + "]", std::to_string(sec[static_cast<std::size_t>(i)]),
             "must be >= 0");
    const int sum = sec[0] + sec[1] + sec[2];
    if (sum != rope_pairs(r)) {
      std::ostringstream v, why;
      v << '[' << sec[0] << ", " << sec[1] << ", " << sec[2] << ']';
      why << "must sum to the pair count " << rope_pairs(r) << " (sum is " << sum << ")";
      fail("rope.mrope.section", v.str(), why.str());
    }
  }
  if (r.q_norm) validate_norm(*r.q_norm, "rope.q_norm", r.head_dim);
  if (r.k_norm) validate_norm(*r.k_norm, "rope.k_norm", r.head_dim);
  if ((r.q_norm || r.k_norm) && is_mla_layout(r))  // no model has both; the golden engines do one or the other
    fail(r.q_norm ? "rope.q_norm" : "rope.k_norm", "present", "not with an MLA layout (rotary_offset or key_layout k_pe)");
}

void validate_sinusoidal(const SinusoidalSpec& s) {
  if (s.d_model < 2) fail("sinusoidal.d_model", std::to_string(s.d_model), "must be >= 2");
  require_finite("sinusoidal.base", s.base);
  if (!(s.base > 1)) fail("sinusoidal.base", num(s.base), "must be > 1");
  if (s.position_offset < -kMaxPosition || s.position_offset > kMaxPosition)
    fail("sinusoidal.position_offset", std::to_string(s.position_offset), "must be within +-2^53");
}

}  // namespace

void validate(const EncodingSpec& spec) {
  if (spec.family == Family::rope)
    validate_rope(spec.rope);
  else
    validate_sinusoidal(spec.sinusoidal);
}

int rope_pairs(const RopeSpec& r) {
  return r.scaling.type == ScalingType::proportional ? r.head_dim / 2 : r.rotary_dim / 2;
}

int rope_block_channels(const RopeSpec& r) { return 2 * rope_pairs(r); }

RopeSpec key_rope(const RopeSpec& r) {
  if (r.key_layout == KeyLayout::per_head) return r;
  RopeSpec k = r;
  k.head_dim = r.rotary_dim;
  k.rotary_offset = 0;
  k.key_layout = KeyLayout::per_head;
  return k;
}

double effective_factor(const RopeSpec& r) {
  const RopeScaling& s = r.scaling;
  if (s.factor) return *s.factor;
  switch (s.type) {
    case ScalingType::yarn:
    case ScalingType::longrope:
      // Current transformers: derived only when absent (variants.md 1.0, G4).
      return static_cast<double>(r.max_position_embeddings) /
             static_cast<double>(effective_original_max_positions(r));
    default:
      return 1.0;
  }
}

std::int64_t effective_original_max_positions(const RopeSpec& r) {
  if (r.scaling.original_max_position_embeddings) return *r.scaling.original_max_position_embeddings;
  return r.max_position_embeddings;
}

int mrope_stream(const RopeSpec& r, int pair) {
  const auto& sec = r.mrope_section;
  switch (r.mrope) {
    case MropeMode::none:
      return 0;
    case MropeMode::chunked:
      if (pair < sec[0]) return 0;
      if (pair < sec[0] + sec[1]) return 1;
      return 2;
    case MropeMode::interleaved:
      // Qwen3-VL: h on f % 3 == 1 within 3*sec[1], w on f % 3 == 2 within 3*sec[2], else t.
      if (pair % 3 == 1 && pair < 3 * sec[1]) return 1;
      if (pair % 3 == 2 && pair < 3 * sec[2]) return 2;
      return 0;
  }
  return 0;
}

const RmsNormStage* norm_stage(const RopeSpec& rope, std::string_view input) {
  const std::optional<RmsNormStage>& n = input == "k" ? rope.k_norm : rope.q_norm;
  return n ? &*n : nullptr;
}

double norm_weight_factor(const RmsNormStage& norm, int channel) {
  const double w = norm.weight.at(static_cast<std::size_t>(channel));
  return norm.weight_form == NormWeightForm::one_plus_w ? 1.0 + w : w;
}

int sinusoidal_frequency_count(const SinusoidalSpec& s) {
  // Vaswani odd widths have one more sine than cosine (DistilBERT / Marian rule).
  if (s.frequencies == SinusoidalFrequencies::vaswani) return (s.d_model + 1) / 2;
  return s.d_model / 2;
}

std::string_view to_string(Family f) { return f == Family::rope ? "rope" : "sinusoidal"; }
std::string_view to_string(RopeLayout l) { return l == RopeLayout::half_split ? "half_split" : "interleaved"; }
std::string_view to_string(ScalingType t) {
  switch (t) {
    case ScalingType::none: return "none";
    case ScalingType::linear: return "linear";
    case ScalingType::dynamic: return "dynamic";
    case ScalingType::yarn: return "yarn";
    case ScalingType::llama3: return "llama3";
    case ScalingType::longrope: return "longrope";
    case ScalingType::proportional: return "proportional";
  }
  return "?";
}
std::string_view to_string(MropeMode m) {
  switch (m) {
    case MropeMode::none: return "none";
    case MropeMode::chunked: return "chunked";
    case MropeMode::interleaved: return "interleaved";
  }
  return "?";
}
std::string_view to_string(KeyLayout k) { return k == KeyLayout::per_head ? "per_head" : "k_pe"; }
std::string_view to_string(SinusoidalLayout l) {
  return l == SinusoidalLayout::interleaved ? "interleaved" : "concatenated";
}
std::string_view to_string(SinusoidalFrequencies f) {
  return f == SinusoidalFrequencies::vaswani ? "vaswani" : "half_dim_minus_one";
}
std::string_view to_string(NormWeightForm f) { return f == NormWeightForm::w ? "w" : "1+w"; }

}  // namespace ropecheck
