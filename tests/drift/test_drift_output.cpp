// drift: uniqueness counting, --compare, plugins, non-finite outputs, and the writers (CSV columns,
// JSON keys, Markdown, gnuplot scripts, the atomic output folder). Deterministic (input seed 0,
// fixed plans); rerun one with ctest -R 'Drift(Uniqueness|Compare|Plugin|Output)' --output-on-failure.
#include <gtest/gtest.h>

#include "kernel_names.hpp"
#include "test_paths.hpp"
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ropecheck/drift/sweep.hpp"
#include "ropecheck/drift/uniqueness.hpp"
#include "ropecheck/drift/writers.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/reference/presets.hpp"

namespace rd = ropecheck::drift;
namespace fs = std::filesystem;
using namespace ropecheck;

namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A fresh scratch folder under the build tree's temp dir, removed at the end of the test.
struct Scratch {
  fs::path dir;
  Scratch() {
    char tmpl[] = "/tmp/ropecheck-drift-test-XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

rd::DriftOptions small_options(std::int64_t n) {
  rd::DriftOptions o;
  o.sampling.max_pos = n;
  o.sampling.window = 32;
  o.sampling.per_octave = 8;
  return o;
}

}  // namespace

// ---- uniqueness ---------------------------------------------------------------------------------

TEST(DriftUniqueness, RowHashTreatsSignedZerosAndNaNsAsEqual) {
  const double nan1 = std::nan(""), nan2 = -std::nan("7");
  EXPECT_EQ(rd::hash_row(std::vector<double>{0.0, 1.5}).h1, rd::hash_row(std::vector<double>{-0.0, 1.5}).h1);
  EXPECT_EQ(rd::hash_row(std::vector<double>{nan1, 2.0}).h2, rd::hash_row(std::vector<double>{nan2, 2.0}).h2);
  EXPECT_NE(rd::hash_row(std::vector<double>{1.0, 2.0}).h1, rd::hash_row(std::vector<double>{2.0, 1.0}).h1);
  EXPECT_EQ(rd::hash_row(std::vector<double>{3.0}).h2 & 0xFFFFFF, 0u) << "low 24 bits carry the position";
}

TEST(DriftUniqueness, CountsFromHashes) {
  // Rows: position p encodes as floor(p / 2) for p < 8, then all positions 8..11 like position 3.
  std::vector<rd::RowHash> h;
  for (int p = 0; p < 12; ++p) h.push_back(rd::hash_row(std::vector<double>{p < 8 ? std::floor(p / 2.0) : 1.0}));
  const std::vector<std::int64_t> edges = {1, 2, 4, 8, 12, 100};
  const rd::Uniqueness u = rd::uniqueness_from_hashes(h, edges);
  EXPECT_EQ(u.positions, 12);
  EXPECT_EQ(u.distinct, 4);
  ASSERT_TRUE(u.first_collision);
  EXPECT_EQ(*u.first_collision, 1);
  EXPECT_EQ(*u.collides_with, 0);
  EXPECT_EQ(u.distinct_below, (std::vector<std::int64_t>{1, 1, 2, 4, 4, 4}));
  const rd::Uniqueness none = rd::uniqueness_from_hashes(std::span<const rd::RowHash>(h.data(), 1), edges);
  EXPECT_EQ(none.distinct, 1);
  EXPECT_FALSE(none.first_collision);
}

// ---- compare and plugins ------------------------------------------------------------------------

TEST(DriftCompare, IdenticalAndCollidingRecipes) {
  const EncodingSpec spec = load_preset("llama-3.1-8b");
  rd::DriftOptions o = small_options(2048);
  o.storage = DType::f32;  // with bf16 storage hf also rotates in bf16 and bf16-positions in f32
  const rd::CompareResult same = rd::run_compare(spec, ropecheck::test::kernel("builtin:hf"), ropecheck::test::kernel("builtin:hf"), o);
  EXPECT_FALSE(same.first_sampled.position);
  EXPECT_FALSE(same.first_all.position);
  EXPECT_EQ(same.positions_differing_all, 0);
  EXPECT_EQ(same.total.differing, 0);
  EXPECT_GT(same.total.elements, 0);
  EXPECT_EQ(same.verdict, ropecheck::Verdict::pass);  // the compared pair's verdict
  EXPECT_EQ(same.total.violations, 0);
  EXPECT_EQ(same.total.saturated, 0);

  // bf16 positions equal the exact ones up to 256: the first difference over all positions is 257.
  const rd::CompareResult pos = rd::run_compare(spec, ropecheck::test::kernel("builtin:hf"), ropecheck::test::kernel("builtin:bf16-positions"), o);
  ASSERT_TRUE(pos.first_all.position);
  EXPECT_EQ(*pos.first_all.position, 257);
  ASSERT_TRUE(pos.first_sampled.position);
  EXPECT_EQ(*pos.first_sampled.position, 257);
  EXPECT_GT(pos.first_all.diff_ulp, 0);
  EXPECT_GT(pos.total.angle_diff.max, 1.0);
  // Above 256 most positions differ: 2048 - 257 minus the ones exact in bf16 (multiples of 2..8).
  EXPECT_GT(pos.positions_differing_all, 1000);
  // They cannot both be fp32-angle: fail, from the first differing position on.
  EXPECT_EQ(pos.verdict, ropecheck::Verdict::fail);
  ASSERT_TRUE(pos.first_violation);
  EXPECT_GE(*pos.first_violation, 257);
  EXPECT_GT(pos.total.violations, 0);
}

// Past ~1.16e6 the fp32-angle bound of the highest frequency reaches the pair's magnitude: agreement
// within it says nothing there, so two fp32 recipes that agree are not tested (per bin), not a pass.
TEST(DriftCompare, SaturatedBoundsAreNotTested) {
  const EncodingSpec spec = load_preset("llama-3.1-8b");
  rd::DriftOptions o = small_options(1 << 21);
  o.storage = DType::f32;
  o.uniqueness = false;
  const rd::CompareResult r = rd::run_compare(spec, ropecheck::test::kernel("builtin:hf"), ropecheck::test::kernel("builtin:meta"), o);
  EXPECT_EQ(r.total.violations, 0);
  EXPECT_GT(r.total.saturated, 0);
  EXPECT_EQ(r.verdict, ropecheck::Verdict::not_tested);
  ASSERT_TRUE(r.first_saturated);
  EXPECT_GT(*r.first_saturated, 1000000);
  EXPECT_LT(*r.first_saturated, 1300000);
  EXPECT_NE(r.reason.find("use a stricter class (f32-reduced, fp64-angle) here"), std::string::npos) << r.reason;
  for (std::size_t b = 0; b < r.bins.size(); ++b)
    if (r.plan.bins[b].hi <= *r.first_saturated) {
      EXPECT_EQ(r.bins[b].saturated, 0) << r.plan.bins[b].lo;
    }
  // f32-reduced still discriminates there: hf (an f32 angle) and accurate cannot both be f32-reduced.
  o.compare_class = ropecheck::accuracy::AccuracyClass::f32_reduced;
  const rd::CompareResult strict = rd::run_compare(spec, ropecheck::test::kernel("builtin:hf"), ropecheck::test::kernel("builtin:accurate"), o);
  EXPECT_EQ(strict.verdict, ropecheck::Verdict::fail);
  EXPECT_EQ(strict.total.saturated, 0);
}

// A sweep's breakdown says where each class's bound saturates: "never" beyond it proves nothing.
TEST(DriftCompare, SweepBreakdownSaysWhereTheBoundSaturates) {
  rd::DriftOptions o = small_options(1 << 21);
  o.storage = DType::f32;
  o.uniqueness = false;
  const std::vector<plugin::KernelName> names = ropecheck::test::kernels({"builtin:accurate"});
  const rd::DriftResult r = rd::run_drift(load_preset("llama-3.1-8b"), names, o);
  ASSERT_EQ(r.kernels.size(), 1u);
  for (const rd::Breakdown& b : r.kernels[0].breakdown) {
    if (b.cls == ropecheck::accuracy::AccuracyClass::fp32_angle) {
      EXPECT_FALSE(b.position);  // accurate never leaves fp32-angle ...
      ASSERT_TRUE(b.saturated_from);  // ... but past ~1.16e6 that is not tested for the highest frequencies
      EXPECT_GT(*b.saturated_from, 1000000);
      EXPECT_LT(*b.saturated_from, 1300000);
      EXPECT_EQ(b.state(), "not-tested");  // so "never" is not claimed: not tested from there
    }
    if (b.cls == ropecheck::accuracy::AccuracyClass::f32_reduced) {
      EXPECT_FALSE(b.saturated_from);
      EXPECT_EQ(b.state(), "never");
    }
  }
  const std::string md = rd::summary_markdown(r, "cmd");
  EXPECT_NE(md.find("| not tested from "), std::string::npos) << md;
  const nlohmann::json j = rd::to_json(r, "cmd");
  EXPECT_EQ(j["candidates"][0]["breakdown"]["fp32-angle"]["state"], "not-tested");
  EXPECT_EQ(j["candidates"][0]["breakdown"]["f32-reduced"]["state"], "never");
}

TEST(DriftPlugin, HfPluginAgainstTheHfRecipe) {
  // The example plugin is the Hugging Face recipe in C, f32 output: against ropecheck's hf recipe
  // with f32 storage the two are the same computation, so they agree to rounding (the plugin may
  // use another libm path for powf / sinf): at most a few ulps apart and far below bf16 effects.
  const EncodingSpec spec = load_preset("llama-3.1-8b");
  rd::DriftOptions o = small_options(8192);
  o.storage = DType::f32;
  const rd::CompareResult r = rd::run_compare(spec, ropecheck::test::kernel("builtin:hf"), ropecheck::test::kernel(std::string("plugin:") + ropecheck::test::hf_plugin()), o);
  EXPECT_EQ(r.b.rfind("plugin:", 0), 0u) << r.b;
  EXPECT_EQ(r.total.nonfinite_b, 0);
  EXPECT_LE(r.total.diff_rel.max, 1e-5) << "plugin and hf recipe disagree";
  EXPECT_LE(r.total.err_b_ulp.max, r.total.err_a_ulp.max * 4 + 4);
  // A plugin has no angles: the angle differences are not measured.
  EXPECT_TRUE(r.total.angle_diff.empty());

  // The same plugin in a drift sweep: rotated errors and uniqueness, no angle rows.
  const std::vector<plugin::KernelName> names = ropecheck::test::kernels({std::string("plugin:") + ropecheck::test::hf_plugin()});
  const rd::DriftResult d = rd::run_drift(spec, names, o);
  const rd::KernelResult& c = d.kernels.at(0);
  EXPECT_FALSE(c.has_rows);
  EXPECT_TRUE(c.total.angle.empty());
  EXPECT_FALSE(c.total.rot_ulp.empty());
  ASSERT_TRUE(c.uniqueness);
  EXPECT_EQ(c.uniqueness->distinct, 8192);
  const std::string csv = rd::bins_csv(d);
  EXPECT_NE(csv.find("plugin:"), std::string::npos);
}

TEST(DriftPlugin, BrokenPluginsGiveOneLineErrors) {
  const EncodingSpec spec = load_preset("llama-3.1-8b");
  const rd::DriftOptions o = small_options(64);
  const std::string dir = ropecheck::test::test_plugin_dir();
  for (const char* mode : {"unsupported_all", "sinusoidal", "wrong_abi"}) {
    const std::vector<plugin::KernelName> names = ropecheck::test::kernels({"plugin:" + dir + "/test_plugin_" + mode + ".so"});
    try {
      rd::run_drift(spec, names, o);
      ADD_FAILURE() << mode << ": no error";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << mode << ": " << e.what();
    }
  }
  // A failure code is a failed kernel call, not an error: the sweep goes on and reports it.
  const std::vector<plugin::KernelName> fail_plugin = ropecheck::test::kernels({"plugin:" + dir + "/test_plugin_fail.so"});
  const rd::DriftResult f = rd::run_drift(spec, fail_plugin, o);
  ASSERT_EQ(f.kernel_failures.size(), 1u);
  EXPECT_NE(f.kernel_failures[0].find("returned 7"), std::string::npos) << f.kernel_failures[0];
  // A plugin that writes nothing: every output NaN, counted as non-finite at the caps, never a
  // crash, and reported as failed calls (unwritten outputs).
  const std::vector<plugin::KernelName> nan_plugin = ropecheck::test::kernels({"plugin:" + dir + "/test_plugin_nan.so"});
  const rd::DriftResult r = rd::run_drift(spec, nan_plugin, o);
  EXPECT_GT(r.kernels.at(0).total.nonfinite, 0);
  EXPECT_EQ(r.kernels.at(0).total.rot_rel.max, rd::kUnitCap);
  ASSERT_EQ(r.kernel_failures.size(), 1u);
  EXPECT_NE(r.kernel_failures[0].find("unwritten"), std::string::npos) << r.kernel_failures[0];
  EXPECT_NO_THROW((void)rd::to_json(r, "test").dump());
}

TEST(DriftPlugin, UnknownRecipeAndSinusoidalSpec) {
  const rd::DriftOptions o = small_options(64);
  try {  // the grammar refuses the name before drift makes anything
    rd::run_drift(load_preset("llama-3.1-8b"), ropecheck::test::kernels({"builtin:hf", "builtin:no-such-recipe"}), o);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-recipe"), std::string::npos) << e.what();
  }
  const std::vector<plugin::KernelName> hf = ropecheck::test::kernels({"builtin:hf"});
  EXPECT_THROW(rd::run_drift(load_preset("transformer-base"), hf, o), SpecError);
}

// ---- non-finite outputs and the writers ------------------------------------------------------------

TEST(DriftOutput, F16PositionsOverflowIsCountedAndWritten) {
  // f16 positions become infinite from 65520: cos / sin NaN there, counted at the caps.
  rd::DriftOptions o = small_options(70000);
  o.uniqueness = false;
  const std::vector<plugin::KernelName> names = ropecheck::test::kernels({"builtin:f16-positions", "builtin:hf"});
  const rd::DriftResult r = rd::run_drift(load_preset("llama-3.1-8b"), names, o);
  const rd::KernelResult& c = r.kernels.at(0);
  EXPECT_GT(c.total.nonfinite, 0);
  EXPECT_EQ(c.bins.back().angle.max, rd::kAngleCap);
  EXPECT_EQ(c.bins.back().rot_rel.max, rd::kUnitCap);
  // No bin below 65520 has a non-finite value.
  for (std::size_t b = 0; b < r.plan.bins.size(); ++b)
    if (r.plan.bins[b].hi <= 65520) {
      EXPECT_EQ(c.bins[b].nonfinite, 0) << "bin " << b;
    }
  for (const std::string& text : {rd::bins_csv(r), rd::positions_csv(r), rd::drift_plot_data_csv(r)}) {
    EXPECT_EQ(text.find("nan"), std::string::npos);
    EXPECT_EQ(text.find("inf"), std::string::npos);
  }
  EXPECT_NO_THROW((void)rd::to_json(r, "test").dump());
}

TEST(DriftOutput, FilesColumnsAndKeys) {
  rd::DriftOptions o = small_options(1024);
  o.shifts = {1, 64};
  const std::vector<plugin::KernelName> names = ropecheck::test::kernels({"builtin:hf", "builtin:accurate", "builtin:bf16-positions"});
  const rd::DriftResult r = rd::run_drift(load_preset("llama-3.1-8b"), names, o);

  EXPECT_EQ(first_line(rd::bins_csv(r)),
            "candidate,bin,lo,hi,samples,angle_err_max,angle_err_rms,cos_sin_err_max,cos_sin_err_rms,table_err_max,"
            "table_err_rms,rot_ulp_max,rot_ulp_rms,rot_rel_max,rot_rel_rms,shift_1_max,shift_1_rms,shift_64_max,"
            "shift_64_rms,nonfinite,distinct_below_hi");
  EXPECT_EQ(first_line(rd::positions_csv(r)),
            "candidate,position,bin,angle_err_max,angle_err_rms,cos_sin_err_max,table_err_max,rot_ulp_max,rot_rel_max,"
            "shift_1_max,shift_64_max,nonfinite");
  EXPECT_EQ(first_line(rd::breakdown_csv(r)), "candidate,class,position,quantity,head,pair,channel,error,allowed");
  EXPECT_EQ(first_line(rd::uniqueness_csv(r)), "candidate,positions,distinct,first_collision,collides_with");
  EXPECT_EQ(first_line(rd::drift_plot_data_csv(r)), "candidate,position,angle_err,cos_sin_err,rot_ulp,rot_rel,shift_err");
  // Rows: one per kernel x bin / position / class.
  auto lines = [](const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); };
  EXPECT_EQ(lines(rd::bins_csv(r)), 1 + 3 * r.plan.bins.size());
  EXPECT_EQ(lines(rd::positions_csv(r)), 1 + 3 * r.plan.positions.size());
  EXPECT_EQ(lines(rd::breakdown_csv(r)), 1 + 3 * accuracy::kAccuracyClasses.size());
  EXPECT_EQ(lines(rd::uniqueness_csv(r)), 1 + 3u);

