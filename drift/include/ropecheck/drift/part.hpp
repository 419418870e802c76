// A drift sweep split over processes (`drift --shard I/N`, `ropecheck merge`): a part holds its
// sampled positions' metrics exactly (max, sum of squares and count of every statistic), the
// breakdown position it found first and the uniqueness passes it ran; the merge folds the positions
// into bins and totals with the code one run uses, so the merged folder is what one run writes
// apart from its timing fields (drift/DRIFT.md, "Sharded sweeps").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/drift/sweep.hpp"

namespace ropecheck::drift {

// The part file ("ropecheck-drift-part"); `run` is what every part of one run shares (the command as
// run, without --shard, and whether plots were asked for), compared by merge_drift_parts.
nlohmann::json part_to_json(const DriftResult& r, const nlohmann::json& run);

struct MergedDrift {
  DriftResult result;  // every sampled position; seconds: the parts' sums
  nlohmann::json run;
};

// Merges the parts' JSON (any order). InputError (one line naming the files) when a part is
// not a drift part, the parts differ in version, run, spec, options or shard count, or a shard is
// given twice or missing.
MergedDrift merge_drift_parts(const std::vector<nlohmann::json>& parts, const std::vector<std::string>& names);

}  // namespace ropecheck::drift
