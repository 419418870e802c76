// Output of a drift investigation (drift/DRIFT.md documents every file, column and key):
//   drift.json        everything but the per-position rows: options, sampling plan, per kernel
//                     the totals, per-bin metrics, breakdown positions and uniqueness
//   bins.csv          kernel x bin metrics
//   positions.csv     kernel x sampled position metrics (what the plots draw)
//   breakdown.csv     kernel x accuracy class: the breakdown position and the element there
//   uniqueness.csv    kernel: distinct positions and the first collision
//   summary.md        Markdown tables: kernel x metric, breakdown positions, angle error per bin
//   plot_data.csv     what the plots draw (upper envelopes of positions.csv's values)
//   drift.gp + PNGs   the gnuplot script (kept so the plots can be restyled) and what it drew
// For --compare: compare.json, compare_bins.csv, compare_positions.csv, compare_plot_data.csv,
// summary.md, compare.gp and its PNG.
//
// Everything is written into a temporary sibling folder that is renamed into place at the end, so
// a failure never leaves a partly written output folder.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/io/atomic_output.hpp"
#include "ropecheck/drift/sweep.hpp"

namespace ropecheck::drift {

// The gnuplot executable: $ROPECHECK_GNUPLOT when set (a path; empty = none), else `gnuplot` on
// PATH. Empty when there is none that can be executed.
std::string find_gnuplot();

// An output folder being written: made (as a temporary sibling) before the computation so that an
// unwritable destination fails early; removed unless commit() moved it into place.
class OutputDir {
 public:
  // Throws SpecError (one line) when `out` exists and overwrite is false, its parent folder is
  // missing, or the temporary folder cannot be made (an unwritable parent). io::OutputFolder
  // (atomic_output.hpp) does the work: signals and stale temporaries are handled there.
  OutputDir(const std::filesystem::path& out, bool overwrite)
      : folder_(out, {.overwrite = overwrite, .create_parents = false, .option = "--out", .command = "drift"}) {}

  const std::filesystem::path& tmp() const { return folder_.tmp(); }
  const std::filesystem::path& out() const { return folder_.out(); }
  // Writes a text file into the temporary folder (SpecError when it cannot).
  void write(const std::string& name, const std::string& text) const { folder_.write(name, text); }
  // Moves the temporary folder to `out` in one rename (an existing `out` is replaced, in one atomic
  // exchange, only when overwrite was given).
  void commit() { folder_.commit(); }

 private:
  io::OutputFolder folder_;
};

nlohmann::json to_json(const DriftResult& r, const std::string& command_line);
nlohmann::json to_json(const CompareResult& r, const std::string& command_line);

// The CSV files and the Markdown summary as text.
std::string bins_csv(const DriftResult& r);
std::string positions_csv(const DriftResult& r);
std::string breakdown_csv(const DriftResult& r);
std::string uniqueness_csv(const DriftResult& r);
std::string summary_markdown(const DriftResult& r, const std::string& command_line);
std::string compare_bins_csv(const CompareResult& r);
std::string compare_positions_csv(const CompareResult& r);
std::string compare_markdown(const CompareResult& r, const std::string& command_line);

// The plots' data (plot_data.csv, compare_plot_data.csv): per sampled position p the upper envelope
// of each plotted metric, the largest value over the sampled positions in [p / 2^(1/8), p], so that
// a curve shows how large the error gets near p rather than the noise between neighbours.
std::string drift_plot_data_csv(const DriftResult& r);
std::string compare_plot_data_csv(const CompareResult& r);
// The gnuplot scripts (they read the plot data from their own folder).
std::string drift_gnuplot_script(const DriftResult& r);
// The PNGs drift.gp draws: a plot with nothing to show on log axes (no kernel with a positive value at
// a position > 0, e.g. angles when every kernel is a plugin) is left out, with a comment in the script.
std::vector<std::string> drift_plot_files(const DriftResult& r);
std::string compare_gnuplot_script(const CompareResult& r);

// Runs `gnuplot SCRIPT` inside dir; SpecError with gnuplot's first error line when it fails.
void run_gnuplot(const std::string& gnuplot, const std::filesystem::path& dir, const std::string& script);

// Writes every file (and the plots when gnuplot is not empty) into dir.tmp(); returns the file
// names written.
std::vector<std::string> write_drift(const DriftResult& r, const OutputDir& dir, const std::string& gnuplot,
                                     const std::string& command_line);
std::vector<std::string> write_compare(const CompareResult& r, const OutputDir& dir, const std::string& gnuplot,
                                       const std::string& command_line);

}  // namespace ropecheck::drift
