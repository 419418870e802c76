// Output of `drift --scores` (drift/DRIFT.md, "Scores", documents every file and column):
//   scores.json          options, the pair set, per kernel the totals and the distance / position bins
//   scores_pairs.csv     kernel x pair x head: exact and kernel score, the error in every unit
//   scores_rows.csv      kernel x query row x head: the softmax's probability and output errors
//   scores_bins.csv      kernel x (distance | position) octave bin: the summaries
//   scores_plot_data.csv what the plots draw; scores.gp and its PNGs scores-distance.png, scores-position.png
// Written into the temporary folder of an OutputDir (writers.hpp), moved into place by the caller.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/drift/scores.hpp"
#include "ropecheck/drift/writers.hpp"

namespace ropecheck::drift {

nlohmann::json to_json(const ScoresResult& r, const std::string& command_line);
std::string scores_pairs_csv(const ScoresResult& r);
std::string scores_rows_csv(const ScoresResult& r);
std::string scores_bins_csv(const ScoresResult& r);
std::string scores_plot_data_csv(const ScoresResult& r);
std::string scores_gnuplot_script(const ScoresResult& r);

// Every file (and the plots when gnuplot is not empty); returns the names written.
std::vector<std::string> write_scores(const ScoresResult& r, const OutputDir& dir, const std::string& gnuplot,
                                      const std::string& command_line);

}  // namespace ropecheck::drift
