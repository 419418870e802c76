// A number in a JSON report: NaN and infinities, which JSON cannot hold, are written as null.
#pragma once

#include <cstdint>
#include <optional>

#include <cmath>

#include <nlohmann/json.hpp>

namespace ropecheck::checker::detail {

inline nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// A position or null.
inline nlohmann::json opt_pos(const std::optional<std::int64_t>& p) { return p ? nlohmann::json(*p) : nlohmann::json(nullptr); }

}  // namespace ropecheck::checker::detail
