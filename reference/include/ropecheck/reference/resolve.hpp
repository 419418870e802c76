// A spec resolved by the exact reference: frequencies, attention factor and the derived
// quantities of each scaling, as decimal strings (what `ropecheck spec` prints).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/core/spec.hpp"

namespace ropecheck {

struct ResolvedSpec {
  EncodingSpec spec;
  std::optional<std::int64_t> seq_len;
  unsigned precision_bits = 0;
  int digits = 0;
  std::vector<std::string> frequencies;  // inverse frequency per pair, or sinusoidal w_i
  std::string attention_factor;          // rope only
  double effective_factor = 1.0;         // rope only
  std::optional<std::pair<std::string, std::string>> yarn_correction_range;
  std::optional<std::array<int, 3>> llama3_bands;  // kept, smoothed, divided
  std::optional<bool> longrope_long_factors;

  nlohmann::json to_json() const;
};

// `digits` significant decimal digits (>= 40); the MPFR precision is chosen to make them exact.
ResolvedSpec resolve_spec(const EncodingSpec& spec, std::optional<std::int64_t> seq_len, int digits = 45);

}  // namespace ropecheck
