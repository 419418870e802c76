// `ropecheck drift`: precision drift investigations (drift/DRIFT.md). A thin front end over
// ropecheck::drift: options, the output folder (atomic), one line per candidate on stdout.
//
// Exit codes: 0 written; 1 written, but a kernel plugin's calls failed (crashed, hung, exited,
// overran, NaN outputs: the outputs list them under kernel_failures); 2 unusable input (bad
// options, unknown recipe, a plugin that does not load, a sinusoidal spec, an unwritable or
// existing --out, gnuplot missing) with one line on stderr and no output folder.
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <fmt/format.h>

#include "commands.hpp"
#include "drift_scores.hpp"
#include "drift_stores.hpp"
#include "junit.hpp"
#include "memory_option.hpp"
#include "numeric_options.hpp"
#include "ropecheck/drift/swept_kernel.hpp"
#include "ropecheck/drift/part.hpp"
#include "ropecheck/io/atomic_output.hpp"
#include "ropecheck/drift/sweep.hpp"
#include "ropecheck/drift/writers.hpp"
#include "ropecheck/kernels/recipe.hpp"
#include "spec_source.hpp"

namespace ropecheck::cli {
namespace {

struct DriftCliOptions {
  SpecSource source;
  std::string recipes = "all";
  std::string compare;
  std::string compare_class = "fp32-angle";
  std::string dtype = "bf16";
  std::int64_t max_pos = 0;
  std::string out;
  std::string junit;  // --junit FILE (with --compare)
  bool overwrite = false;
  int window = 256, per_octave = 64, bins_per_octave = 1;
  int heads = 4;
  std::uint64_t seed = 0;
  std::string shifts = "1,16,1024";
  std::int64_t key_distance = 16;
  std::int64_t seq_len = 0;
  bool no_uniqueness = false, no_plots = false, quiet = false;
  int threads = 0;
  std::string max_memory;
  std::string shard;  // --shard I/N: --out is the part file
  bool scores = false;  // --scores: logits and softmax (drift_scores.hpp)
  std::string pairs;    // --pairs, with --scores
  std::string stores;   // --stores: rotation error under quantized stores (drift_stores.hpp)
  plugin::PluginClientOptions plugin;
  CLI::Option* max_pos_opt = nullptr;  // given or not (0 is out of range, not "default")
};

std::vector<std::string> split(const std::string& list, char sep = ',') {
  std::vector<std::string> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<std::int64_t> parse_shifts(const std::string& list) {
  std::vector<std::int64_t> out;
  for (const std::string& s : split(list)) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != s.size()) throw SpecError("--shifts: '" + s + "' is not an integer");
    out.push_back(v);
  }
  return out;
}

// "drift-<name>" with the name reduced to characters that are safe in a folder name.
std::string default_out(const EncodingSpec& spec) {
  std::string n;
  for (char c : spec.name)
    n += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '-';
  return n.empty() || n.find_first_not_of("-.") == std::string::npos ? "drift-out" : "drift-" + n;
}

std::string fmt_stat(const drift::Stat& s) { return s.empty() ? "—" : fmt::format("{:.3g}", s.max); }

// A plugin whose calls failed (crash, hang, exit, overrun, NaN; golden/plugin_client.hpp): the
// outputs are written (with those calls' values NaN) and the run fails.
int kernel_failed(const std::vector<std::string>& failures) {
  for (const std::string& f : failures) fmt::print("KERNEL FAILURE: {}\n", f);
  if (failures.empty()) return 0;
  fmt::print("FAIL: a kernel failed (see KERNEL FAILURE above)\n");
  return 1;
}

// N, the positions swept: --max-pos, else the model's context (capped at 2^24; `note` then says so).
std::int64_t sweep_length(const DriftCliOptions& o, const EncodingSpec& spec, std::string& note) {
  std::int64_t N = o.max_pos;
  if (o.max_pos_opt->count() == 0) {
    N = spec.rope.max_position_embeddings;
    if (N <= 0) throw SpecError("--max-pos: the spec gives no max_position_embeddings; pass --max-pos N");
    if (N > drift::kMaxSweepPositions) {
      note = fmt::format("note: max_position_embeddings {} is beyond 2^24; sweeping 0..2^24-1", N);
      N = drift::kMaxSweepPositions;
    }
  } else if (N < 1 || N > drift::kMaxSweepPositions) {
    throw SpecError("--max-pos must be in [1, 2^24 = 16777216], got " + std::to_string(N));
  }
  return N;
}

// --shard I/N, which needs --out (the part file) and excludes --compare.
std::optional<Shard> drift_shard(const DriftCliOptions& o) {
  std::optional<Shard> shard;
  if (!o.shard.empty()) {
    shard = parse_shard(o.shard);
    if (o.out.empty()) throw SpecError("--shard needs --out PART.json (the part `ropecheck merge` joins)");
    if (!o.compare.empty()) throw SpecError("--compare: not with --shard (compare two candidates in one run)");
  }
  return shard;
}

// The kernels, by the one grammar (plugin/kernel_name.hpp); an unknown recipe fails here, before
// anything is made.
std::vector<plugin::KernelName> drift_kernel_names(const DriftCliOptions& o, bool sharded) {
  std::vector<plugin::KernelName> names;
  if (!o.compare.empty()) {
    for (const std::string& n : split(o.compare)) names.push_back(kernel_name(n, "--compare"));
    if (names.size() != 2) throw SpecError("--compare needs exactly two kernels A,B, got '" + o.compare + "'");
  } else if (o.recipes == "all") {
    for (const kernels::RecipeInfo& r : kernels::recipes())
      names.push_back(plugin::builtin_kernel(r.recipe));
  } else {
    for (const std::string& n : split(o.recipes)) names.push_back(kernel_name(n, "--recipes"));
    if (names.empty()) throw SpecError("--recipes: empty list");
  }
  if (sharded)
    for (const plugin::KernelName& n : names)
      if (n.kind == plugin::KernelName::Kind::plugin)
        throw SpecError("--shard: plugin kernels are not split (their kernel failures do not merge); run " + n.given +
                        " in a sweep of its own");
  return names;
}

// The sweep's options, checked (option ranges, the memory `kernels` kernels need) before the output
// folder is made.
drift::DriftOptions drift_options_for(const DriftCliOptions& o, const EncodingSpec& spec, std::int64_t N, DType dt,
                                      std::size_t kernels) {
  drift::DriftOptions d;
  d.sampling.max_pos = N;
  d.sampling.window = o.window;
  d.sampling.per_octave = o.per_octave;
  d.sampling.bins_per_octave = o.bins_per_octave;
  d.storage = dt;
  if (o.seq_len > 0) d.seq_len = o.seq_len;
  d.heads = o.heads;
  d.seed = o.seed;
  d.shifts = parse_shifts(o.shifts);
  d.key_distance = o.key_distance;
  d.uniqueness = !o.no_uniqueness;
  d.threads = o.threads;
  if (const auto c = accuracy::parse_accuracy_class(o.compare_class)) d.compare_class = *c;
  else throw SpecError("--class: unknown class '" + o.compare_class + "'");
  d.plugin = o.plugin;
  d.max_memory = max_memory_bytes(o.max_memory);
  try {
    (void)drift::make_sampling_plan(d.sampling);  // option ranges, before the output folder is made
  } catch (const std::invalid_argument& e) {
    throw SpecError(e.what());
  }
  drift::require_memory(spec, d, kernels);  // the size, before the output folder is made
  return d;
}

// The command as run, with every default resolved (recorded in the outputs).
std::string drift_command_line(const DriftCliOptions& o, DType dt, std::int64_t N) {
  std::string cmd = "ropecheck drift";
  if (!o.source.preset.empty()) cmd += " --preset " + o.source.preset;
  if (!o.source.hf_config.empty()) cmd += " --hf-config " + o.source.hf_config;
  if (!o.source.spec_file.empty()) cmd += " --spec " + o.source.spec_file;
  cmd += o.compare.empty() ? " --recipes " + o.recipes : " --compare " + o.compare;
  cmd += fmt::format(" --dtype {} --max-pos {}", to_string(dt), N);
  return cmd;
}

// --shard: a part, one JSON file and no folder (drift/DRIFT.md, "Sharded sweeps").
int write_drift_part(const DriftCliOptions& o, const EncodingSpec& spec, const std::vector<plugin::KernelName>& names,
                     drift::DriftOptions d, const Shard& shard, const std::string& cmd, std::int64_t N) {
  d.shard = shard;
  if (!o.overwrite && std::filesystem::exists(o.out))
    throw SpecError("--out " + o.out + " exists (give --overwrite to replace it)");
  io::check_file_destination(o.out, "--out");
  const drift::DriftResult r = drift::run_drift(spec, names, d);
  const nlohmann::json run = {{"command_line", cmd}, {"plots", !o.no_plots}};
  io::write_file_atomically(o.out, drift::part_to_json(r, run).dump() + "\n", "--out");
  fmt::print("{}: positions 0..{}, part {}: sampled positions [{}, {}) of {}, {} candidates; `ropecheck merge` the "
             "{} parts\n",
             spec.name, N - 1, shard.text(), r.first_sample, r.last_sample, r.plan.positions.size(), r.kernels.size(),
             shard.count);
  return 0;
}

// One line of --compare's summary: where A and B first differ (`where`: which vectors, which positions).
void print_first_difference(const drift::FirstDifference& f, const char* where) {
  if (!f.position) return fmt::print("  {}: identical\n", where);
  fmt::print("  {}: first differ at position {} (pair {}, channel {}): A = {}, B = {} ({:.3g} ulp)\n", where,
             *f.position, f.pair, f.channel, f.a, f.b, f.diff_ulp);
}

// --compare: both kernels over the same sweep, the outputs in `dir`, a summary on stdout. The exit code
// is the pair's verdict (0 pass, 1 fail, 3 not tested: core/verdict.hpp); a kernel whose calls failed
// fails the comparison whatever else held.
int run_compare_and_report(const DriftCliOptions& o, const EncodingSpec& spec,
                           const std::vector<plugin::KernelName>& names, const drift::DriftOptions& d,
                           drift::OutputDir& dir, const std::string& gnuplot, const std::string& cmd, std::int64_t N,
                           DType dt) {
  const drift::CompareResult r = drift::run_compare(spec, names[0], names[1], d);
  if (!r.declined.empty()) {  // nothing measured, nothing written: not tested, with the kernel's reason
    fmt::print("{} (A) vs {} (B) on {}: not compared\nNOT TESTED: {}\n", r.a, r.b, spec.name, r.reason);
    if (!o.junit.empty())
      io::write_file_atomically(o.junit,
                                junit_xml("ropecheck drift", {drift_compare_junit_case(spec.name, r.a, r.b, r.verdict, r.reason)},
                                          r.seconds),
                                "--junit");
    return ropecheck::exit_code(r.verdict);
  }
  const std::vector<std::string> files = drift::write_compare(r, dir, gnuplot, cmd);
  dir.commit();
  fmt::print("{} (A) vs {} (B) on {}, positions 0..{} ({} sampled), storage {}\n", r.a, r.b, spec.name, N - 1,
             r.plan.positions.size(), to_string(dt));
  print_first_difference(r.first_sampled, "random vectors, sampled positions");
  if (d.uniqueness) {
    print_first_difference(r.first_all, "unit vectors, every position");
    fmt::print("  positions whose unit rotations differ: {} of {}\n", r.positions_differing_all, N);
  }
  fmt::print("  max |A - B|: {} ulp; A vs exact: {} ulp, B vs exact: {} ulp\n", fmt_stat(r.total.diff_ulp),
             fmt_stat(r.total.err_a_ulp), fmt_stat(r.total.err_b_ulp));
  fmt::print("wrote {} ({:.1f} s): {}\n", dir.out().string(), r.seconds, fmt::join(files, ", "));
  if (r.verdict == ropecheck::Verdict::pass)
    fmt::print("PASS: A and B agree within twice the {} bound at every sampled element\n", o.compare_class);
  else
    fmt::print("{}: {}\n", r.verdict == ropecheck::Verdict::fail ? "FAIL" : "NOT TESTED", r.reason);
  const bool lost = kernel_failed(r.kernel_failures) != 0;  // prints the failures, once
  if (!o.junit.empty()) {
    const JunitCase c = drift_compare_junit_case(spec.name, r.a, r.b, lost ? ropecheck::Verdict::fail : r.verdict,
                                                 lost ? "kernel calls failed" : r.reason);
    io::write_file_atomically(o.junit, junit_xml("ropecheck drift", {c}, r.seconds), "--junit");
  }
  return ropecheck::exit_code(lost ? ropecheck::Verdict::fail : r.verdict);
}

// A class's breakdown position; "n/t from P" where nothing broke before its bound saturates at P.
std::string breakdown_cell(const drift::KernelResult& c, accuracy::AccuracyClass cls) {
  for (const drift::Breakdown& b : c.breakdown)
    if (b.cls == cls)
      return b.position ? std::to_string(*b.position)
                        : (b.saturated_from ? fmt::format("n/t from {}", *b.saturated_from) : "never");
  return "?";
}

// One line per candidate: its largest errors, where the fp32-angle and bf16-table classes break down,
// how many distinct rotations it makes.
void print_drift_table(const drift::DriftResult& r) {
  std::size_t w = 12;
  for (const drift::KernelResult& c : r.kernels)
    for (accuracy::AccuracyClass cls : {accuracy::AccuracyClass::fp32_angle, accuracy::AccuracyClass::bf16_table})
      w = std::max(w, breakdown_cell(c, cls).size());
  fmt::print("  {:<16} {:>10} {:>10} {:>10} {:>{}} {:>{}}  {}\n", "candidate", "angle rad", "cos/sin", "rot ulp",
             "fp32-angle", w, "bf16-table", w, "distinct / first collision");
  for (const drift::KernelResult& c : r.kernels) {
    std::string uq = "—";
    if (c.uniqueness)
      uq = fmt::format("{} / {}", c.uniqueness->distinct,
                       c.uniqueness->first_collision ? std::to_string(*c.uniqueness->first_collision) : "none");
    fmt::print("  {:<16} {:>10} {:>10} {:>10} {:>{}} {:>{}}  {}\n", c.name, fmt_stat(c.total.angle),
               fmt_stat(c.total.trig), fmt_stat(c.total.rot_ulp),
               breakdown_cell(c, accuracy::AccuracyClass::fp32_angle), w,
               breakdown_cell(c, accuracy::AccuracyClass::bf16_table), w, uq);
  }
}

// Where a class's bound is saturated, "never" proves nothing: the column says "n/t from P", and why.
void print_saturation_notes(const drift::DriftResult& r) {
  if (!r.kernels.empty())
    for (const drift::Breakdown& b : r.kernels.front().breakdown)
      if (b.saturated_from && (b.cls == accuracy::AccuracyClass::fp32_angle || b.cls == accuracy::AccuracyClass::bf16_table))
        fmt::print("  note: the {} bound is saturated from position {} (an all-zero output would pass there): "
                   "not tested beyond it; {}\n",
                   to_string(b.cls), *b.saturated_from, ropecheck::kSaturationAdvice);
}

// The sweep of every candidate, the outputs in `dir`, its table on stdout; exit 1 when a kernel's
// calls failed, else 0.
int run_sweep_and_report(const EncodingSpec& spec, const std::vector<plugin::KernelName>& names,
                         const drift::DriftOptions& d, drift::OutputDir& dir, const std::string& gnuplot,
                         const std::string& cmd, std::int64_t N, DType dt) {
  const drift::DriftResult r = drift::run_drift(spec, names, d);
  const std::vector<std::string> files = drift::write_drift(r, dir, gnuplot, cmd);
  dir.commit();
  fmt::print("{}: positions 0..{} ({} sampled, {} bins), storage {}, {} candidates\n", spec.name, N - 1,
             r.plan.positions.size(), r.plan.bins.size(), to_string(dt), r.kernels.size());
  print_drift_table(r);
  print_saturation_notes(r);
  fmt::print("wrote {} ({:.1f} s): {}\n", dir.out().string(), r.seconds, fmt::join(files, ", "));
  return kernel_failed(r.kernel_failures);
}

// --scores: the pairs' logits and softmax rows instead of a sweep (drift/DRIFT.md, "Scores").
int run_scores_mode(const DriftCliOptions& o, const EncodingSpec& spec, const std::vector<plugin::KernelName>& names,
                    std::int64_t N, DType dt, bool sharded) {
  if (!o.compare.empty() || sharded || !o.junit.empty())
    throw SpecError("--scores: not with --compare, --shard or --junit");
  DriftScoresArgs a;
  a.options.pairs = o.pairs;
  a.options.max_pos = N;
  a.options.storage = dt;
  if (o.seq_len > 0) a.options.seq_len = o.seq_len;
  a.options.heads = o.heads;
  a.options.seed = o.seed;
  a.options.threads = o.threads;
  if (const auto c = accuracy::parse_accuracy_class(o.compare_class)) a.options.bound_class = *c;
  else throw SpecError("--class: unknown class '" + o.compare_class + "'");
  a.options.plugin = o.plugin;
  a.out = o.out;
  a.default_out = "scores-" + default_out(spec);
  a.overwrite = o.overwrite;
  a.no_plots = o.no_plots;
  a.command_line = drift_command_line(o, dt, N) + " --scores --pairs " +
                   (o.pairs.empty() ? drift::default_score_pairs(N) : o.pairs);
  return run_drift_scores(spec, names, a);
}

int run_drift_command(const DriftCliOptions& o) {
  const EncodingSpec spec = o.source.load();
  if (spec.family != Family::rope)
    throw SpecError("drift measures RoPE only; '" + spec.name + "' is a sinusoidal spec");
  const std::optional<DType> dt = parse_dtype(o.dtype);
  if (!dt) throw SpecError("--dtype: unknown dtype '" + o.dtype + "' (f64, f32, f16, bf16)");
  std::string note;  // printed once the output folder is made
  const std::int64_t N = sweep_length(o, spec, note);
  const std::optional<Shard> shard = drift_shard(o);
  if (!o.junit.empty() && o.compare.empty())
    throw SpecError("--junit needs --compare: a sweep of recipes has no verdict to report");
  if (!o.junit.empty()) io::check_file_destination(o.junit, "--junit");
  const std::vector<plugin::KernelName> names = drift_kernel_names(o, shard.has_value());
  if (!o.stores.empty())
    return run_drift_stores(spec, names, drift_options_for(o, spec, N, *dt, names.size()),
                            {o.stores, shard ? "--shard" : o.scores ? "--scores" : !o.compare.empty() ? "--compare" : !o.junit.empty() ? "--junit" : "",
                             o.out.empty() ? "stores-" + default_out(spec) : o.out, o.overwrite, drift_command_line(o, *dt, N) + " --stores " + o.stores});
  if (o.scores) return run_scores_mode(o, spec, names, N, *dt, shard.has_value());
  if (!o.pairs.empty()) throw SpecError("--pairs needs --scores");
  drift::DriftOptions d = drift_options_for(o, spec, N, *dt, names.size());

  std::string gnuplot;
  if (!o.no_plots && !shard) {
    gnuplot = drift::find_gnuplot();
    if (gnuplot.empty())
      throw SpecError("gnuplot not found (install gnuplot-nox, set ROPECHECK_GNUPLOT, or pass --no-plots)");
  }
  const std::string cmd = drift_command_line(o, *dt, N);
  if (shard) return write_drift_part(o, spec, names, d, *shard, cmd, N);

  const std::string out = o.out.empty() ? default_out(spec) : o.out;
  drift::OutputDir dir(out, o.overwrite);
  const bool tty = !o.quiet && ::isatty(STDERR_FILENO);
  if (!note.empty()) fmt::print(stderr, "ropecheck drift: {}\n", note);
  if (!o.quiet)
    d.progress = [tty](const std::string& line) {
      if (tty) fmt::print(stderr, "ropecheck drift: {}\n", line);
    };
  if (!o.compare.empty()) return run_compare_and_report(o, spec, names, d, dir, gnuplot, cmd, N, *dt);
  return run_sweep_and_report(spec, names, d, dir, gnuplot, cmd, N, *dt);
}

}  // namespace

