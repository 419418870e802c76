// drift.json and compare.json (drift/DRIFT.md, "JSON").
#include <cmath>

#include "ropecheck/drift/writers.hpp"
#include "ropecheck/core/spec_json.hpp"

#ifndef ROPECHECK_VERSION
#define ROPECHECK_VERSION "unknown"
#endif

namespace ropecheck::drift {

namespace {

using nlohmann::json;

// A number, or null when not finite (JSON has no infinity; the caps keep metrics finite).
json number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json stat(const Stat& s) {
  if (s.empty()) return nullptr;
  return {{"max", number(s.max)}, {"rms", number(s.rms())}, {"count", s.count}};
}

json metrics(const Metrics& m, const std::vector<std::int64_t>& shifts) {
  json sh = json::array();
  for (std::size_t i = 0; i < shifts.size(); ++i)
    sh.push_back({{"s", shifts[i]}, {"violation", i < m.shift.size() ? stat(m.shift[i]) : json(nullptr)}});
  return {{"samples", m.samples},     {"angle_err", stat(m.angle)}, {"cos_sin_err", stat(m.trig)},
          {"table_err", stat(m.table)}, {"rot_ulp", stat(m.rot_ulp)}, {"rot_rel", stat(m.rot_rel)},
          {"shift", sh},                {"nonfinite", m.nonfinite}};
}

json optional_position(const std::optional<std::int64_t>& p) { return p ? json(*p) : json(nullptr); }

json common(const EncodingSpec& spec, const DriftOptions& o, const SamplingPlan& plan, std::int64_t seq_len,
            double att, const std::string& command_line, const char* tool) {
  return {{"tool", tool},
          {"format_version", 1},
          {"ropecheck_version", ROPECHECK_VERSION},
          {"command", command_line},
          {"spec", spec_to_json(spec)},
          {"storage_dtype", to_string(o.storage)},
          {"seq_len", seq_len},
          {"attention_factor", att},
          {"heads", o.heads},
          {"seed", o.seed},
          {"shifts", o.shifts},
          {"key_distance", o.key_distance},
          {"uniqueness_pass", o.uniqueness},
          {"sampling", to_json(plan)}};
}

json breakdown(const Breakdown& b) {
  const json sat = b.saturated_from ? json(*b.saturated_from) : json(nullptr);
  if (!b.position) return {{"position", nullptr}, {"saturated_from", sat}, {"state", b.state()}};
  return {{"position", *b.position}, {"quantity", b.quantity}, {"head", b.head},
          {"pair", b.pair},          {"channel", b.channel},   {"error", number(b.error)},
          {"allowed", number(b.allowed)}, {"saturated_from", sat}, {"state", b.state()}};
}

json first_difference(const FirstDifference& f) {
  if (!f.position) return {{"position", nullptr}};
  return {{"position", *f.position}, {"head", f.head}, {"pair", f.pair}, {"channel", f.channel},
          {"a", number(f.a)},        {"b", number(f.b)}, {"diff_ulp", number(f.diff_ulp)}};
}

}  // namespace

nlohmann::json to_json(const DriftResult& r, const std::string& command_line) {
  json j = common(r.spec, r.options, r.plan, r.seq_len, r.attention_factor, command_line, "ropecheck drift");
  json classes = json::array();
  for (accuracy::AccuracyClass c : accuracy::kAccuracyClasses) classes.push_back(accuracy::to_string(c));
  j["classes"] = classes;
  json cands = json::array();
  for (const KernelResult& c : r.kernels) {
    json bins = json::array();
    for (std::size_t i = 0; i < c.bins.size(); ++i) {
      json b = metrics(c.bins[i], r.options.shifts);
      b["lo"] = r.plan.bins[i].lo;
      b["hi"] = r.plan.bins[i].hi;
      if (c.uniqueness) b["distinct_below_hi"] = c.uniqueness->distinct_below[i];
      bins.push_back(b);
    }
    json bd = json::object();
    for (const Breakdown& b : c.breakdown) bd[std::string(accuracy::to_string(b.cls))] = breakdown(b);
    json uq = nullptr;
    if (c.uniqueness) {
      const Uniqueness& u = *c.uniqueness;
      uq = {{"positions", u.positions},
            {"distinct", u.distinct},
            {"first_collision", optional_position(u.first_collision)},
            {"collides_with", optional_position(u.collides_with)},
            {"seconds", u.seconds}};
    }
    cands.push_back({{"name", c.name},
                     {"description", c.description},
                     {"kind", c.is_recipe ? "recipe" : "plugin"},
                     {"known_bad", c.known_bad},
                     {"table_dtype", c.table_dtype ? json(to_string(*c.table_dtype)) : json(nullptr)},
                     {"measured", {{"angle", c.has_rows}, {"cos_sin", c.has_rows}, {"table", c.has_table}}},
                     {"total", metrics(c.total, r.options.shifts)},
                     {"bins", bins},
                     {"breakdown", bd},
                     {"uniqueness", uq},
                     {"seconds", c.seconds}});
  }
  j["candidates"] = cands;
  j["kernel_failures"] = r.kernel_failures;
  j["seconds"] = r.seconds;
  return j;
}

nlohmann::json to_json(const CompareResult& r, const std::string& command_line) {
  json j = common(r.spec, r.options, r.plan, r.seq_len, r.attention_factor, command_line, "ropecheck drift --compare");
  auto cm = [](const CompareMetrics& m) {
    return json{{"samples", m.samples},
                {"diff_ulp", stat(m.diff_ulp)},
                {"diff_rel", stat(m.diff_rel)},
                {"differing", m.differing},
                {"elements", m.elements},
                {"angle_diff", stat(m.angle_diff)},
                {"cos_sin_diff", stat(m.trig_diff)},
                {"table_diff", stat(m.table_diff)},
                {"err_a_ulp", stat(m.err_a_ulp)},
                {"err_b_ulp", stat(m.err_b_ulp)},
                {"err_a_rel", stat(m.err_a_rel)},
                {"err_b_rel", stat(m.err_b_rel)},
                {"nonfinite_a", m.nonfinite_a},
                {"nonfinite_b", m.nonfinite_b},
                {"violations", m.violations},
                {"saturated", m.saturated}};
  };
  j["a"] = {{"name", r.a}, {"description", r.a_description}};
  j["class"] = std::string(to_string(r.options.compare_class));
  j["verdict"] = std::string(to_string(r.verdict));
  j["reason"] = r.reason;
  j["first_violation"] = r.first_violation ? json(*r.first_violation) : json(nullptr);
  j["first_saturated"] = r.first_saturated ? json(*r.first_saturated) : json(nullptr);
  j["b"] = {{"name", r.b}, {"description", r.b_description}};
  json bins = json::array();
  for (std::size_t i = 0; i < r.bins.size(); ++i) {
    json b = cm(r.bins[i]);
    b["lo"] = r.plan.bins[i].lo;
    b["hi"] = r.plan.bins[i].hi;
    bins.push_back(b);
  }
  j["total"] = cm(r.total);
  j["bins"] = bins;
  j["first_difference_sampled"] = first_difference(r.first_sampled);
  if (r.options.uniqueness) {
    j["first_difference_all"] = first_difference(r.first_all);
    j["positions_differing_all"] = r.positions_differing_all;
  } else {
    j["first_difference_all"] = nullptr;
    j["positions_differing_all"] = nullptr;
  }
  j["kernel_failures"] = r.kernel_failures;
  j["seconds"] = r.seconds;
  return j;
}

}  // namespace ropecheck::drift
