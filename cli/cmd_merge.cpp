// `ropecheck merge`: joins the parts of a run made with --shard I/N: golden set folders into the set one
// run writes (with --shared DIR: finishes the set the shards wrote into DIR.staging), check part
// reports into the report one run writes (checker/CHECK_REPORT.md, "Sharded checks"), props parts into
// its report (props/PROPERTIES.md, "Sharded runs"), drift parts into the folder one run writes
// (drift/DRIFT.md, "Sharded sweeps").
#include <fmt/core.h>
#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "check_rediagnose.hpp"
#include "commands.hpp"
#include "memory_option.hpp"
#include "props_part.hpp"
#include "ropecheck/core/verdict.hpp"
#include "ropecheck/drift/part.hpp"
#include "ropecheck/drift/writers.hpp"
#include "ropecheck/io/atomic_output.hpp"
#include "ropecheck/checker/check_part.hpp"
#include "ropecheck/checker/run_check.hpp"
#include "ropecheck/golden/golden_merge.hpp"
#include "ropecheck/golden/golden_shared.hpp"
#include "ropecheck/io/tensor.hpp"

namespace ropecheck::cli {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_part(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw InputError("merge: cannot read " + p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("format") || !j["format"].is_string())
    throw InputError("merge: " + p.string() + " is neither a shard folder nor a part report (--shard I/N --report)");
  return j;
}

// Check parts: the merged report, as `check` writes it without --shard, and the verdict's exit code.
int merge_check(const std::vector<nlohmann::json>& parts, const std::vector<std::string>& names, const fs::path& out,
                bool overwrite, bool diagnose, int threads) {
  const checker::MergedCheck m = checker::merge_check_parts(parts, names);
  const checker::CheckReport rep = checker::finalize(m.whole);
  const bool kernel_failed = m.run.value("kernel_failed", false);
  if (!overwrite && fs::exists(out)) throw InputError("--out " + out.string() + " exists (give --overwrite to replace it)");
  checker::CheckOutcome o = checker::merged_outcome(
      rep, m.source, kernel_failed, diagnose ? rediagnose_check(rep, m.run, m.source, threads) : std::nullopt);
  io::write_file_atomically(out, o.to_json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", "--out",
                            overwrite);  // without --overwrite, a report that appeared meanwhile is not replaced
  fmt::print("{}", o.summary());
  fmt::print("merged {} check parts into {}\n", parts.size(), out.string());
  return exit_code(o.verdict);
}

// Props parts: the report one run writes with --no-diagnose, and its verdict's exit code.
int merge_props(const std::vector<nlohmann::json>& parts, const std::vector<std::string>& names, const fs::path& out,
                bool overwrite) {
  const MergedProps m = merge_props_parts(parts, names);
  if (!overwrite && fs::exists(out)) throw InputError("--out " + out.string() + " exists (give --overwrite to replace it)");
  io::write_file_atomically(out, m.report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", "--out",
                            overwrite);
  for (const nlohmann::json& p : m.report["properties"])
    if (p.value("verdict", "") != "pass")
      fmt::print("{} (output {}): {}{}\n", p.value("name", "?"), p.value("dtype", "?"), p.value("verdict", "?"),
                 p.contains("reproduce") ? "; reproduce: " + p["reproduce"].get<std::string>() : "");
  fmt::print("merged {} props parts ({} outcomes) into {}: {}\n", parts.size(), m.report["properties"].size(),
             out.string(), to_string(m.verdict));
  return exit_code(m.verdict);
}

// Drift parts: the folder one run writes (timing fields aside).
int merge_drift(const std::vector<nlohmann::json>& parts, const std::vector<std::string>& names, const fs::path& out,
                bool overwrite) {
  const drift::MergedDrift m = drift::merge_drift_parts(parts, names);
  std::string gnuplot;
  if (m.run.value("plots", false)) {
    gnuplot = drift::find_gnuplot();
    if (gnuplot.empty())
      throw SpecError("gnuplot not found: the parts were run with plots (install gnuplot-nox or set ROPECHECK_GNUPLOT)");
  }
  drift::OutputDir dir(out, overwrite);
  const std::vector<std::string> files = drift::write_drift(m.result, dir, gnuplot, m.run.value("command_line", ""));
  dir.commit();
  fmt::print("merged {} drift parts ({} candidates, {} sampled positions) into {}: {}\n", parts.size(),
             m.result.kernels.size(), m.result.plan.positions.size(), out.string(), fmt::join(files, ", "));
  return 0;
}

}  // namespace

