// drift --stores (drift/DRIFT.md, "Quantized stores"): per position bin, each recipe's rotation error next
// to the error of the store its binary32 values go into (FP8, GGML q8_0 / q4_0, MLX int4 / int8 affine),
// and the crossover: the first sampled position where the recipe's rotation error exceeds half a quantum
// of the store, so that its stored value may differ from the exact values' one by more than a quantum
// (below it the store swamps the rotation error). The quantum: FP8 the step at the pair's magnitude M,
// an integer store its group's step (D + |q| ds + db).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/core/quantized_store_spec.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/drift/sampling.hpp"
#include "ropecheck/kernels/recipe.hpp"

namespace ropecheck::drift {

struct StoresOptions {
  SamplingOptions sampling;
  int heads = 4;
  std::uint64_t seed = 0;
  std::optional<std::int64_t> seq_len;
};

// One bin of one (recipe, store): maxima over its sampled positions, heads and rotated channels.
struct StoreBin {
  std::int64_t lo = 0, hi = 0;
  int positions = 0;
  double rot_rel = 0;        // |y~ - y*| / M: the recipe's binary32 rotation error (drift's rot_rel, before any store)
  double store_rel = 0;      // |Q(fl32 y*) - y*| / M: the store's own error on the exact values
  double rot_quanta = 0;     // |y~ - y*| / quantum: the rotation error in quanta of the store
  double code_diff = 0;      // |Q(y~) - Q(fl32 y*)| / quantum: how far the recipe's stored value moved, in quanta
  double codes_changed = 0;  // fraction of the elements whose stored value moved by half a quantum or more (code_diff >= 1/2)
};

struct StoreCurve {
  std::string recipe, store;
  std::vector<StoreBin> bins;
  std::optional<std::int64_t> crossover;  // first sampled position with rot_quanta > 1/2; none: swamped everywhere
  std::int64_t elements = 0, changed = 0;
};

struct StoresResult {
  std::string spec_name;
  SamplingPlan plan;
  StoresOptions options;
  std::vector<StoreCurve> curves;  // recipes in the order given, each with every store in the order given
  double seconds = 0;
};

// Throws SpecError for a spec the exact side rejects; std::invalid_argument for sampling options.
StoresResult run_stores(const EncodingSpec& spec, const std::vector<kernels::Recipe>& recipes,
                        const std::vector<std::pair<std::string, quant::StoreSpec>>& stores, const StoresOptions& options);

// The files (DRIFT.md, "Quantized stores"): stores.csv, stores.json, stores.md.
std::string stores_csv(const StoresResult& r);
nlohmann::json stores_json(const StoresResult& r, const std::string& command_line);
std::string stores_md(const StoresResult& r);

}  // namespace ropecheck::drift
