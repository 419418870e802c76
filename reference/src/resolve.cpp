#include "ropecheck/reference/resolve.hpp"

#include <cmath>

#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"
#include "ropecheck/core/spec_json.hpp"

namespace ropecheck {

ResolvedSpec resolve_spec(const EncodingSpec& spec, std::optional<std::int64_t> seq_len, int digits) {
  if (digits < 1 || digits > 1000) throw SpecError("digits must be in [1, 1000], got " + std::to_string(digits));
  if (seq_len && (*seq_len < 1 || *seq_len > kMaxPosition))
    throw SpecError("--seq-len must be in [1, 2^53], got " + std::to_string(*seq_len));
  ResolvedSpec out;
  out.spec = spec;
  out.seq_len = seq_len;
  out.digits = digits;
  // Frequencies involve no large angle; bits for `digits` decimal digits plus guard bits.
  out.precision_bits = working_precision_bits(static_cast<unsigned>(std::ceil(digits * 3.3219281)), 0.0);
  ScopedPrecision precision(out.precision_bits);
  if (spec.family == Family::rope) {
    const RopeSpec& r = spec.rope;
    const RopeFrequencies<Real> f = rope_frequencies<Real>(r, seq_len);
    for (const Real& v : f.inv_freq) out.frequencies.push_back(to_decimal(v, digits));
    out.attention_factor = to_decimal(f.attention_factor, digits);
    out.effective_factor = effective_factor(r);
    if (r.scaling.type == ScalingType::yarn) {
      const YarnRange<Real> yr = yarn_correction_range<Real>(r);
      out.yarn_correction_range = {to_decimal(yr.low, digits), to_decimal(yr.high, digits)};
    }
    if (r.scaling.type == ScalingType::llama3) out.llama3_bands = llama3_band_counts<Real>(r);
    if (r.scaling.type == ScalingType::longrope) out.longrope_long_factors = f.long_factors;
  } else {
    for (const Real& v : sinusoidal_frequencies<Real>(spec.sinusoidal)) out.frequencies.push_back(to_decimal(v, digits));
  }
  return out;
}

nlohmann::json ResolvedSpec::to_json() const {
  nlohmann::json j;
  j["spec"] = spec_to_json(spec);
  j["seq_len"] = seq_len ? nlohmann::json(*seq_len) : nlohmann::json(nullptr);
  j["reference"] = {{"backend", "MPFR (Boost.Multiprecision mpfr_float)"},
                    {"precision_bits", precision_bits},
                    {"significant_digits", digits}};
  if (spec.family == Family::rope) {
    j["pairs"] = rope_pairs(spec.rope);
    j["inverse_frequencies"] = frequencies;
    j["attention_factor"] = attention_factor;
    j["effective_factor"] = effective_factor;
    if (yarn_correction_range)
      j["yarn_correction_range"] = {yarn_correction_range->first, yarn_correction_range->second};
    if (llama3_bands)
      j["llama3_bands"] = {{"kept", (*llama3_bands)[0]}, {"smoothed", (*llama3_bands)[1]}, {"divided", (*llama3_bands)[2]}};
    if (longrope_long_factors) j["longrope_factors"] = *longrope_long_factors ? "long" : "short";
  } else {
    j["frequencies"] = frequencies;
  }
  return j;
}

}  // namespace ropecheck
