// `ropecheck drift --scores` (drift/DRIFT.md, "Scores"): the front end over drift::run_scores, called by
// cmd_drift.cpp once the spec, the kernels and the dtype are read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/drift/scores.hpp"
#include "ropecheck/plugin/kernel_name.hpp"

namespace ropecheck::cli {

struct DriftScoresArgs {
  drift::ScoresOptions options;
  std::string out;  // empty: drift-scores-<spec name>
  std::string default_out;
  bool overwrite = false, no_plots = false;
  std::string command_line;
};

// Checks everything (the pairs included) before the output folder is made; writes, commits, prints the
// table. Exit 0, or 1 when a plugin's calls failed.
int run_drift_scores(const EncodingSpec& spec, const std::vector<plugin::KernelName>& names, const DriftScoresArgs& a);

}  // namespace ropecheck::cli
