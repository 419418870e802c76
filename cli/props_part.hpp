// `props --shard I/N` parts and their merge (`ropecheck merge`): a part is the report of its
// properties (every output dtype) with its shard and its verdict; since a property's outcomes never
// depend on the other properties run, the merged report lists every part's outcomes in the order one
// run lists them and is byte for byte the report one run writes with --no-diagnose
// (props/PROPERTIES.md, "Sharded runs").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/core/shard.hpp"
#include "ropecheck/core/verdict.hpp"

namespace ropecheck::cli {

// The part file: {"format": "ropecheck-props-part", ..., "shard", "verdict", "report": the part's report}.
nlohmann::json props_part_json(const nlohmann::json& report, const Shard& shard, Verdict verdict);

struct MergedProps {
  nlohmann::json report;
  Verdict verdict = Verdict::pass;
};

// InputError (one line naming the files) for parts of different runs, a shard given twice or missing.
MergedProps merge_props_parts(const std::vector<nlohmann::json>& parts, const std::vector<std::string>& names);

}  // namespace ropecheck::cli
