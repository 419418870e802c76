#include "ropecheck/attention/spec.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace ropecheck::attention {

void validate(const AttentionSpec& a, const RopeSpec& rope) {
  auto bad = [](const std::string& what) { throw SpecError("attention: " + what); };
  if (a.group < 1) bad("group " + std::to_string(a.group) + " must be >= 1");
  if (a.scale && !(std::isfinite(*a.scale) && *a.scale > 0)) bad("scale must be finite and > 0");
  if (a.scale_dim < 0) bad("scale_dim must be >= 0");
  if (a.softcap && !(std::isfinite(*a.softcap) && *a.softcap > 0)) bad("softcap must be finite and > 0");
  if (a.window < 0) bad("window must be >= 0");
  if (!a.sinks.empty() && static_cast<int>(a.sinks.size()) != a.group)
    bad("sinks: " + std::to_string(a.sinks.size()) + " logits for a group of " + std::to_string(a.group) +
        " query heads");
  for (double z : a.sinks)
    if (!std::isfinite(z)) bad("sink logits must be finite");
  if (a.value_dim < 0) bad("value_dim must be >= 0");
  if (rope.head_dim < 1) bad("the RoPE spec has no head_dim");
}

int value_dim(const AttentionSpec& a, const RopeSpec& rope) { return attention_value_dim(a, rope.head_dim); }

int scale_sqrt_dim(const AttentionSpec& a, const RopeSpec& rope) { return attention_scale_dim(a, rope.head_dim); }

KeyRange visible_keys(const AttentionSpec& a, std::int64_t i, std::int64_t n) { return attention_keys(a, i, n); }

BlockLayout::BlockLayout(const AttentionSpec& a, std::int64_t tokens) {
  keys_.reserve(static_cast<std::size_t>(tokens));
  offset_.reserve(static_cast<std::size_t>(tokens) + 1);
  offset_.push_back(0);
  for (std::int64_t i = 0; i < tokens; ++i) {
    keys_.push_back(visible_keys(a, i, tokens));
    offset_.push_back(offset_.back() + keys_.back().size());
  }
}

}  // namespace ropecheck::attention
