// A number in a JSON report: NaN and infinities, which JSON cannot hold, are written as null.
#pragma once

#include <cmath>

#include <nlohmann/json.hpp>

namespace ropecheck::golden::detail {

inline nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace ropecheck::golden::detail