Command add_merge_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "merge",
      "join the parts of a run made with --shard I/N into what one run writes: golden set folders, check or props part "
      "reports (exit code: the merged verdict), or drift parts (a drift folder)");
  auto o = std::make_shared<golden::GoldenMergeOptions>();
  auto parts = std::make_shared<std::vector<std::string>>();
  auto max_memory = std::make_shared<std::string>();
  cmd->add_option("parts", *parts,
                  "the shard folders written by `golden --shard I/N`, or the part files written by "
                  "`check` / `props --shard I/N --report` or `drift --shard I/N --out` (any order)");
  cmd->add_option("--out", o->out, "output folder or report file (must not exist unless --overwrite)");
  auto shared = std::make_shared<std::string>();
  cmd->add_option("--shared", *shared,
                  "DIR: finish the golden set that `golden --shard I/N --shared-out DIR` shards wrote into DIR.staging "
                  "(checks every shard's completion record, hashes the files, moves them to DIR); no parts, no --out");
  cmd->add_flag("--overwrite", o->overwrite, "replace an existing output");
  add_max_memory_option(*cmd, *max_memory);
  auto diagnose = std::make_shared<bool>(false);
  auto threads = std::make_shared<int>(0);
  cmd->add_flag("--diagnose", *diagnose,
                "check parts: diagnose a failing merged check as one run does, reading the golden set and the "
                "candidate the parts name again (their paths must be readable here); without it the merged report "
                "is one run's with --no-diagnose");
  cmd->add_option("--threads", *threads, "with --diagnose: worker threads (default: all cores)")->check(CLI::Range(0, 1024));
  return {cmd, [o, parts, max_memory, diagnose, threads, shared] {
            if (!shared->empty()) {
              if (!parts->empty() || !o->out.empty())
                throw SpecError("merge --shared DIR: takes no parts and no --out (the set goes to DIR)");
              if (*diagnose) throw InputError("--diagnose: only for check parts");
              const nlohmann::json m = golden::finalize_shared_golden_set({.out = *shared, .overwrite = o->overwrite});
              fmt::print("merged the shards in {}.staging into {}: {} tokens, dtypes {}, {} files\n", *shared, *shared,
                         m["positions"]["tokens"].get<std::int64_t>(),
                         m["dtypes"].dump(), m["files"].size());
              return 0;
            }
            if (parts->empty()) throw SpecError("merge: give the parts (or --shared DIR)");
            if (o->out.empty()) throw SpecError("merge: --out is required with parts");
            std::size_t files = 0;
            for (const std::string& p : *parts) files += fs::is_regular_file(p);
            if (files > 0 && files < parts->size())
              throw InputError("merge: give either shard folders (golden) or part files (check, props, drift), not both");
            if (files > 0) {
              std::vector<nlohmann::json> docs;
              for (const std::string& p : *parts) docs.push_back(read_part(p));
              const std::string format = docs.front()["format"].get<std::string>();
              for (std::size_t i = 1; i < docs.size(); ++i)
                if (docs[i]["format"] != format)
                  throw InputError("merge: " + (*parts)[0] + " and " + (*parts)[i] + " are parts of different commands (" +
                                    format + ", " + docs[i]["format"].get<std::string>() + ")");
              if (format == "ropecheck-check-part")
                return merge_check(docs, *parts, o->out, o->overwrite, *diagnose, *threads);
              if (*diagnose) throw InputError("--diagnose: only for check parts");
              if (format == "ropecheck-drift-part") return merge_drift(docs, *parts, o->out, o->overwrite);
              if (format == "ropecheck-props-part") return merge_props(docs, *parts, o->out, o->overwrite);
              throw InputError("merge: " + (*parts)[0] + ": unknown part format '" + format + "'");
            }
            if (*diagnose) throw InputError("--diagnose: only for check parts");
            o->parts.assign(parts->begin(), parts->end());
            o->max_memory = max_memory_bytes(*max_memory);
            const nlohmann::json m = golden::merge_golden_shards(*o);
            fmt::print("merged {} shards into {}: {} tokens, dtypes {}, {} files\n", o->parts.size(), o->out.string(),
                       m["positions"]["tokens"].get<std::int64_t>(), m["dtypes"].dump(), m["files"].size());
            return 0;
          }};
}

}  // namespace ropecheck::cli