Command add_drift_command(CLI::App& app) {
  auto o = std::make_shared<DriftCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "drift", "precision drift: how each recipe's error grows with position, as CSV, JSON, Markdown and plots");
  o->source.add_options(*sub);
  sub->add_option("--recipes", o->recipes,
                  "comma-separated kernels: " + std::string(kKernelGrammar) + "; or all (builtin: of every recipe: " +
                      drift::recipe_names() + ")")
      ->capture_default_str();
  sub->add_option("--compare", o->compare,
                  "A,B: compare two kernels (as --recipes names them) over the same sweep; exit 0 when they agree within twice "
                  "the --class bound everywhere, 1 when not, 3 when some bounds are saturated (not tested)");
  sub->add_option("--class", o->compare_class,
                  "with --compare: the accuracy class whose bound decides agreement")
      ->capture_default_str();
  sub->add_option("--dtype", o->dtype, "storage dtype of rotated values and tables (f64, f32, f16, bf16)")
      ->capture_default_str();
  o->max_pos_opt =
      sub->add_option("--max-pos", o->max_pos, "sweep positions 0..N-1 (default: max_position_embeddings; at most 2^24)");
  sub->add_option("--junit", o->junit, "with --compare: write JUnit XML for CI systems here (one testcase: the pair)");
  sub->add_option("--out", o->out, "output folder (default drift-<spec name>; must not exist unless --overwrite)");
  sub->add_flag("--overwrite", o->overwrite, "replace an existing output folder");
  sub->add_option("--window", o->window, "dense window length at 0, every power of two and the end")
      ->capture_default_str();
  sub->add_option("--per-octave", o->per_octave, "log-spaced positions per octave")->capture_default_str();
  sub->add_option("--bins-per-octave", o->bins_per_octave, "summary bins per octave")->capture_default_str();
  sub->add_option("--heads", o->heads, "random head vectors per position (1..64)")->capture_default_str();
  sub->add_option("--seed", o->seed, "seed of the input generator")->capture_default_str()->check(unsigned_64());
  sub->add_option("--shifts", o->shifts, "relative-shift violation: comma-separated shifts s")->capture_default_str();
  sub->add_option("--key-distance", o->key_distance, "the key sits this many positions before the query")
      ->capture_default_str();
  sub->add_option("--seq-len", o->seq_len, "sequence length for dynamic / longrope (default: N)")
      ->check(CLI::Range(std::int64_t{1}, kMaxPosition));
  sub->add_flag("--no-uniqueness", o->no_uniqueness, "skip the pass over every position 0..N-1");
  sub->add_flag("--no-plots", o->no_plots, "write no PNGs (the gnuplot script is still written)");
  sub->add_option("--threads", o->threads, "worker threads (default: all cores)")->check(CLI::Range(0, 1024));
  add_kernel_isolation_options(*sub, o->plugin);
  add_max_memory_option(*sub, o->max_memory);
  sub->add_option("--shard", o->shard,
                  "I/N: measure only shard I of N (the sampled positions split in N contiguous ranges; the uniqueness "
                  "passes spread over the shards by candidate) and write a part file to --out; `ropecheck merge` joins "
                  "the N parts into the folder one run writes (drift/DRIFT.md, \"Sharded sweeps\")");
  sub->add_option("--stores", o->stores, "the rotation error of each recipe under these quantized stores (golden --stores' items) "
                  "and the crossover positions, instead of a sweep (drift/DRIFT.md, \"Quantized stores\")");
  sub->add_flag("--scores", o->scores,
                "attention logits and softmax rows instead of a sweep: each kernel's scores of the --pairs against the "
                "exact ones (drift/DRIFT.md, \"Scores\")");
  sub->add_option("--pairs", o->pairs,
                  "with --scores: the (query, key) pairs, attention's grammar (dist:MAX:K[:Q], tail:L:N[:S], causal:S:N, "
                  "full:S:N, pair:M:N; default: every distance from queries at 2^k - 1 and N - 1, and tail:N:2:127)");
  sub->add_flag("--quiet", o->quiet, "no progress lines");
  return {sub, [o] { return run_drift_command(*o); }};
}

}  // namespace ropecheck::cli
