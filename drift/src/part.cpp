// Drift parts (part.hpp): the JSON of a shard's measurements and their merge into one run's result.
#include "ropecheck/drift/part.hpp"

#include "ropecheck/core/spec_json.hpp"
#include "ropecheck/io/part_file.hpp"
#include "ropecheck/io/tensor.hpp"

#ifndef ROPECHECK_VERSION
#define ROPECHECK_VERSION "unknown"
#endif

namespace ropecheck::drift {

namespace {

using io::exact_number;
using io::PartReader;
using nlohmann::json;

constexpr const char* kPartFormat = "ropecheck-drift-part";
constexpr int kPartVersion = 1;

// A statistic as [max, sum of squares, count]; Metrics as [samples, nonfinite, angle, trig, table,
// rot_ulp, rot_rel, [shift...]].
json stat_json(const Stat& s) { return json::array({exact_number(s.max), exact_number(s.sumsq), s.count}); }
Stat stat_from(const PartReader& r, const json& j) {
  if (!j.is_array() || j.size() != 3 || !j[2].is_number_integer()) r.bad("a statistic is not [max, sumsq, count]");
  return {r.dbl(j[0]), r.dbl(j[1]), j[2].get<std::int64_t>()};
}
json metrics_json(const Metrics& m) {
  json sh = json::array();
  for (const Stat& s : m.shift) sh.push_back(stat_json(s));
  return json::array({m.samples, m.nonfinite, stat_json(m.angle), stat_json(m.trig), stat_json(m.table),
                      stat_json(m.rot_ulp), stat_json(m.rot_rel), sh});
}
Metrics metrics_from(const PartReader& r, const json& j) {
  if (!j.is_array() || j.size() != 8 || !j[0].is_number_integer() || !j[1].is_number_integer() || !j[7].is_array())
    r.bad("a position's metrics are not [samples, nonfinite, angle, trig, table, rot_ulp, rot_rel, shifts]");
  Metrics m;
  m.samples = j[0].get<std::int64_t>();
  m.nonfinite = j[1].get<std::int64_t>();
  m.angle = stat_from(r, j[2]);
  m.trig = stat_from(r, j[3]);
  m.table = stat_from(r, j[4]);
  m.rot_ulp = stat_from(r, j[5]);
  m.rot_rel = stat_from(r, j[6]);
  for (const json& s : j[7]) m.shift.push_back(stat_from(r, s));
  return m;
}

json optional_json(const std::optional<std::int64_t>& p) { return p ? json(*p) : json(nullptr); }

json breakdown_json(const Breakdown& b) {
  return {{"class", std::string(accuracy::to_string(b.cls))}, {"position", optional_json(b.position)},
          {"quantity", b.quantity},  {"head", b.head},       {"pair", b.pair},
          {"channel", b.channel},    {"error", exact_number(b.error)}, {"allowed", exact_number(b.allowed)},
          {"saturated_from", optional_json(b.saturated_from)}};
}
Breakdown breakdown_from(const PartReader& r, const json& j, accuracy::AccuracyClass cls) {
  if (r.str(j, "class") != accuracy::to_string(cls)) r.bad("'breakdown' out of class order");
  Breakdown b;
  b.cls = cls;
  b.position = r.opt(j, "position");
  b.quantity = r.str(j, "quantity");
  b.head = static_cast<int>(r.i64(j, "head"));
  b.pair = static_cast<int>(r.i64(j, "pair"));
  b.channel = static_cast<int>(r.i64(j, "channel"));
  b.error = r.dbl(j, "error");
  b.allowed = r.dbl(j, "allowed");
  b.saturated_from = r.opt(j, "saturated_from");
  return b;
}

json uniqueness_json(const Uniqueness& u) {
  return {{"positions", u.positions},         {"distinct", u.distinct},
          {"first_collision", optional_json(u.first_collision)}, {"collides_with", optional_json(u.collides_with)},
          {"distinct_below", u.distinct_below}, {"seconds", u.seconds}};
}
Uniqueness uniqueness_from(const PartReader& r, const json& j) {
  Uniqueness u;
  u.positions = r.i64(j, "positions");
  u.distinct = r.i64(j, "distinct");
  u.first_collision = r.opt(j, "first_collision");
  u.collides_with = r.opt(j, "collides_with");
  const json& below = r.at(j, "distinct_below");
  if (!below.is_array()) r.bad("'distinct_below' is not a list");
  for (const json& d : below) {
    if (!d.is_number_integer()) r.bad("'distinct_below' is not a list of integers");
    u.distinct_below.push_back(d.get<std::int64_t>());
  }
  u.seconds = r.dbl(j, "seconds");
  return u;
}

// What every part of a run shares besides `run`: the spec and the options that shape the results.
json setup_json(const DriftResult& r) {
  const DriftOptions& o = r.options;
  json names = json::array();
  for (const KernelResult& c : r.kernels) names.push_back(c.name);
  return {{"spec", spec_to_json(r.spec)},
          {"storage_dtype", to_string(o.storage)},
          {"seq_len", r.seq_len},
          {"attention_factor", exact_number(r.attention_factor)},
          {"heads", o.heads},
          {"seed", o.seed},
          {"shifts", o.shifts},
          {"key_distance", o.key_distance},
          {"uniqueness_pass", o.uniqueness},
          {"sampling", {{"max_pos", o.sampling.max_pos},
                        {"window", o.sampling.window},
                        {"per_octave", o.sampling.per_octave},
                        {"bins_per_octave", o.sampling.bins_per_octave}}},
          {"candidates", names}};
}

}  // namespace

nlohmann::json part_to_json(const DriftResult& r, const nlohmann::json& run) {
  json cands = json::array();
  for (const KernelResult& c : r.kernels) {
    json positions = json::array();
    for (std::int64_t i = r.first_sample; i < r.last_sample; ++i)
      positions.push_back(metrics_json(c.positions[static_cast<std::size_t>(i)]));
    json bd = json::array();
    for (const Breakdown& b : c.breakdown) bd.push_back(breakdown_json(b));
    cands.push_back({{"name", c.name},
                     {"description", c.description},
                     {"known_bad", c.known_bad},
                     {"is_recipe", c.is_recipe},
                     {"table_dtype", c.table_dtype ? json(to_string(*c.table_dtype)) : json(nullptr)},
                     {"has_rows", c.has_rows},
                     {"has_table", c.has_table},
                     {"positions", positions},
                     {"breakdown", bd},
                     {"uniqueness", c.uniqueness ? uniqueness_json(*c.uniqueness) : json(nullptr)},
                     {"seconds", c.seconds}});
  }
  return {{"format", kPartFormat},
          {"format_version", kPartVersion},
          {"ropecheck_version", ROPECHECK_VERSION},
          {"command", "drift"},
          {"shard", {{"index", r.options.shard.index}, {"count", r.options.shard.count}}},
          {"samples", {{"first", r.first_sample}, {"last", r.last_sample}, {"total", r.plan.positions.size()}}},
          {"run", run},
          {"setup", setup_json(r)},
          {"candidates", cands},
          {"kernel_failures", r.kernel_failures},
          {"seconds", r.seconds}};
}

MergedDrift merge_drift_parts(const std::vector<nlohmann::json>& parts, const std::vector<std::string>& names) {
  std::vector<Shard> shards;
  std::vector<json> identity;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const PartReader r{names[i], "drift part"};
    shards.push_back(r.header(parts[i], kPartFormat, kPartVersion));
    identity.push_back({{"ropecheck_version", r.str(parts[i], "ropecheck_version")},
                        {"command", r.str(parts[i], "command")},
                        {"run", r.at(parts[i], "run")},
                        {"setup", r.at(parts[i], "setup")}});
  }
  const std::vector<std::size_t> order = io::order_parts(shards, identity, names);
  const json& first = parts[order.front()];
  const PartReader r0{names[order.front()], "drift part"};
  const json& setup = r0.at(first, "setup");

