// A check part's tensors as JSON and back (check_part.cpp): doubles written so that they read back to
// the same bits, sums exactly (ExactSum::to_text), and every count checked on the way in.
#include "check_part_json.hpp"

#include "check_internal.hpp"
#include "json_number.hpp"
#include "ropecheck/core/one_line.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"

namespace ropecheck::checker::part_json {

using io::ExactSum;
using io::PartReader;
using io::exact_number;
using check_detail::kInf;
using io::TensorDType;
using ropecheck::sanitize;

namespace {


nlohmann::json xnum(double v) { return exact_number(v); }

nlohmann::json sums_json(const ErrorSums& e) {
  return {{"elements", e.n},          {"max_bound", xnum(e.max_b)},   {"max_u_dt", xnum(e.max_u)},
          {"sum_bound", e.sum_b.to_text()}, {"sum_sq_bound", e.sq_b.to_text()}, {"sum_u_dt", e.sum_u.to_text()},
          {"sum_sq_u_dt", e.sq_u.to_text()}};
}
ErrorSums sums_from(const PartReader& r, const nlohmann::json& j) {
  ErrorSums e;
  e.n = r.i64(j, "elements");
  e.max_b = r.dbl(j, "max_bound");
  e.max_u = r.dbl(j, "max_u_dt");
  e.sum_b = r.sum(j, "sum_bound");
  e.sq_b = r.sum(j, "sum_sq_bound");
  e.sum_u = r.sum(j, "sum_u_dt");
  e.sq_u = r.sum(j, "sum_sq_u_dt");
  return e;
}

nlohmann::json element_json(const ElementReport& e) {
  return {{"index", e.index},         {"token", e.token},         {"position", {e.position.t, e.position.h, e.position.w}},
          {"stream", e.stream},       {"head", e.head},           {"channel", e.channel},
          {"pair", e.pair},           {"theta", xnum(e.theta)},   {"candidate", xnum(e.candidate)},
          {"truth", xnum(e.truth)},   {"golden", xnum(e.golden)}, {"abs_error", xnum(e.abs_error)},
          {"ulps", xnum(e.ulps)},     {"magnitude", xnum(e.magnitude)}, {"pair_relative", xnum(e.pair_relative)},
          {"score", xnum(e.score)},       {"saturated", e.saturated}};
}
ElementReport element_from(const PartReader& r, const nlohmann::json& j) {
  ElementReport e;
  e.index = r.i64(j, "index");
  e.token = r.i64(j, "token");
  const nlohmann::json& p = r.at(j, "position");
  if (!p.is_array() || p.size() != 3 || !p[0].is_number_integer() || !p[1].is_number_integer() || !p[2].is_number_integer())
    r.bad("'position' is not [t, h, w]");
  e.position = {p[0].get<std::int64_t>(), p[1].get<std::int64_t>(), p[2].get<std::int64_t>()};
  e.stream = static_cast<int>(r.i64(j, "stream"));
  e.head = static_cast<int>(r.i64(j, "head"));
  e.channel = static_cast<int>(r.i64(j, "channel"));
  e.pair = static_cast<int>(r.i64(j, "pair"));
  e.theta = r.dbl(j, "theta");
  e.candidate = r.dbl(j, "candidate");
  e.truth = r.dbl(j, "truth");
  e.golden = r.dbl(j, "golden");
  e.abs_error = r.dbl(j, "abs_error");
  e.ulps = r.dbl(j, "ulps");
  e.magnitude = r.dbl(j, "magnitude");
  e.pair_relative = r.dbl(j, "pair_relative");
  e.score = r.dbl(j, "score");
  const nlohmann::json& sat = r.at(j, "saturated");
  if (!sat.is_boolean()) r.bad("'saturated' is not true or false");
  e.saturated = sat.get<bool>();
  return e;
}

}  // namespace

nlohmann::json tensor_json(const TensorStats& s) {
  nlohmann::json classes = nlohmann::json::array();
  for (std::size_t k = 0; k < s.classes.size(); ++k)
    classes.push_back({{"class", std::string(accuracy::to_string(accuracy::kAccuracyClasses[k]))},
                       {"violations", s.classes[k].violations},
                       {"first_violating_position", detail::opt_pos(s.classes[k].first)},
                       {"saturated", s.classes[k].saturated},
                       {"first_saturated_position", detail::opt_pos(s.classes[k].first_saturated)},
                       {"worst_margin", xnum(s.classes[k].worst)}});
  nlohmann::json bins = nlohmann::json::array();
  for (std::size_t b = 0; b < s.bins.size(); ++b) {
    const BinStats& x = s.bins[b];
    if (x.elements == 0) continue;
    bins.push_back({{"bin", b},
                    {"elements", x.elements},
                    {"violations", x.violations},
                    {"saturated", x.saturated},
                    {"max_pair_relative", xnum(x.max_pair)},
                    {"max_ulps", xnum(x.max_ulps)},
                    {"error_sums", sums_json(x.err)}});
  }
  nlohmann::json worst = nlohmann::json::array();
  for (const ElementReport& e : s.worst) worst.push_back(element_json(e));
  nlohmann::json j = {{"golden", s.golden_name},
          {"candidate", s.candidate_name},
          {"dtype", std::string(to_string(s.dtype))},
          {"shape", s.shape},
          {"elements", s.elements},
          {"identical", s.identical},
          {"nan", s.nan},
          {"inf", s.inf},
          {"nonfinite_mismatches", s.mismatches},
          {"finite", s.finite},
          {"max_ulps", xnum(s.max_ulps)},
          {"max_abs_error", xnum(s.max_abs)},
          {"max_rel_error", xnum(s.max_rel)},
          {"max_pair_relative", xnum(s.max_pair)},
          {"sum_ulps", s.sum_ulps.to_text()},
          {"sum_pair_relative", s.sum_pair.to_text()},
          {"sum_sq_error", s.sum_sq_err.to_text()},
          {"sum_sq_truth", s.sum_sq_truth.to_text()},
          {"classes", classes},
          {"violations", s.violations},
          {"first_violating_position", detail::opt_pos(s.first)},
          {"saturated", s.saturated},
          {"first_saturated_position", detail::opt_pos(s.first_saturated)},
          {"worst_score", xnum(s.worst_score)},
          {"error_sums", sums_json(s.err)},
          {"position_bins", bins},
          {"worst", worst}};
  if (s.passthrough > 0)  // MLA sets only
    j["passthrough"] = {{"elements", s.passthrough},
                        {"differing", s.passthrough_differing},
                        {"first_differing_position", detail::opt_pos(s.first_passthrough_differing)}};
  return j;
}

// Counts a check can have made: none negative, none above the elements checked, the position bins
// adding up to the tensor's. A part edited by hand or broken on the way (negative violations turned a
// failing run into PASS) is refused.
void validate(const PartReader& r, const TensorStats& s) {
  auto count = [&](std::int64_t v, const std::string& what) {
    if (v < 0) r.bad("'" + what + "' of " + sanitize(s.golden_name) + " is negative (" + std::to_string(v) + ")");
    if (v > s.elements)
      r.bad("'" + what + "' of " + sanitize(s.golden_name) + " (" + std::to_string(v) + ") exceeds its elements (" +
            std::to_string(s.elements) + ")");
  };
  if (s.elements < 0) r.bad("'elements' of " + sanitize(s.golden_name) + " is negative");
  count(s.identical, "identical");
  count(s.nan, "nan");
  count(s.inf, "inf");
  count(s.mismatches, "nonfinite_mismatches");
  count(s.finite, "finite");
  count(s.violations, "violations");
  count(s.saturated, "saturated");
  count(s.err.n, "error_sums.elements");
  for (std::size_t k = 0; k < s.classes.size(); ++k)
    count(s.classes[k].violations, std::string(accuracy::to_string(accuracy::kAccuracyClasses[k])) + " violations");
  std::int64_t elements = 0, violations = 0, saturated = 0;
  for (const BinStats& b : s.bins) {
    count(b.elements, "position_bins.elements");
    count(b.violations, "position_bins.violations");
    count(b.saturated, "position_bins.saturated");
    count(b.err.n, "position_bins.error_sums.elements");
    elements += b.elements;
    violations += b.violations;
    saturated += b.saturated;
  }
  if (elements != s.elements || violations != s.violations || saturated != s.saturated)
    r.bad("the position bins of " + sanitize(s.golden_name) + " do not add up to its elements, violations and saturated counts");
  if (s.violations > 0 && !s.first) r.bad("'violations' of " + sanitize(s.golden_name) + " without a first position");
}

TensorStats tensor_from(const PartReader& r, const nlohmann::json& j) {
  TensorStats s;
  s.golden_name = r.str(j, "golden");
  s.candidate_name = r.str(j, "candidate");
  s.base = check_detail::base_of(s.golden_name);
  const std::string dt = r.str(j, "dtype");
  bool known = false;
  for (TensorDType t : {TensorDType::f64, TensorDType::f32, TensorDType::f16, TensorDType::bf16})
    if (to_string(t) == dt) s.dtype = t, known = true;
  if (!known) r.bad("unknown dtype '" + dt + "'");
  const nlohmann::json& shape = r.at(j, "shape");
  if (!shape.is_array()) r.bad("'shape' is not a list");
  for (const nlohmann::json& d : shape) {
    if (!d.is_number_integer()) r.bad("'shape' is not a list of integers");
    s.shape.push_back(d.get<std::int64_t>());
  }
  s.elements = r.i64(j, "elements");
  s.identical = r.i64(j, "identical");
  s.nan = r.i64(j, "nan");
  s.inf = r.i64(j, "inf");
  s.mismatches = r.i64(j, "nonfinite_mismatches");
  s.finite = r.i64(j, "finite");
  s.max_ulps = r.dbl(j, "max_ulps");
  s.max_abs = r.dbl(j, "max_abs_error");
  s.max_rel = r.dbl(j, "max_rel_error");
  s.max_pair = r.dbl(j, "max_pair_relative");
  s.sum_ulps = r.sum(j, "sum_ulps");
  s.sum_pair = r.sum(j, "sum_pair_relative");
  s.sum_sq_err = r.sum(j, "sum_sq_error");
  s.sum_sq_truth = r.sum(j, "sum_sq_truth");
  const nlohmann::json& classes = r.at(j, "classes");
  if (!classes.is_array() || classes.size() != s.classes.size()) r.bad("'classes' does not list every class");
  for (std::size_t k = 0; k < s.classes.size(); ++k) {
    if (r.str(classes[k], "class") != accuracy::to_string(accuracy::kAccuracyClasses[k])) r.bad("'classes' out of order");
    s.classes[k] = {r.i64(classes[k], "violations"), r.opt(classes[k], "first_violating_position"),
                    r.dbl(classes[k], "worst_margin"), r.i64(classes[k], "saturated"),
                    r.opt(classes[k], "first_saturated_position")};
  }
  s.violations = r.i64(j, "violations");
  s.first = r.opt(j, "first_violating_position");
  s.saturated = r.i64(j, "saturated");
  s.first_saturated = r.opt(j, "first_saturated_position");
  s.worst_score = r.dbl(j, "worst_score");
  s.err = sums_from(r, r.at(j, "error_sums"));
  const nlohmann::json& bins = r.at(j, "position_bins");
  if (!bins.is_array()) r.bad("'position_bins' is not a list");
  for (const nlohmann::json& b : bins) {
    const std::int64_t k = r.i64(b, "bin");
    if (k < 0 || k >= static_cast<std::int64_t>(kPositionBins)) r.bad("position bin out of range");
    BinStats& x = s.bins[static_cast<std::size_t>(k)];
    x.elements = r.i64(b, "elements");
    x.violations = r.i64(b, "violations");
    x.saturated = r.i64(b, "saturated");
    x.max_pair = r.dbl(b, "max_pair_relative");
    x.max_ulps = r.dbl(b, "max_ulps");
    x.err = sums_from(r, r.at(b, "error_sums"));
  }
  const nlohmann::json& worst = r.at(j, "worst");
  if (!worst.is_array()) r.bad("'worst' is not a list");
  for (const nlohmann::json& e : worst) s.worst.push_back(element_from(r, e));
  if (j.contains("passthrough")) {
    const nlohmann::json& pt = j["passthrough"];
    s.passthrough = r.i64(pt, "elements");
    s.passthrough_differing = r.i64(pt, "differing");
    s.first_passthrough_differing = r.opt(pt, "first_differing_position");
    if (s.passthrough_differing < 0 || s.passthrough_differing > s.passthrough || s.passthrough > s.elements)
      r.bad("'passthrough' of " + sanitize(s.golden_name) + " does not fit its elements");
  }
  validate(r, s);
  return s;
}
}  // namespace ropecheck::checker::part_json
