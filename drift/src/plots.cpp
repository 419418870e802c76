// gnuplot scripts for the plots (drift/DRIFT.md, "Plots"). The scripts read the CSV files from their
// own folder, so a user can restyle and rerun them there (`gnuplot drift.gp`).
#include <algorithm>
#include <cmath>

#include <fmt/core.h>

#include "csv_text.hpp"
#include "ropecheck/drift/writers.hpp"

namespace ropecheck::drift {

namespace {

// Twelve colours that stay distinct on white (Okabe-Ito first, then darker tones); they cycle.
constexpr const char* kColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9",
                                    "#000000", "#F0E442", "#8C564B", "#7F7F7F", "#17BECF", "#9467BD"};

// A gnuplot double-quoted string literal.
std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

std::string preamble(const std::string& data, std::int64_t max_pos) {
  return fmt::format(
      "# Drawn by `ropecheck drift` from {0} (columns: drift/DRIFT.md). Restyle and rerun here: gnuplot <this file>\n"
      "set datafile separator \",\"\n"
      "set terminal pngcairo size 960,600 noenhanced linewidth 1.5\n"
      "set logscale xy\n"
      "set xrange [1:{1}]\n"
      "set format x \"%.0s%c\"\n"
      "set format y \"%.0e\"\n"
      "set xlabel \"position\"\n"
      "set grid xtics ytics mxtics lc rgb \"#dddddd\"\n"
      "set key outside right top box opaque\n"
      "set mxtics 10\n"
      "# log axes cannot show 0 (an exact result) or position 0: those points are left out\n"
      "pos(v) = v > 0 ? v : NaN\n",
      data, std::max<std::int64_t>(max_pos, 2));
}

// The upper envelope the plots draw: the largest value over the sampled positions in
// [p / 2^(1/kEnvelopePerOctave), p], p = positions[i] (positions sorted).
constexpr int kEnvelopePerOctave = 8;
template <class Get>
double envelope(const std::vector<std::int64_t>& positions, std::size_t i, Get get) {
  const double lo = static_cast<double>(positions[i]) / std::exp2(1.0 / kEnvelopePerOctave);
  double v = get(i);
  for (std::size_t k = i; k-- > 0 && static_cast<double>(positions[k]) >= lo;) v = std::max(v, get(k));
  return v;
}

using detail::field;
using detail::num;

}  // namespace