  MergedDrift m;
  m.run = r0.at(first, "run");
  DriftResult& res = m.result;
  try {
    res.spec = spec_from_json(r0.at(setup, "spec"));
  } catch (const SpecError& e) {
    r0.bad(std::string("its spec: ") + e.what());
  }
  DriftOptions& o = res.options;
  const std::optional<DType> storage = parse_dtype(r0.str(setup, "storage_dtype"));
  if (!storage) r0.bad("unknown storage_dtype");
  o.storage = *storage;
  o.heads = static_cast<int>(r0.i64(setup, "heads"));
  o.seed = r0.at(setup, "seed").get<std::uint64_t>();
  o.shifts = r0.at(setup, "shifts").get<std::vector<std::int64_t>>();
  o.key_distance = r0.i64(setup, "key_distance");
  o.uniqueness = r0.boolean(setup, "uniqueness_pass");
  const json& sm = r0.at(setup, "sampling");
  o.sampling = {r0.i64(sm, "max_pos"), static_cast<int>(r0.i64(sm, "window")), static_cast<int>(r0.i64(sm, "per_octave")),
                static_cast<int>(r0.i64(sm, "bins_per_octave"))};
  try {
    res.plan = make_sampling_plan(o.sampling);
  } catch (const std::invalid_argument& e) {
    r0.bad(std::string("its sampling plan: ") + e.what());
  }
  res.seq_len = r0.i64(setup, "seq_len");
  res.attention_factor = r0.dbl(setup, "attention_factor");
  const std::size_t n = res.plan.positions.size();

