// The files of `drift --scores` (scores_writers.hpp; columns and keys in drift/DRIFT.md, "Scores").
#include <fmt/core.h>

#include "csv_text.hpp"
#include "ropecheck/drift/scores_writers.hpp"

namespace ropecheck::drift {

namespace scores_detail {

using detail::field;
using detail::num;

std::string opt_num(const std::optional<double>& v) { return v ? num(*v) : std::string(); }

nlohmann::json summary_json(const ScoreSummary& s) {
  return {{"count", s.count}, {"nonfinite", s.nonfinite}, {"saturated", s.saturated}, {"abs_max", s.abs_max},
          {"f32_units_median", s.f32_median}, {"f32_units_max", s.f32_max}, {"bf16_units_median", s.bf16_median},
          {"bf16_units_max", s.bf16_max}, {"rel_median", s.rel_median}, {"rel_max", s.rel_max},
          {"bound_ratio_max", s.bound_max ? nlohmann::json(*s.bound_max) : nlohmann::json(nullptr)},
          {"prob_rel_max", s.prob_rel_max}, {"out_rel_max", s.out_rel_max}};
}

nlohmann::json bins_json(const std::vector<ScoreBin>& bins) {
  nlohmann::json a = nlohmann::json::array();
  for (const ScoreBin& b : bins) {
    nlohmann::json j = summary_json(b.summary);
    j["lo"] = b.lo;
    j["hi"] = b.hi;
    a.push_back(j);
  }
  return a;
}

std::string bin_line(const std::string& name, const char* axis, const ScoreBin& b) {
  const ScoreSummary& s = b.summary;
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", field(name), axis, b.lo, b.hi, s.count,
                     num(s.abs_max), num(s.f32_median), num(s.f32_max), num(s.bf16_median), num(s.bf16_max),
                     num(s.rel_median), num(s.rel_max), opt_num(s.bound_max), s.saturated, s.nonfinite,
                     num(s.prob_rel_max), num(s.out_rel_max));
}

// As drift's other plots (plots.cpp): Okabe-Ito first, then darker tones.
constexpr const char* kScoreColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9",
                                         "#000000", "#F0E442", "#8C564B", "#7F7F7F", "#17BECF", "#9467BD"};

std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) q += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return q + "\"";
}

// One plot: the median error of each kernel in half-ulps of the f32 logit per octave bin (blocks
// `first` .. `first + kernels - 1` of scores_plot_data.csv), with the two roundings as reference lines.
std::string score_plot(const ScoresResult& r, const char* file, const char* xlabel, const char* what, std::size_t first) {
  const std::string dt(to_string(r.options.storage));
  std::int64_t hi = 2;  // the x range, so that the reference lines draw even when no kernel has a point
  for (const ScoresKernel& k : r.kernels)
    for (const ScoreBin& b : first == 0 ? k.by_distance : k.by_position) hi = std::max(hi, b.hi);
  std::string s = fmt::format(
      "\nset output \"{}\"\nset xrange [1:{}]\nset title {}\nset xlabel {}\nplot \\\n", file, hi,
      quoted(fmt::format("{}, {} storage: logit error vs {} (median per octave)",
                         r.spec.name.empty() ? "spec" : r.spec.name, dt, what)),
      quoted(xlabel));
  for (std::size_t i = 0; i < r.kernels.size(); ++i)
    s += fmt::format("  \"scores_plot_data.csv\" index {} using (pos($3)):(pos($5)) with linespoints pt 7 ps 0.6 "
                     "lc rgb \"{}\" dt {} title {}, \\\n",
                     first + i, kScoreColours[i % 12],
                     r.kernels[i].known_bad ? 2 : 1, quoted(r.kernels[i].name));
  s += "  1 with lines dt 3 lc rgb \"#000000\" title \"the f32 logit's own rounding (1)\", \\\n"
       "  65536 with lines dt 4 lc rgb \"#7F7F7F\" title \"the bf16 logit's own rounding (2^16)\"\n";
  return s;
}

}  // namespace scores_detail

nlohmann::json to_json(const ScoresResult& r, const std::string& command_line) {
  using namespace scores_detail;
  nlohmann::json ks = nlohmann::json::array();
  for (const ScoresKernel& k : r.kernels)
    ks.push_back({{"name", k.name}, {"description", k.description}, {"known_bad", k.known_bad},
                  {"total", summary_json(k.total)}, {"by_distance", bins_json(k.by_distance)},
                  {"by_position", bins_json(k.by_position)}});
  return {{"command_line", command_line},
          {"spec", r.spec.name},
          {"pairs", r.pairs},
          {"pair_count", r.pair_count},
          {"storage", std::string(to_string(r.options.storage))},
          {"heads", r.options.heads},
          {"seed", r.options.seed},
          {"seq_len", r.seq_len},
          {"scale", r.scale},
          {"bound_class", std::string(to_string(r.options.bound_class))},
          {"kernels", ks},
          {"kernel_failures", r.kernel_failures},
          {"seconds", r.seconds}};
}

