// `ropecheck drift --stores LIST` (drift/DRIFT.md, "Quantized stores"): the front end over
// drift::run_stores, called by cmd_drift.cpp once the spec, the kernels and the sweep's options are read.
#pragma once

#include <string>
#include <vector>

#include "ropecheck/core/spec.hpp"
#include "ropecheck/drift/sweep.hpp"
#include "ropecheck/plugin/kernel_name.hpp"

namespace ropecheck::cli {

struct DriftStoresArgs {
  std::string stores;      // --stores: golden --stores' items
  std::string conflict;    // the first option given that --stores does not combine with ("" when none)
  std::string out;         // the output folder
  bool overwrite = false;
  std::string command_line;
};

// Every store parsed and every kernel checked (ropecheck's own CPU recipes only) before the output folder is
// made; writes stores.csv, stores.json, stores.md, prints the crossover table. Exit 0.
int run_drift_stores(const EncodingSpec& spec, const std::vector<plugin::KernelName>& names, const drift::DriftOptions& d,
                     const DriftStoresArgs& a);

}  // namespace ropecheck::cli
