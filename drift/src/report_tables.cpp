// The CSV files and the Markdown summaries (drift/DRIFT.md, "CSV files", "summary.md").
#include <cmath>

#include <fmt/core.h>

#include "csv_text.hpp"
#include "ropecheck/drift/writers.hpp"

namespace ropecheck::drift {

namespace {

// Shortest round-trip decimal; empty when not measured.
std::string num(const Stat& s, bool rms = false) {
  if (s.empty()) return "";
  return fmt::format("{}", rms ? s.rms() : s.max);
}
using detail::field;
using detail::num;

std::string opt_pos(const std::optional<std::int64_t>& p) { return p ? std::to_string(*p) : ""; }

// Markdown: three significant digits, "—" when not measured.
std::string md(const Stat& s) { return s.empty() ? "—" : fmt::format("{:.3g}", s.max); }
std::string md_pos(const std::optional<std::int64_t>& p) { return p ? std::to_string(*p) : "never"; }

std::string bin_label(const Bin& b) {
  return b.hi - b.lo == 1 ? std::to_string(b.lo) : fmt::format("{}..{}", b.lo, b.hi - 1);
}

}  // namespace

std::string bins_csv(const DriftResult& r) {
  std::string out = "candidate,bin,lo,hi,samples,angle_err_max,angle_err_rms,cos_sin_err_max,cos_sin_err_rms,"
                    "table_err_max,table_err_rms,rot_ulp_max,rot_ulp_rms,rot_rel_max,rot_rel_rms";
  for (std::int64_t s : r.options.shifts) out += fmt::format(",shift_{0}_max,shift_{0}_rms", s);
  out += ",nonfinite,distinct_below_hi\n";
  for (const KernelResult& c : r.kernels)
    for (std::size_t i = 0; i < c.bins.size(); ++i) {
      const Metrics& m = c.bins[i];
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}", field(c.name), i, r.plan.bins[i].lo,
                         r.plan.bins[i].hi, m.samples, num(m.angle), num(m.angle, true), num(m.trig), num(m.trig, true),
                         num(m.table), num(m.table, true), num(m.rot_ulp), num(m.rot_ulp, true), num(m.rot_rel),
                         num(m.rot_rel, true));
      for (std::size_t s = 0; s < r.options.shifts.size(); ++s)
        out += fmt::format(",{},{}", num(m.shift[s]), num(m.shift[s], true));
      out += fmt::format(",{},{}\n", m.nonfinite, c.uniqueness ? std::to_string(c.uniqueness->distinct_below[i]) : "");
    }
  return out;
}

std::string positions_csv(const DriftResult& r) {
  std::string out = "candidate,position,bin,angle_err_max,angle_err_rms,cos_sin_err_max,table_err_max,rot_ulp_max,rot_rel_max";
  for (std::int64_t s : r.options.shifts) out += fmt::format(",shift_{}_max", s);
  out += ",nonfinite\n";
  for (const KernelResult& c : r.kernels)
    for (std::size_t i = 0; i < c.positions.size(); ++i) {
      const Metrics& m = c.positions[i];
      out += fmt::format("{},{},{},{},{},{},{},{},{}", field(c.name), r.plan.positions[i], r.plan.bin_of[i], num(m.angle),
                         num(m.angle, true), num(m.trig), num(m.table), num(m.rot_ulp), num(m.rot_rel));
      for (std::size_t s = 0; s < r.options.shifts.size(); ++s) out += fmt::format(",{}", num(m.shift[s]));
      out += fmt::format(",{}\n", m.nonfinite);
    }
  return out;
}

std::string breakdown_csv(const DriftResult& r) {
  std::string out = "candidate,class,position,quantity,head,pair,channel,error,allowed\n";
  for (const KernelResult& c : r.kernels)
    for (const Breakdown& b : c.breakdown) {
      out += field(c.name) + "," + std::string(accuracy::to_string(b.cls)) + "," + opt_pos(b.position);
      if (b.position)
        out += fmt::format(",{},{},{},{},{},{}\n", b.quantity, b.head, b.pair, b.channel,
                           std::isfinite(b.error) ? num(b.error) : "inf", num(b.allowed));
      else
        out += ",,,,,,\n";
    }
  return out;
}

std::string uniqueness_csv(const DriftResult& r) {
  std::string out = "candidate,positions,distinct,first_collision,collides_with\n";
  for (const KernelResult& c : r.kernels) {
    if (!c.uniqueness) continue;
    const Uniqueness& u = *c.uniqueness;
    out += fmt::format("{},{},{},{},{}\n", field(c.name), u.positions, u.distinct, opt_pos(u.first_collision),
                       opt_pos(u.collides_with));
  }
  return out;
}

