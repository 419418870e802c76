// `ropecheck drift --stores`: drift/stores.hpp's run, its files (an atomic output folder) and the crossover
// table on stdout (drift/DRIFT.md, "Quantized stores").
#include "drift_stores.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include "ropecheck/drift/stores.hpp"
#include "ropecheck/drift/writers.hpp"

namespace ropecheck::cli {

int run_drift_stores(const EncodingSpec& spec, const std::vector<plugin::KernelName>& names, const drift::DriftOptions& d,
                     const DriftStoresArgs& a) {
  if (!a.conflict.empty()) throw SpecError("--stores: not with " + a.conflict);
  std::vector<std::pair<std::string, quant::StoreSpec>> stores;
  std::size_t b = 0;
  while (b <= a.stores.size()) {
    const std::size_t c = std::min(a.stores.find(',', b), a.stores.size());
    const std::string item = a.stores.substr(b, c - b);
    b = c + 1;
    if (item.empty()) continue;
    std::string why;
    const auto s = quant::parse_store(item, why);
    if (!s) throw SpecError("--stores: '" + item + "': " + why);
    if (s->whole_tensor_scale())  // drift stores one token at a time: no tensor to take the scale over
      throw SpecError("--stores: '" + item + "': a scale over every token is not drift's (it stores one token at a " +
                      "time); check a golden set written with it");
    const std::string problem = quant::store_head_dim_problem(*s, spec.rope.head_dim);
    if (!problem.empty()) throw SpecError("--stores: '" + item + "': " + problem);
    stores.emplace_back(item, *s);
  }
  if (stores.empty()) throw SpecError("--stores: empty list");
  std::vector<kernels::Recipe> recipes;
  for (const plugin::KernelName& k : names) {
    if (k.kind != plugin::KernelName::Kind::builtin)
      throw SpecError("--stores: '" + k.given + "': only ropecheck's own CPU recipes are stored (a recipe name or builtin:RECIPE)");
    recipes.push_back(k.recipe);
  }
  drift::StoresOptions so;
  so.sampling = d.sampling, so.heads = d.heads, so.seed = d.seed, so.seq_len = d.seq_len;
  (void)drift::make_sampling_plan(so.sampling);  // bad sampling options: one line, before the folder is made
  drift::OutputDir dir(a.out, a.overwrite);
  const drift::StoresResult r = drift::run_stores(spec, recipes, stores, so);
  dir.write("stores.csv", drift::stores_csv(r));
  dir.write("stores.json", drift::stores_json(r, a.command_line).dump(2) + "\n");
  const std::string md = drift::stores_md(r);
  dir.write("stores.md", md);
  dir.commit();
  fmt::print("{}", md);
  fmt::print("wrote {} ({:.1f} s): stores.csv, stores.json, stores.md\n", dir.out().string(), r.seconds);
  return 0;
}

}  // namespace ropecheck::cli