  const std::vector<std::string> cand_names = r0.strings(setup, "candidates");
  res.kernels.resize(cand_names.size());
  for (std::size_t k : order) {
    const PartReader r{names[k], "drift part"};
    const json& j = parts[k];
    const json& samples = r.at(j, "samples");
    const auto [lo, hi] = shard_range(static_cast<std::int64_t>(n), shards[k], "sampled positions");
    if (r.i64(samples, "total") != static_cast<std::int64_t>(n) || r.i64(samples, "first") != lo || r.i64(samples, "last") != hi)
      r.bad("its samples are not shard " + shards[k].text() + "'s");
    const json& cands = r.at(j, "candidates");
    if (!cands.is_array() || cands.size() != cand_names.size()) r.bad("'candidates' does not match 'setup'");
    for (std::size_t c = 0; c < cand_names.size(); ++c) {
      const json& cj = cands[c];
      KernelResult& cr = res.kernels[c];
      if (k == order.front()) {
        cr.name = r.str(cj, "name");
        cr.description = r.str(cj, "description");
        cr.known_bad = r.boolean(cj, "known_bad");
        cr.is_recipe = r.boolean(cj, "is_recipe");
        if (!r.at(cj, "table_dtype").is_null()) cr.table_dtype = parse_dtype(r.str(cj, "table_dtype"));
        cr.has_rows = r.boolean(cj, "has_rows");
        cr.has_table = r.boolean(cj, "has_table");
        cr.positions.resize(n);
        for (accuracy::AccuracyClass cls : accuracy::kAccuracyClasses) {
          cr.breakdown.emplace_back();
          cr.breakdown.back().cls = cls;
        }
      }
      if (r.str(cj, "name") != cand_names[c]) r.bad("'candidates' does not match 'setup'");
      const json& pos = r.at(cj, "positions");
      if (!pos.is_array() || static_cast<std::int64_t>(pos.size()) != hi - lo) r.bad("'positions' is not its samples'");
      for (std::int64_t i = lo; i < hi; ++i)
        cr.positions[static_cast<std::size_t>(i)] = metrics_from(r, pos[static_cast<std::size_t>(i - lo)]);
      // The first sampled position wins: parts come in shard order, positions ascend.
      const json& bd = r.at(cj, "breakdown");
      if (!bd.is_array() || bd.size() != accuracy::kAccuracyClasses.size()) r.bad("'breakdown' does not list every class");
      for (std::size_t ci = 0; ci < bd.size(); ++ci) {
        const Breakdown b = breakdown_from(r, bd[ci], accuracy::kAccuracyClasses[ci]);
        if (k == order.front()) cr.breakdown[ci].saturated_from = b.saturated_from;
        if (!cr.breakdown[ci].position && b.position) cr.breakdown[ci] = b;
      }
      if (!r.at(cj, "uniqueness").is_null()) {
        if (cr.uniqueness) r.bad("a second uniqueness pass for " + cr.name);
        cr.uniqueness = uniqueness_from(r, r.at(cj, "uniqueness"));
      }
      cr.seconds += r.dbl(cj, "seconds");
    }
    for (const std::string& f : r.strings(j, "kernel_failures")) res.kernel_failures.push_back(f);
    res.seconds += r.dbl(j, "seconds");
  }
  for (KernelResult& c : res.kernels) {
    if (o.uniqueness && !c.uniqueness) r0.bad("no part ran the uniqueness pass of " + c.name);
    summarize_positions(c, res.plan, o.shifts.size());
  }
  res.first_sample = 0;
  res.last_sample = static_cast<std::int64_t>(n);
  return m;
}

}  // namespace ropecheck::drift