std::string summary_markdown(const DriftResult& r, const std::string& command_line) {
  const std::int64_t N = r.plan.options.max_pos;
  std::string s = fmt::format("# Precision drift: {}\n\n", r.spec.name.empty() ? "spec" : r.spec.name);
  s += fmt::format("`{}`\n\n", command_line);
  s += fmt::format(
      "Positions 0..{} ({} sampled: dense windows of {} and {} per octave), storage dtype {}, {} random heads "
      "per position (seed {}), sequence length {} for the frequencies. Errors against the exact reference; "
      "rotated errors in ulps of {} and relative to M = att(|x_a| + |x_b|). drift/DRIFT.md defines every column.\n\n",
      N - 1, r.plan.positions.size(), r.plan.options.window, r.plan.options.per_octave, to_string(r.options.storage),
      r.options.heads, r.options.seed, r.seq_len, to_string(r.options.storage));

  s += "## Candidate x metric (max over all sampled positions)\n\n| candidate | angle err (rad) | cos/sin err (f32) | "
       "table err | rotated (ulp) | rotated (/M) |";
  for (std::int64_t sh : r.options.shifts) s += fmt::format(" shift {} |", sh);
  s += " non-finite | distinct positions | first collision |\n|---|---|---|---|---|---|";
  for (std::size_t i = 0; i < r.options.shifts.size(); ++i) s += "---|";
  s += "---|---|---|\n";
  for (const KernelResult& c : r.kernels) {
    const Metrics& m = c.total;
    s += fmt::format("| {}{} | {} | {} | {} | {} | {} |", c.name, c.known_bad ? " (known bad)" : "", md(m.angle),
                     md(m.trig), md(m.table), md(m.rot_ulp), md(m.rot_rel));
    for (const Stat& st : m.shift) s += fmt::format(" {} |", md(st));
    if (c.uniqueness)
      s += fmt::format(" {} | {} of {} | {} |\n", m.nonfinite, c.uniqueness->distinct, c.uniqueness->positions,
                       c.uniqueness->first_collision
                           ? fmt::format("{} (= {})", *c.uniqueness->first_collision, *c.uniqueness->collides_with)
                           : "none");
    else
      s += fmt::format(" {} | — | — |\n", m.nonfinite);
  }

  s += "\n## Breakdown positions\n\nThe first sampled position where the candidate exceeds the class's per-element "
       "bound (accuracy/ERROR_MODEL.md) on a rotated value or a table value; \"never\" = within it at every sampled "
       "position. \"(saturated from P)\": from position P the class's bound is saturated for some pair (an "
       "all-zero output would pass), so no breakdown there is a verdict on that pair: not tested. \"not tested from P\": "
       "no breakdown before P, and past P \"never\" cannot be claimed.\n\n| candidate |";
  for (accuracy::AccuracyClass c : accuracy::kAccuracyClasses) s += fmt::format(" {} |", accuracy::to_string(c));
  s += "\n|---|";
  for (std::size_t i = 0; i < accuracy::kAccuracyClasses.size(); ++i) s += "---|";
  s += "\n";
  for (const KernelResult& c : r.kernels) {
    s += "| " + c.name + " |";
    for (const Breakdown& b : c.breakdown)
      s += !b.position && b.saturated_from
               ? fmt::format(" not tested from {} |", *b.saturated_from)
               : fmt::format(" {}{} |", md_pos(b.position),
                             b.saturated_from ? fmt::format(" (saturated from {})", *b.saturated_from) : std::string());
    s += "\n";
  }

  s += "\n## Angle error per bin (max, rad)\n\n| positions |";
  for (const KernelResult& c : r.kernels) s += " " + c.name + " |";
  s += "\n|---|";
  for (std::size_t i = 0; i < r.kernels.size(); ++i) s += "---|";
  s += "\n";
  for (std::size_t b = 0; b < r.plan.bins.size(); ++b) {
    s += "| " + bin_label(r.plan.bins[b]) + " |";
    for (const KernelResult& c : r.kernels) s += fmt::format(" {} |", md(c.bins[b].angle));
    s += "\n";
  }
  s += "\n## Rotated error per bin (max, ulp of " + std::string(to_string(r.options.storage)) + ")\n\n| positions |";
  for (const KernelResult& c : r.kernels) s += " " + c.name + " |";
  s += "\n|---|";
  for (std::size_t i = 0; i < r.kernels.size(); ++i) s += "---|";
  s += "\n";
  for (std::size_t b = 0; b < r.plan.bins.size(); ++b) {
    s += "| " + bin_label(r.plan.bins[b]) + " |";
    for (const KernelResult& c : r.kernels) s += fmt::format(" {} |", md(c.bins[b].rot_ulp));
    s += "\n";
  }
  return s;
}