  const nlohmann::json j = rd::to_json(r, "ropecheck drift --test");
  for (const char* k : {"tool", "format_version", "command", "spec", "storage_dtype", "seq_len", "attention_factor", "heads",
                        "seed", "shifts", "key_distance", "uniqueness_pass", "sampling", "classes", "candidates", "seconds"})
    EXPECT_TRUE(j.contains(k)) << k;
  const nlohmann::json& c = j["candidates"][2];
  EXPECT_EQ(c["name"], "bf16-positions");
  EXPECT_EQ(c["kind"], "recipe");
  for (const char* k : {"description", "known_bad", "table_dtype", "measured", "total", "bins", "breakdown", "uniqueness"})
    EXPECT_TRUE(c.contains(k)) << k;
  EXPECT_EQ(c["uniqueness"]["first_collision"], 257);
  EXPECT_EQ(c["breakdown"]["fp32-angle"]["position"], 257);
  EXPECT_EQ(c["bins"][0]["lo"], 0);
  EXPECT_TRUE(c["total"]["angle_err"].contains("max"));
  EXPECT_EQ(c["total"]["shift"][1]["s"], 64);

  const std::string md = rd::summary_markdown(r, "cmd");
  EXPECT_NE(md.find("| bf16-positions (known bad) |"), std::string::npos);
  EXPECT_NE(md.find("## Breakdown positions"), std::string::npos);
  EXPECT_NE(md.find("257 (= 256)"), std::string::npos) << "first collision of bf16-positions";

