// run_props_stores (props_stores.hpp): the options checked and every store parsed before anything runs, one
// line per (property, store), the failures with their reproduce line, the verdict; --report as
// PROPERTIES.md "Storage properties" documents it.
#include "props_stores.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "ropecheck/io/atomic_output.hpp"
#include "ropecheck/props/kut_target.hpp"
#include "ropecheck/props/rapidcheck_seed.hpp"
#include "ropecheck/props/store_properties.hpp"
#include "ropecheck/reference/presets.hpp"

namespace ropecheck::cli {

namespace {

std::vector<std::string> comma_items(const std::string& s) {
  std::vector<std::string> out;
  std::size_t b = 0;
  while (b <= s.size()) {
    const std::size_t c = std::min(s.find(',', b), s.size());
    if (c > b) out.push_back(s.substr(b, c - b));
    b = c + 1;
  }
  return out;
}

struct StoresRun {
  kernels::Recipe recipe{};
  std::string recipe_name;
  EncodingSpec spec;
  std::vector<std::pair<std::string, quant::StoreSpec>> stores;  // item as given, parsed
  std::vector<std::string> only;
};

StoresRun stores_run(const PropsStoresArgs& a) {
  if (!a.incompatible.empty()) throw SpecError(a.incompatible + ": not with --stores (the storage properties run alone)");
  if (!a.target.empty() || a.kernel.empty())
    throw SpecError("--stores: give --kernel builtin:RECIPE (the storage properties judge ropecheck's own fused recipes)");
  const plugin::KernelName k = kernel_name(a.kernel, "--kernel");
  if (k.kind != plugin::KernelName::Kind::builtin)
    throw SpecError("--stores: --kernel " + a.kernel + " has no store of its own; only builtin:RECIPE kernels do");
  if (a.cases < 1) throw SpecError("--cases must be >= 1, got " + std::to_string(a.cases));
  if (a.max_pos < 0) throw SpecError("--max-pos must be >= 0, got " + std::to_string(a.max_pos));
  if (a.max_pos > kMaxPosition)
    throw SpecError("--max-pos must be at most 2^53 = 9007199254740992, got " + std::to_string(a.max_pos));
  StoresRun run;
  run.recipe = k.recipe, run.recipe_name = k.canonical();
  const bool has_spec = !a.source->preset.empty() || !a.source->hf_config.empty() || !a.source->spec_file.empty();
  run.spec = has_spec ? a.source->load() : load_preset("llama-3.1-8b");
  if (run.spec.family != Family::rope) throw SpecError("--stores: the storage properties need a RoPE spec, got a sinusoidal one");
  const auto items = comma_items(a.stores);
  if (items.empty()) throw SpecError("--stores: empty list");
  for (const std::string& item : items) {
    std::string why;
    const auto s = quant::parse_store(item, why);
    if (!s) throw SpecError("--stores: '" + item + "': " + why);
    // The properties draw their own data (heads scaled by 2^-10 .. 2^5): a fixed scale would saturate, and
    // saturation is the store's rule, not the rotation's error (a given scale is judged by check).
    if (s->given_scale())
      throw SpecError("--stores: '" + item + "': a given scale is not a storage property's (the drawn data would " +
                      "saturate it); check a golden set written with it");
    // A scale over every token (per-tensor, per-head) would tie each drawn token's store to the others'.
    if (s->whole_tensor_scale())
      throw SpecError("--stores: '" + item + "': a scale over every token is not a storage property's (the " +
                      "properties store one drawn token at a time); check a golden set written with it");
    const std::string problem = quant::store_head_dim_problem(*s, run.spec.rope.head_dim);
    if (!problem.empty()) throw SpecError("--stores: '" + item + "': " + problem);
    run.stores.emplace_back(item, *s);
  }
  run.only = a.only.empty() ? props::store_property_names() : comma_items(a.only);
  for (const std::string& p : run.only)
    if (p != "store_shift" && p != "norm_invariance")
      throw SpecError("--only: unknown storage property '" + p + "' (with --stores: store_shift, norm_invariance)");
  if (!a.report.empty()) io::check_file_destination(a.report, "--report");
  return run;
}

std::string reproduce(const PropsStoresArgs& a, const StoresRun& r, const props::StorePropertyOutcome& o, const std::string& item) {
  std::string s = "ropecheck props --kernel " + r.recipe_name + " --stores " + (item.empty() ? r.stores.front().first : item);
  if (!a.source->preset.empty()) s += " --preset " + a.source->preset;
  else if (!a.source->spec_file.empty()) s += " --spec " + a.source->spec_file;
  else if (!a.source->hf_config.empty()) s += " --hf-config " + a.source->hf_config;
  s += fmt::format(" --only {} --seed {} --cases {}", o.property, o.seed, a.cases);
  return a.max_pos > 0 ? s + fmt::format(" --max-pos {}", a.max_pos) : s;
}

nlohmann::json outcome_json(const props::StorePropertyOutcome& o, const std::string& reproduce_line) {
  nlohmann::json j = {{"property", o.property}, {"store", o.store.empty() ? nlohmann::json() : nlohmann::json(o.store)},
                      {"verdict", std::string(to_string(o.verdict))}, {"cases", o.cases}, {"worst_margin", o.worst_margin},
                      {"bounds", o.bounds}, {"saturated", o.saturated}, {"reproduce", reproduce_line}};
  j["counterexample"] = o.counterexample.empty() ? nlohmann::json() : nlohmann::json(o.counterexample);
  return j;
}

}  // namespace

int run_props_stores(const PropsStoresArgs& a) {
  const StoresRun r = stores_run(a);
  props::set_rapidcheck_seed(a.seed);
  props::StorePropsOptions so;
  so.cases = a.cases, so.seed = a.seed;
  if (a.max_pos > 0) so.max_position = a.max_pos;
  props::StoreRecipe rec;
  rec.recipe = r.recipe;
  const auto cls = props::kernel_claimed_class(r.recipe, DType::f32);
  fmt::print("recipe {} ({} to binary32, then stored), spec {}, seed {}, {} cases per property, positions up to {}\n",
             r.recipe_name, accuracy::to_string(cls), r.spec.name, a.seed, a.cases, so.max_position);
  std::vector<std::pair<props::StorePropertyOutcome, std::string>> outs;  // outcome, reproduce line
  for (const std::string& p : r.only) {
    if (p == "norm_invariance") {
      auto o = props::run_norm_invariance(r.spec, rec, so);
      outs.emplace_back(o, reproduce(a, r, o, ""));
      continue;
    }
    for (const auto& [item, s] : r.stores) {
      auto o = props::run_store_shift(r.spec, s, rec, so);
      o.store = item;
      outs.emplace_back(o, reproduce(a, r, o, item));
    }
  }
  Verdict v = Verdict::pass;
  for (const auto& [o, line] : outs) {
    v = combine(v, o.verdict);
    fmt::print("{:<16} {:<32} {:<10} worst margin {:.3g} ({} cases{})\n", o.property, o.store.empty() ? "-" : o.store,
               to_string(o.verdict), o.worst_margin, o.cases,
               o.saturated ? fmt::format(", {} of {} bounds saturated", o.saturated, o.bounds) : "");
  }
  for (const auto& [o, line] : outs)
    if (o.verdict == Verdict::fail)
      fmt::print("\nFAIL {}{}\n  counterexample: {}\n  reproduce: {}\n", o.property, o.store.empty() ? "" : " (store " + o.store + ")",
                 o.counterexample, line);
  if (!a.report.empty()) {
    nlohmann::json j = {{"format", "ropecheck-props-stores-report"}, {"format_version", 1}, {"recipe", r.recipe_name},
                        {"class", std::string(accuracy::to_string(cls))}, {"spec", r.spec.name}, {"seed", a.seed},
                        {"cases", a.cases}, {"max_position", so.max_position}, {"verdict", std::string(to_string(v))}};
    j["properties"] = nlohmann::json::array();
    for (const auto& [o, line] : outs) j["properties"].push_back(outcome_json(o, line));
    io::write_file_atomically(a.report, j.dump(2) + "\n", "--report");
  }
  fmt::print("{}\n", v == Verdict::pass ? "all storage properties hold"
                     : v == Verdict::fail ? "a storage property failed"
                                          : "NOT TESTED: no storage property failed, but some class bounds were saturated");
  return exit_code(v);
}

}  // namespace ropecheck::cli
