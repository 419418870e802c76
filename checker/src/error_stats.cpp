#include "ropecheck/checker/error_stats.hpp"
#include "json_number.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>


namespace ropecheck::checker {
namespace {

using detail::num;

nlohmann::json moments_json(const ErrorMoments& m) {
  return {{"max", num(m.max)}, {"mean", num(m.mean)}, {"rms", num(m.rms)}};
}

std::optional<double> read_num(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  if (it->is_null()) return std::numeric_limits<double>::infinity();  // how to_json writes inf
  if (!it->is_number()) return std::nullopt;
  const double v = it->get<double>();
  if (!(v >= 0)) return std::nullopt;  // errors are never negative
  return v;
}

std::optional<ErrorMoments> moments_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  const auto mx = read_num(j, "max"), mean = read_num(j, "mean"), rms = read_num(j, "rms");
  if (!mx || !mean || !rms) return std::nullopt;
  return ErrorMoments{*mx, *mean, *rms};
}

ErrorMoments moments(std::int64_t n, double max, double sum, double sq) {
  if (n == 0) return {};
  const double dn = static_cast<double>(n);
  return {max, sum / dn, std::sqrt(sq / dn)};
}

std::string g3(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

void ErrorStatsAcc::merge(const ErrorStatsAcc& o) {
  n += o.n;
  max_b = std::max(max_b, o.max_b);
  sum_b += o.sum_b;
  sq_b += o.sq_b;
  max_u = std::max(max_u, o.max_u);
  sum_u += o.sum_u;
  sq_u += o.sq_u;
}

ErrorStats ErrorStatsAcc::result() const {
  return {n, moments(n, max_b, sum_b, sq_b), moments(n, max_u, sum_u, sq_u)};
}

nlohmann::json to_json(const ErrorStats& s) {
  return {{"elements", s.elements}, {"bound", moments_json(s.bound)}, {"u_dt", moments_json(s.u_dt)}};
}

std::optional<ErrorStats> error_stats_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  const auto n = j.find("elements");
  const auto b = j.find("bound"), u = j.find("u_dt");
  if (n == j.end() || !n->is_number_integer() || b == j.end() || u == j.end()) return std::nullopt;
  const auto mb = moments_from_json(*b), mu = moments_from_json(*u);
  if (!mb || !mu || n->get<std::int64_t>() < 0) return std::nullopt;
  return ErrorStats{n->get<std::int64_t>(), *mb, *mu};
}

std::string compact(const ErrorMoments& m) {
  return "max " + g3(m.max) + " mean " + g3(m.mean) + " rms " + g3(m.rms);
}

}  // namespace ropecheck::checker
