// The files of drift --stores (stores.hpp; keys and columns documented in DRIFT.md, "Quantized stores").
#include <fmt/core.h>

#include "ropecheck/drift/stores.hpp"

namespace ropecheck::drift {

namespace {

nlohmann::json finite_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

std::string crossover_cell(const StoreCurve& c, std::int64_t N) {
  return c.crossover ? std::to_string(*c.crossover) : fmt::format("none below {}", N);
}

}  // namespace

std::string stores_csv(const StoresResult& r) {
  std::string out = "recipe,store,bin_lo,bin_hi,positions,rot_rel_max,store_rel_max,rot_quanta_max,code_diff_max,codes_changed\n";
  for (const StoreCurve& c : r.curves)
    for (const StoreBin& b : c.bins)
      out += fmt::format("{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g}\n", c.recipe, c.store, b.lo, b.hi, b.positions,
                         b.rot_rel, b.store_rel, b.rot_quanta, b.code_diff, b.codes_changed);
  return out;
}

nlohmann::json stores_json(const StoresResult& r, const std::string& command_line) {
  nlohmann::json j = {{"format", "ropecheck-drift-stores"}, {"format_version", 1}, {"command", command_line},
                      {"spec", r.spec_name}, {"heads", r.options.heads}, {"seed", r.options.seed},
                      {"sampling", to_json(r.plan)}};
  j["curves"] = nlohmann::json::array();
  for (const StoreCurve& c : r.curves) {
    nlohmann::json cj = {{"recipe", c.recipe}, {"store", c.store}, {"elements", c.elements}, {"changed", c.changed}};
    cj["crossover"] = c.crossover ? nlohmann::json(*c.crossover) : nlohmann::json();
    cj["bins"] = nlohmann::json::array();
    for (const StoreBin& b : c.bins)
      cj["bins"].push_back({{"lo", b.lo}, {"hi", b.hi}, {"positions", b.positions}, {"rot_rel_max", finite_or_null(b.rot_rel)},
                            {"store_rel_max", finite_or_null(b.store_rel)}, {"rot_quanta_max", finite_or_null(b.rot_quanta)},
                            {"code_diff_max", finite_or_null(b.code_diff)}, {"codes_changed", b.codes_changed}});
    j["curves"].push_back(std::move(cj));
  }
  return j;
}

std::string stores_md(const StoresResult& r) {
  const std::int64_t N = r.plan.options.max_pos;
  std::string out = fmt::format("# {}: rotation error under quantized stores, positions 0..{}\n\n", r.spec_name, N - 1);
  out += "Crossover: the first sampled position where a recipe's rotation error exceeds half a quantum of the store, "
         "so that its stored value may move by more than a quantum (drift/DRIFT.md, \"Quantized stores\").\n\n";
  out += "| recipe | store | crossover | rot_rel max | store_rel max | rot_quanta max | code_diff max | codes changed |\n|---|---|---|---|---|---|---|---|\n";
  for (const StoreCurve& c : r.curves) {
    double rot = 0, st = 0, q = 0, d = 0;
    for (const StoreBin& b : c.bins)
      rot = std::max(rot, b.rot_rel), st = std::max(st, b.store_rel), q = std::max(q, b.rot_quanta), d = std::max(d, b.code_diff);
    out += fmt::format("| {} | {} | {} | {:.3g} | {:.3g} | {:.3g} | {:.3g} | {} of {} |\n", c.recipe, c.store, crossover_cell(c, N),
                       rot, st, q, d, c.changed, c.elements);
  }
  return out;
}

}  // namespace ropecheck::drift