  const std::string gp = rd::drift_gnuplot_script(r);
  for (const char* png : {"drift-angle.png", "drift-cos-sin.png", "drift-rotated.png", "drift-shift.png"})
    EXPECT_NE(gp.find(png), std::string::npos) << png;
  EXPECT_NE(gp.find("\"bf16-positions\""), std::string::npos);
  EXPECT_NE(gp.find("plot_data.csv"), std::string::npos);
}

// A plot with nothing to show on log axes (all values 0 or absent) made gnuplot fail the whole run ("all
// points y value undefined"), e.g. angles when every kernel is a plugin: such plots are left out.
TEST(DriftOutput, PlotsWithNothingToDrawAreLeftOut) {
  const std::vector<plugin::KernelName> names = ropecheck::test::kernels({"builtin:hf"});
  rd::DriftResult r = rd::run_drift(load_preset("llama-3.1-8b"), names, small_options(256));
  const std::vector<std::string> all = {"drift-angle.png", "drift-cos-sin.png", "drift-rotated.png", "drift-shift.png"};
  EXPECT_EQ(rd::drift_plot_files(r), all);
  r.kernels[0].has_rows = false;  // what a plugin or CUDA kernel gives: rotated values only
  EXPECT_EQ(rd::drift_plot_files(r), std::vector<std::string>({"drift-rotated.png", "drift-shift.png"}));
  std::string gp = rd::drift_gnuplot_script(r);
  EXPECT_NE(gp.find("# drift-angle.png is not drawn"), std::string::npos) << gp;
  EXPECT_EQ(gp.find("set output \"drift-angle.png\""), std::string::npos) << gp;
  EXPECT_EQ(gp.find("NaN notitle"), std::string::npos) << gp;
  for (rd::Metrics& m : r.kernels[0].positions) m.rot_rel = {};  // an exact kernel: every error 0
  EXPECT_EQ(rd::drift_plot_files(r), std::vector<std::string>({"drift-shift.png"}));
  gp = rd::drift_gnuplot_script(r);
  EXPECT_NE(gp.find("# drift-rotated.png is not drawn"), std::string::npos) << gp;

  const std::string g = rd::find_gnuplot();
  if (g.empty()) GTEST_SKIP() << "gnuplot is not installed (scripts/install-deps installs gnuplot-nox); the script was checked";
  Scratch s;
  std::ofstream(s.dir / "plot_data.csv") << rd::drift_plot_data_csv(r);
  std::ofstream(s.dir / "drift.gp") << gp;
  rd::run_gnuplot(g, s.dir, "drift.gp");
  EXPECT_TRUE(fs::exists(s.dir / "drift-shift.png"));
  EXPECT_FALSE(fs::exists(s.dir / "drift-angle.png"));
}

