#include "props_part.hpp"

#include <cstdlib>

#include "ropecheck/io/part_file.hpp"
#include "ropecheck/io/tensor.hpp"

#ifndef ROPECHECK_VERSION
#define ROPECHECK_VERSION "unknown"
#endif

namespace ropecheck::cli {

namespace {
constexpr const char* kPartFormat = "ropecheck-props-part";
constexpr int kPartVersion = 1;
}  // namespace

nlohmann::json props_part_json(const nlohmann::json& report, const Shard& shard, Verdict verdict) {
  return {{"format", kPartFormat},
          {"format_version", kPartVersion},
          {"ropecheck_version", ROPECHECK_VERSION},
          {"command", "props"},
          {"shard", {{"index", shard.index}, {"count", shard.count}}},
          {"verdict", std::string(to_string(verdict))},
          {"report", report}};
}

MergedProps merge_props_parts(const std::vector<nlohmann::json>& parts, const std::vector<std::string>& names) {
  std::vector<Shard> shards;
  std::vector<nlohmann::json> identity;
  std::vector<Verdict> verdicts;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const io::PartReader r{names[i], "props part"};
    shards.push_back(r.header(parts[i], kPartFormat, kPartVersion));
    nlohmann::json id = r.at(parts[i], "report");
    if (!id.is_object() || !id.contains("properties") || !id["properties"].is_array() || !id.contains("dtypes"))
      r.bad("'report' is not a props report");
    for (const char* k : {"properties", "passed", "verdict", "saturated_from"}) id.erase(k);
    identity.push_back({{"ropecheck_version", r.str(parts[i], "ropecheck_version")},
                        {"command", r.str(parts[i], "command")},
                        {"report", id}});
    const std::string v = r.str(parts[i], "verdict");
    if (v != "pass" && v != "fail" && v != "not-tested") r.bad("unknown verdict '" + v + "'");
    verdicts.push_back(v == "pass" ? Verdict::pass : (v == "fail" ? Verdict::fail : Verdict::not_tested));
  }
  const std::vector<std::size_t> order = io::order_parts(shards, identity, names);
  MergedProps m;
  m.report = parts[order.front()]["report"];
  // One run lists the outcomes per output dtype, every property in order; each part holds a
  // contiguous range of the properties.
  nlohmann::json props = nlohmann::json::array();
  std::size_t placed = 0, total = 0;
  for (const nlohmann::json& dtype : m.report["dtypes"])
    for (std::size_t k : order)
      for (const nlohmann::json& p : parts[k]["report"]["properties"])
        if (p.is_object() && p.contains("dtype") && p["dtype"] == dtype) {
          props.push_back(p);
          ++placed;
        }
  for (std::size_t k : order) {
    total += parts[k]["report"]["properties"].size();
    m.verdict = combine(m.verdict, verdicts[k]);
  }
  if (placed != total)
    throw InputError("merge: the parts list outcomes for output dtypes their reports do not run");
  m.report["properties"] = props;
  // As SuiteReport::saturated_from over the merged outcomes (a saturated outcome always ran, so counts).
  nlohmann::json sat = nullptr;
  for (const nlohmann::json& p : props)
    if (p.value("verdict", "") == "not-tested" && p.value("saturated", std::int64_t{0}) > 0 &&
        p.contains("first_saturated_position") && p["first_saturated_position"].is_number_integer()) {
      const std::int64_t v = p["first_saturated_position"].get<std::int64_t>();
      if (sat.is_null() || std::llabs(v) < std::llabs(sat.get<std::int64_t>())) sat = v;
    }
  m.report["saturated_from"] = sat;
  m.report["passed"] = m.verdict == Verdict::pass;
  m.report["verdict"] = std::string(to_string(m.verdict));
  return m;
}

}  // namespace ropecheck::cli
