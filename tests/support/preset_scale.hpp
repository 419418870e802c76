// The presets a sweep "on every preset" runs at the test scale (test_scale.hpp): all of them at the full and
// small scales; at the tiny scale (the sanitized tests) the first preset of each way of computing the
// frequencies and pairing the dimensions (scaling type, layout, M-RoPE mode, Q/K norm, MLA slice): the
// fewest presets that still run every code path the sweep reaches, instrumented.
#pragma once

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "ropecheck/core/spec.hpp"
#include "ropecheck/reference/presets.hpp"
#include "test_scale.hpp"

namespace ropecheck::test {

inline std::vector<std::string> presets_at_test_scale(const std::vector<std::string>& presets) {
  if (!tiny_scale()) return presets;
  std::set<std::tuple<int, int, int, int, bool, bool>> seen;
  std::vector<std::string> out;
  for (const std::string& name : presets) {
    const EncodingSpec e = load_preset(name);
    const RopeSpec& r = e.rope;
    const auto kind = std::make_tuple(static_cast<int>(e.family), static_cast<int>(r.scaling.type),
                                      static_cast<int>(r.layout), static_cast<int>(r.mrope), has_qk_norm(r),
                                      is_mla_layout(r));
    if (seen.insert(kind).second) out.push_back(name);
  }
  return out;
}

}  // namespace ropecheck::test