std::string compare_bins_csv(const CompareResult& r) {
  std::string out = "bin,lo,hi,samples,diff_ulp_max,diff_ulp_rms,diff_rel_max,diff_rel_rms,differing,elements,"
                    "angle_diff_max,angle_diff_rms,cos_sin_diff_max,table_diff_max,err_a_ulp_max,err_b_ulp_max,"
                    "err_a_rel_max,err_b_rel_max,nonfinite_a,nonfinite_b\n";
  for (std::size_t i = 0; i < r.bins.size(); ++i) {
    const CompareMetrics& m = r.bins[i];
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", i, r.plan.bins[i].lo,
                       r.plan.bins[i].hi, m.samples, num(m.diff_ulp), num(m.diff_ulp, true), num(m.diff_rel),
                       num(m.diff_rel, true), m.differing, m.elements, num(m.angle_diff), num(m.angle_diff, true),
                       num(m.trig_diff), num(m.table_diff), num(m.err_a_ulp), num(m.err_b_ulp), num(m.err_a_rel),
                       num(m.err_b_rel), m.nonfinite_a, m.nonfinite_b);
  }
  return out;
}

std::string compare_positions_csv(const CompareResult& r) {
  std::string out = "position,bin,diff_ulp_max,diff_rel_max,differing,angle_diff_max,cos_sin_diff_max,table_diff_max,"
                    "err_a_ulp_max,err_b_ulp_max,err_a_rel_max,err_b_rel_max\n";
  for (std::size_t i = 0; i < r.positions.size(); ++i) {
    const CompareMetrics& m = r.positions[i];
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", r.plan.positions[i], r.plan.bin_of[i],
                       num(m.diff_ulp), num(m.diff_rel), m.differing, num(m.angle_diff), num(m.trig_diff),
                       num(m.table_diff), num(m.err_a_ulp), num(m.err_b_ulp), num(m.err_a_rel), num(m.err_b_rel));
  }
  return out;
}

std::string compare_markdown(const CompareResult& r, const std::string& command_line) {
  std::string s = fmt::format("# Comparing {} (A) and {} (B): {}\n\n`{}`\n\n", r.a, r.b,
                              r.spec.name.empty() ? "spec" : r.spec.name, command_line);
  s += fmt::format("A: {}  \nB: {}\n\n", r.a_description, r.b_description);
  s += fmt::format("Positions 0..{} ({} sampled), storage dtype {}, {} random heads per position (seed {}).\n\n",
                   r.plan.options.max_pos - 1, r.plan.positions.size(), to_string(r.options.storage), r.options.heads,
                   r.options.seed);
  auto first = [&](const FirstDifference& f, const char* where) {
    if (!f.position) return fmt::format("- {}: A and B agree everywhere.\n", where);
    return fmt::format("- {}: first difference at position **{}** (pair {}, channel {}): A = {}, B = {}, {:.3g} ulp "
                       "of {}.\n",
                       where, *f.position, f.pair, f.channel, f.a, f.b, f.diff_ulp, to_string(r.options.storage));
  };
  s += first(r.first_sampled, "rotated random vectors at the sampled positions");
  if (r.options.uniqueness)
    s += first(r.first_all, "rotated unit vectors at every position") +
         fmt::format("- positions of 0..{} where the unit rotations differ: {}\n", r.plan.options.max_pos - 1,
                     r.positions_differing_all);
  s += fmt::format("- rotated elements that differ: {} of {}\n\n", r.total.differing, r.total.elements);
  s += "| positions | differing | max diff (ulp) | max diff (/M) | angle diff (rad) | cos/sin diff | A err (ulp) | B err "
       "(ulp) |\n|---|---|---|---|---|---|---|---|\n";
  for (std::size_t b = 0; b < r.bins.size(); ++b) {
    const CompareMetrics& m = r.bins[b];
    s += fmt::format("| {} | {} of {} | {} | {} | {} | {} | {} | {} |\n", bin_label(r.plan.bins[b]), m.differing,
                     m.elements, md(m.diff_ulp), md(m.diff_rel), md(m.angle_diff), md(m.trig_diff), md(m.err_a_ulp),
                     md(m.err_b_ulp));
  }
  return s;
}

}  // namespace ropecheck::drift
