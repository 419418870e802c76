// `ropecheck merge`: joins the shards of a run made with --shard I/N (golden sets today).
#include <fmt/core.h>

#include "commands.hpp"
#include "memory_option.hpp"
#include "ropecheck/golden/golden_merge.hpp"

namespace ropecheck::cli {

Command add_merge_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "merge", "join the shards of a run made with --shard I/N into what one run writes (golden sets)");
  auto o = std::make_shared<golden::GoldenMergeOptions>();
  auto parts = std::make_shared<std::vector<std::string>>();
  auto max_memory = std::make_shared<std::string>();
  cmd->add_option("parts", *parts, "the shard folders written by `golden --shard I/N` (any order)")->required();
  cmd->add_option("--out", o->out, "output folder (must not exist unless --overwrite)")->required();
  cmd->add_flag("--overwrite", o->overwrite, "replace an existing output folder");
  add_max_memory_option(*cmd, *max_memory);
  return {cmd, [o, parts, max_memory] {
            o->parts.assign(parts->begin(), parts->end());
            o->max_memory = max_memory_bytes(*max_memory);
            const nlohmann::json m = golden::merge_golden_shards(*o);
            fmt::print("merged {} shards into {}: {} tokens, dtypes {}, {} files\n", o->parts.size(), o->out.string(),
                       m["positions"]["tokens"].get<std::int64_t>(), m["dtypes"].dump(), m["files"].size());
            return 0;
          }};
}

}  // namespace ropecheck::cli
