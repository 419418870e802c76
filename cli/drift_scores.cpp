// `ropecheck drift --scores`: drift/scores.hpp's run, its files (an atomic output folder) and one line per
// kernel on stdout (drift/DRIFT.md, "Scores").
#include "drift_scores.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include "ropecheck/drift/scores_writers.hpp"

namespace ropecheck::cli {

namespace {

std::string ratio_cell(const std::optional<double>& v) { return v ? fmt::format("{:.3g}", *v) : "n/t"; }

void print_scores_table(const drift::ScoresResult& r) {
  fmt::print("  {:<16} {:>22} {:>22} {:>9} {:>9} {:>9} {:>9}\n", "candidate", "f32 half-ulps med/max",
             "bf16 half-ulps med/max", "rel max", "err/bnd", "p rel", "o rel");
  for (const drift::ScoresKernel& k : r.kernels) {
    const drift::ScoreSummary& s = k.total;
    fmt::print("  {:<16} {:>22} {:>22} {:>9.3g} {:>9} {:>9.3g} {:>9.3g}\n", k.name,
               fmt::format("{:.3g} / {:.3g}", s.f32_median, s.f32_max),
               fmt::format("{:.3g} / {:.3g}", s.bf16_median, s.bf16_max), s.rel_max, ratio_cell(s.bound_max),
               s.prob_rel_max, s.out_rel_max);
  }
}

}  // namespace

int run_drift_scores(const EncodingSpec& spec, const std::vector<plugin::KernelName>& names, const DriftScoresArgs& a) {
  (void)drift::check_scores_options(spec, a.options);  // bad pairs: one line, before the folder is made
  std::string gnuplot;
  if (!a.no_plots) {
    gnuplot = drift::find_gnuplot();
    if (gnuplot.empty())
      throw SpecError("gnuplot not found (install gnuplot-nox, set ROPECHECK_GNUPLOT, or pass --no-plots)");
  }
  drift::OutputDir dir(a.out.empty() ? a.default_out : a.out, a.overwrite);
  const drift::ScoresResult r = drift::run_scores(spec, names, a.options);
  const std::vector<std::string> files = drift::write_scores(r, dir, gnuplot, a.command_line);
  dir.commit();
  fmt::print("{}: {} pairs ({}) x {} heads, storage {}, {} candidates; logit error in half-ulps of the exact logit, "
             "error / {} bound, softmax rows' max relative error of p and o\n",
             spec.name, r.pair_count, r.pairs, r.options.heads, to_string(r.options.storage), r.kernels.size(),
             to_string(r.options.bound_class));
  print_scores_table(r);
  fmt::print("wrote {} ({:.1f} s): {}\n", dir.out().string(), r.seconds, fmt::join(files, ", "));
  for (const std::string& f : r.kernel_failures) fmt::print("KERNEL FAILURE: {}\n", f);
  if (r.kernel_failures.empty()) return 0;
  fmt::print("FAIL: a kernel failed (see KERNEL FAILURE above)\n");
  return 1;
}

}  // namespace ropecheck::cli