std::string scores_pairs_csv(const ScoresResult& r) {
  using namespace scores_detail;
  std::string out = "candidate,query,key,head,exact,score,error,f32_units,bf16_units,rel,bound_ratio,nonfinite\n";
  for (const ScoresKernel& k : r.kernels)
    for (const ScoreRecord& s : k.records)
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", field(k.name), s.query, s.key, s.head, num(s.exact),
                         num(s.candidate), num(s.error), num(s.f32_units), num(s.bf16_units), num(s.rel),
                         opt_num(s.bound_ratio), s.nonfinite ? 1 : 0);
  return out;
}

std::string scores_rows_csv(const ScoresResult& r) {
  using namespace scores_detail;
  std::string out = "candidate,query,head,keys,prob_rel,out_rel\n";
  for (const ScoresKernel& k : r.kernels)
    for (const RowRecord& w : k.rows)
      out += fmt::format("{},{},{},{},{},{}\n", field(k.name), w.query, w.head, w.keys, num(w.error.prob_rel),
                         num(w.error.out_rel));
  return out;
}

std::string scores_bins_csv(const ScoresResult& r) {
  using namespace scores_detail;
  std::string out = "candidate,axis,lo,hi,count,abs_max,f32_units_median,f32_units_max,bf16_units_median,"
                    "bf16_units_max,rel_median,rel_max,bound_ratio_max,saturated,nonfinite,prob_rel_max,out_rel_max\n";
  for (const ScoresKernel& k : r.kernels) {
    for (const ScoreBin& b : k.by_distance) out += bin_line(k.name, "distance", b);
    for (const ScoreBin& b : k.by_position) out += bin_line(k.name, "position", b);
  }
  return out;
}

std::string scores_plot_data_csv(const ScoresResult& r) {
  // Data blocks (two blank lines apart, gnuplot's `index`): every kernel's distance bins, then every
  // kernel's position bins. Columns: 1 candidate, 2 axis, 3 lo, 4 hi, 5 f32 median, 6 f32 max, 7 rel max.
  std::string out = "candidate,axis,lo,hi,f32_units_median,f32_units_max,rel_max\n";
  bool first = true;
  for (const char* axis : {"distance", "position"})
    for (const ScoresKernel& k : r.kernels) {
      if (!first) out += "\n\n";
      first = false;
      for (const ScoreBin& b : std::string(axis) == "distance" ? k.by_distance : k.by_position)
        out += fmt::format("{},{},{},{},{},{},{}\n", detail::field(k.name), axis, b.lo, b.hi,
                           detail::num(b.summary.f32_median), detail::num(b.summary.f32_max),
                           detail::num(b.summary.rel_max));
    }
  return out;
}

std::string scores_gnuplot_script(const ScoresResult& r) {
  std::string s =
      "# Drawn by `ropecheck drift --scores` from scores_plot_data.csv (columns: drift/DRIFT.md, \"Scores\").\n"
      "# Restyle and rerun here: gnuplot scores.gp\n"
      "set datafile separator \",\"\n"
      "set terminal pngcairo size 900,640 noenhanced linewidth 1.5\n"
      "set logscale xy\n"
      "set format x \"%.0s%c\"\n"
      "set format y \"%.0e\"\n"
      "set ylabel \"|score - exact| / (ulp_f32(exact) / 2), median\"\n"
      "set grid xtics ytics lc rgb \"#dddddd\"\n"
      "set key below box opaque\n"
      "# log axes cannot show 0 (bin [0, 1), or an exact score): those points are left out\n"
      "pos(v) = v > 0 ? v : NaN\n";
  s += scores_detail::score_plot(r, "scores-distance.png", "distance m - n (octave bins, lower edge)", "distance", 0);
  s += scores_detail::score_plot(r, "scores-position.png", "query position m (octave bins, lower edge)", "position",
                                 r.kernels.size());
  return s;
}

std::vector<std::string> write_scores(const ScoresResult& r, const OutputDir& dir, const std::string& gnuplot,
                                      const std::string& command_line) {
  std::vector<std::string> files = {"scores.json", "scores_pairs.csv", "scores_rows.csv", "scores_bins.csv",
                                    "scores_plot_data.csv", "scores.gp"};
  dir.write("scores.json", to_json(r, command_line).dump(1) + "\n");
  dir.write("scores_pairs.csv", scores_pairs_csv(r));
  dir.write("scores_rows.csv", scores_rows_csv(r));
  dir.write("scores_bins.csv", scores_bins_csv(r));
  dir.write("scores_plot_data.csv", scores_plot_data_csv(r));
  dir.write("scores.gp", scores_gnuplot_script(r));
  if (!gnuplot.empty()) {
    run_gnuplot(gnuplot, dir.tmp(), "scores.gp");
    files.push_back("scores-distance.png");
    files.push_back("scores-position.png");
  }
  return files;
}

}  // namespace ropecheck::drift