namespace {

// The four drift plots. plot_data.csv columns (1-based): 1 kernel, 2 position, 3 angle, 4 cos_sin, 5 rot_ulp,
// 6 rot_rel, 7 shift; one data block per kernel, in r.kernels order.
struct DriftPlot {
  const char* file;
  std::string title;
  const char* ylabel;
  int column;
  bool rows_only;  // recipes only (angles and f32 rows)
  double (*value)(const Metrics&);
};

std::vector<DriftPlot> drift_plots(const DriftResult& r) {
  return {
      {"drift-angle.png", "angle error", "|angle - exact| (rad), max over pairs", 3, true,
       [](const Metrics& m) { return m.angle.max; }},
      {"drift-cos-sin.png", "cos / sin error (f32 values)", "|cos - exact|, |sin - exact|, max over pairs", 4, true,
       [](const Metrics& m) { return m.trig.max; }},
      {"drift-rotated.png", "rotated-vector error", "|rotated - exact| / M, M = att (|x_a| + |x_b|), max", 6, false,
       [](const Metrics& m) { return m.rot_rel.max; }},
      {"drift-shift.png", fmt::format("relative-shift violation, s = {}", r.options.shifts.back()),
       "|logit(m,n) - logit(m+s,n+s)| / (att^2 |q| |k|), max over heads", 7, false,
       [](const Metrics& m) { return m.shift.empty() ? 0.0 : m.shift.back().max; }},
  };
}

bool plots_kernel(const DriftPlot& p, const KernelResult& c) { return !p.rows_only || c.has_rows; }

// gnuplot refuses a plot whose every point is undefined, and log axes leave out 0 and position 0: a plot is
// drawn only when some kernel it shows has a positive value at a position > 0.
bool drawable(const DriftPlot& p, const DriftResult& r) {
  for (const KernelResult& c : r.kernels) {
    if (!plots_kernel(p, c)) continue;
    for (std::size_t i = 0; i < c.positions.size() && i < r.plan.positions.size(); ++i)
      if (r.plan.positions[i] > 0 && p.value(c.positions[i]) > 0) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> drift_plot_files(const DriftResult& r) {
  std::vector<std::string> files;
  for (const DriftPlot& p : drift_plots(r))
    if (drawable(p, r)) files.emplace_back(p.file);
  return files;
}

std::string drift_gnuplot_script(const DriftResult& r) {
  const std::string dt(to_string(r.options.storage));
  const std::string name = r.spec.name.empty() ? "spec" : r.spec.name;
  std::string s = preamble("plot_data.csv", r.plan.options.max_pos);
  s += fmt::format("# Each curve: at every sampled position p, the largest error over the sampled positions in\n"
                   "# [p / 2^(1/{}), p] (an upper envelope; positions.csv has the raw per-position values).\n",
                   kEnvelopePerOctave);
  for (const DriftPlot& p : drift_plots(r)) {
    if (!drawable(p, r)) {
      s += fmt::format("\n# {} is not drawn: no candidate has a {} above 0 at a position above 0{}\n", p.file, p.title,
                       p.rows_only ? " (plugins and CUDA kernels report rotated values only; exact results are 0)"
                                   : " (exact results are 0, which log axes cannot show)");
      continue;
    }
    s += fmt::format("\nset output \"{}\"\nset title {}\nset ylabel {}\nplot \\\n", p.file,
                     quoted(fmt::format("{}, {} storage: {} (upper envelope)", name, dt, p.title)),
                     quoted(p.ylabel));
    bool any = false;
    for (std::size_t i = 0; i < r.kernels.size(); ++i) {
      const KernelResult& c = r.kernels[i];
      if (!plots_kernel(p, c)) continue;
      s += fmt::format("{}  \"plot_data.csv\" index {} using (pos($2)):(pos(${})) with lines lc rgb \"{}\" dt {} title {}",
                       any ? ", \\\n" : "", i, p.column, kColours[i % 12], c.known_bad ? 2 : 1, quoted(c.name));
      any = true;
    }
    s += "\n";
  }
  return s;
}

std::string drift_plot_data_csv(const DriftResult& r) {
  std::string out = "candidate,position,angle_err,cos_sin_err,rot_ulp,rot_rel,shift_err\n";
  const std::vector<std::int64_t>& pos = r.plan.positions;
  for (const KernelResult& c : r.kernels) {
    // Candidates are separated by two blank lines: gnuplot's data blocks (`index i`), which most
    // CSV readers skip (pandas' skip_blank_lines).
    if (&c != &r.kernels.front()) out += "\n\n";
    const std::vector<Metrics>& m = c.positions;
    auto env = [&](std::size_t i, auto get) { return envelope(pos, i, [&](std::size_t k) { return get(m[k]); }); };
    for (std::size_t i = 0; i < pos.size(); ++i) {
      out += fmt::format("{},{},{},{},{},{},{}\n", field(c.name), pos[i],
                         c.has_rows ? num(env(i, [](const Metrics& x) { return x.angle.max; })) : "",
                         c.has_rows ? num(env(i, [](const Metrics& x) { return x.trig.max; })) : "",
                         num(env(i, [](const Metrics& x) { return x.rot_ulp.max; })),
                         num(env(i, [](const Metrics& x) { return x.rot_rel.max; })),
                         num(env(i, [](const Metrics& x) { return x.shift.back().max; })));
    }
  }
  return out;
}

std::string compare_gnuplot_script(const CompareResult& r) {
  // compare_plot_data.csv: 1 position, 2 diff_rel, 3 err_a_rel, 4 err_b_rel (envelopes).
  const std::string dt(to_string(r.options.storage));
  std::string s = preamble("compare_plot_data.csv", r.plan.options.max_pos);
  s += fmt::format(
      "\nset output \"drift-compare.png\"\nset title {}\nset ylabel {}\nplot \\\n"
      "  \"compare_plot_data.csv\" using (pos($1)):(pos($2)) with lines lc rgb \"{}\" title \"|A - B| / M\", \\\n"
      "  \"compare_plot_data.csv\" using (pos($1)):(pos($3)) with lines lc rgb \"{}\" dt 2 title {}, \\\n"
      "  \"compare_plot_data.csv\" using (pos($1)):(pos($4)) with lines lc rgb \"{}\" dt 3 title {}\n",
      quoted(fmt::format("{}, {} storage: {} (A) vs {} (B), rotated vectors (upper envelope)",
                         r.spec.name.empty() ? "spec" : r.spec.name, dt, r.a, r.b)),
      quoted("difference / M, M = att (|x_a| + |x_b|), max over heads and channels"), kColours[0], kColours[1],
      quoted("|A - exact| / M: " + r.a), kColours[2], quoted("|B - exact| / M: " + r.b));
  return s;
}

std::string compare_plot_data_csv(const CompareResult& r) {
  std::string out = "position,diff_rel,err_a_rel,err_b_rel\n";
  const std::vector<std::int64_t>& pos = r.plan.positions;
  const std::vector<CompareMetrics>& m = r.positions;
  for (std::size_t i = 0; i < pos.size(); ++i)
    out += fmt::format("{},{},{},{}\n", pos[i], num(envelope(pos, i, [&](std::size_t k) { return m[k].diff_rel.max; })),
                       num(envelope(pos, i, [&](std::size_t k) { return m[k].err_a_rel.max; })),
                       num(envelope(pos, i, [&](std::size_t k) { return m[k].err_b_rel.max; })));
  return out;
}

}  // namespace ropecheck::drift