TEST(DriftOutput, CompareFiles) {
  const rd::CompareResult r = rd::run_compare(load_preset("llama-3.1-8b"), ropecheck::test::kernel("builtin:hf"), ropecheck::test::kernel("builtin:ggml"), small_options(512));
  EXPECT_EQ(first_line(rd::compare_bins_csv(r)),
            "bin,lo,hi,samples,diff_ulp_max,diff_ulp_rms,diff_rel_max,diff_rel_rms,differing,elements,angle_diff_max,"
            "angle_diff_rms,cos_sin_diff_max,table_diff_max,err_a_ulp_max,err_b_ulp_max,err_a_rel_max,err_b_rel_max,"
            "nonfinite_a,nonfinite_b");
  EXPECT_EQ(first_line(rd::compare_positions_csv(r)),
            "position,bin,diff_ulp_max,diff_rel_max,differing,angle_diff_max,cos_sin_diff_max,table_diff_max,"
            "err_a_ulp_max,err_b_ulp_max,err_a_rel_max,err_b_rel_max");
  const nlohmann::json j = rd::to_json(r, "cmd");
  for (const char* k : {"a", "b", "total", "bins", "first_difference_sampled", "first_difference_all",
                        "positions_differing_all", "sampling"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["a"]["name"], "hf");
  EXPECT_NE(rd::compare_markdown(r, "cmd").find("first difference"), std::string::npos);
  EXPECT_NE(rd::compare_gnuplot_script(r).find("drift-compare.png"), std::string::npos);
}

TEST(DriftOutput, OutputFolderIsAtomic) {
  Scratch s;
  const fs::path out = s.dir / "run";
  {
    rd::OutputDir d(out, false);
    d.write("a.txt", "hello\n");
    EXPECT_FALSE(fs::exists(out)) << "visible before commit";
    // Destroyed without commit: nothing left behind.
  }
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(std::distance(fs::directory_iterator(s.dir), fs::directory_iterator()), 0) << "temporary folder left";
  {
    rd::OutputDir d(out, false);
    d.write("a.txt", "one\n");
    d.write("drift.json", "{}\n");  // what makes it a drift folder --overwrite may replace
    d.commit();
  }
  EXPECT_EQ(read(out / "a.txt"), "one\n");
  EXPECT_THROW(rd::OutputDir(out, false), SpecError) << "an existing folder without overwrite";
  {
    rd::OutputDir d(out, true);
    d.write("b.txt", "two\n");
    d.commit();
  }
  EXPECT_FALSE(fs::exists(out / "a.txt")) << "overwrite replaces the whole folder";
  EXPECT_EQ(read(out / "b.txt"), "two\n");
  EXPECT_THROW(rd::OutputDir(s.dir / "missing-parent" / "run", false), SpecError);
}

TEST(DriftOutput, GnuplotLookupAndFailure) {
  const char* saved = std::getenv("ROPECHECK_GNUPLOT");
  const std::string keep = saved ? saved : "";
  ::setenv("ROPECHECK_GNUPLOT", "/nonexistent/gnuplot", 1);
  EXPECT_EQ(rd::find_gnuplot(), "");
  ::setenv("ROPECHECK_GNUPLOT", "", 1);
  EXPECT_EQ(rd::find_gnuplot(), "");
  ::unsetenv("ROPECHECK_GNUPLOT");
  const std::string g = rd::find_gnuplot();
  if (saved) ::setenv("ROPECHECK_GNUPLOT", keep.c_str(), 1);
  if (g.empty()) GTEST_SKIP() << "gnuplot is not installed (scripts/install-deps installs gnuplot-nox)";
  Scratch s;
  std::ofstream(s.dir / "bad.gp") << "this is not gnuplot\n";
  try {
    rd::run_gnuplot(g, s.dir, "bad.gp");
    ADD_FAILURE() << "no error";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("gnuplot"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
  std::ofstream(s.dir / "good.gp") << "set terminal pngcairo size 100,100\nset output \"x.png\"\nplot x\n";
  rd::run_gnuplot(g, s.dir, "good.gp");
  EXPECT_TRUE(fs::exists(s.dir / "x.png"));
  EXPECT_FALSE(fs::exists(s.dir / "gnuplot.log"));
}
