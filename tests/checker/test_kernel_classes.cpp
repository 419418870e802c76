// The fast kernels (kernels/rope_kernels.hpp) validated by the suite's own judge: every precision
// recipe x storage dtype (f32, f16, bf16, f64) x CPU path (portable, AVX-512) runs on golden sets of
// several layouts and scalings (half-split, interleaved, prefix-partial rotary, multimodal, YaRN,
// llama3, LongRoPE short and long, linear, the sinusoidal presets) at positions up to 2^24 - 1, through
// the same code `ropecheck check --kernel builtin:RECIPE` uses (golden/kernel_source.hpp, golden/kernel_run.hpp), and the
// checker (golden/checker.hpp) gives each its tightest accuracy class over rope_apply's q_rot / k_rot
// and rope_cos_sin_table's cos / sin (sinusoidal_table's pe for sinusoidal sets).
//
// Expected (accuracy/ERROR_MODEL.md; kernels/RECIPES.md's class table):
//   accurate       f32: f32-reduced; f16, bf16, f64: fp64-angle (section 10 of the error model). The
//                  f16 / bf16 result may be bit-identical to the golden value by luck on a small set;
//                  the test therefore asserts the tightest class other than `exact`.
//   hf             RoPE: f32, f64: fp32-angle; f16: f16-table; bf16: bf16-table (hf rotates in the
//                  storage dtype). Sinusoidal tables have no rotation: fp32-angle in every dtype.
//   meta, ggml     fp32-angle
//   bf16-table     bf16-table, and violates f16-table; f16-table: f16-table, and violates fp32-angle
//   bf16-inv-freq, f16-inv-freq, bf16-positions, f16-positions: violate fp32-angle
//   fast-sincos    fp32-angle, and violates f32-reduced (its f32 angle, at long positions)
// A class the error model guarantees always holds; it is also asserted to be the tightest wherever the
// recipe's defining error cannot hide below the storage rounding (see Expect: f32 angles in f16 / bf16
// outputs show only at long positions; an f16 table in a bf16 output, or a sinusoidal table cast to its
// own storage dtype, may look like the finer class). Where it can hide, the matrix still prints it.
// The full matrix (case x recipe x dtype x path: tightest class, worst error / bound, the stricter
// class it violates and where) is printed, so CI logs show it.
//
// Reproduce one cell: `ropecheck golden --preset P --positions POS --heads H --dtypes f32,f16,bf16 --out g`
// then `ropecheck check --golden g --kernel builtin:RECIPE --class C` (default CPU path; the test's
// failure message prints both commands).
#include <unistd.h>

#include <gtest/gtest.h>

#include "test_scale.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ropecheck/checker/kernel_run.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/checker/checker.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/reference/presets.hpp"

namespace ropecheck {
namespace {

namespace fs = std::filesystem;
namespace k = ropecheck::kernels;
using accuracy::AccuracyClass;

constexpr std::array<DType, 4> kStorage = {DType::f32, DType::f16, DType::bf16, DType::f64};

struct Case {
  std::string name;       // shown in the matrix
  std::string preset;
  std::string positions;  // `ropecheck golden --positions` syntax
  int heads = 1;
  bool small = false;     // also run at the small test scale (test_scale.hpp): one case per layout kind
};

// Long positions everywhere: 0..47 densely, then the log sampler to 2^24 - 1 (past 256 and 2048,
// where bf16 / f16 positions stop being exact; past 65520, where f16 positions overflow).
const std::vector<Case>& all_cases() {
  static const std::vector<Case> v = {
      {"llama-3.1-8b (llama3, half-split)", "llama-3.1-8b", "0:48,log:16777215:3", 2, true},
      {"deepseek-v3 (yarn + attention factor, interleaved)", "deepseek-v3", "0:48,log:16777215:3", 2, true},
      {"gpt-j-6b (interleaved, partial rotary 64/256)", "gpt-j-6b", "0:48,log:16777215:3", 1},
      {"gpt-neox-20b (half-split, partial rotary 24/96)", "gpt-neox-20b", "0:48,log:16777215:3", 2},
      {"qwen2-vl-7b (multimodal, chunked sections)", "qwen2-vl-7b", "0:16,grid:16:4:6,40/41/47,log:16777215:3", 2, true},
      {"qwen2.5-7b-yarn (yarn, half-split)", "qwen2.5-7b-yarn", "0:48,log:16777215:3", 2},
      {"phi-3.5-mini (longrope, long factors)", "phi-3.5-mini", "0:48,log:16777215:3", 2},
      {"phi-3.5-mini (longrope, short factors)", "phi-3.5-mini", "0:48,log:4095:6", 2},
      {"gemma-3-4b-global (linear, head_dim 256)", "gemma-3-4b-global", "0:48,log:16777215:3", 1},
      {"transformer-base (sinusoidal, Vaswani)", "transformer-base", "0:48,log:16777215:3", 1, true},
      {"fairseq-transformer (sinusoidal, half_dim - 1)", "fairseq-transformer", "0:48,log:16777215:3", 1},
  };
  return v;
}

// Every case, or at the small test scale the ones marked small (each asserts what it does at full scale).
const std::vector<Case>& cases() {
  static const std::vector<Case> v = [] {
    std::vector<Case> r;
    for (const Case& c : all_cases())
      if (!test::small_scale() || c.small) r.push_back(c);
    return r;
  }();
  return v;
}

struct TempRoot {
  fs::path path;
  TempRoot() : path(fs::temp_directory_path() / ("ropecheck_kernel_classes_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempRoot() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

fs::path write_set(const fs::path& root, const Case& c, int index) {
  golden::GoldenOptions o;
  o.spec = load_preset(c.preset);
  o.positions = parse_positions(c.positions);
  o.dtypes = {DType::f32, DType::f16, DType::bf16};
  o.heads = o.spec.family == Family::rope ? c.heads : 1;
  o.seed = 11;
  o.out = root / ("set" + std::to_string(index));
  write_golden_set(o);
  return o.out;
}

// ---- expectations ---------------------------------------------------------------------------------

struct Expect {
  std::optional<AccuracyClass> holds;  // the class the error model guarantees (none for the known-bad ones)
  // Whether `holds` must also be the tightest class (other than exact). Not where the recipe's
  // distinguishing error can hide below the storage rounding: f32 angles in f16 / bf16 outputs at
  // short positions (|angle error| ~ u32 |theta| < u_dt shows only where it tips a rounding), an f16
  // table in a bf16 output, a table dtype equal to the storage dtype for tables without a rotation.
  bool tightest = true;
  std::optional<AccuracyClass> violates;  // a class it must fail
};

// long_positions: the set reaches 2^20 or more (f32 angles are off by ~u32 |theta| >> u_f16 there).
Expect expected(k::Recipe r, DType dt, bool sinusoidal, bool long_positions) {
  using enum AccuracyClass;
  const bool wide = dt == DType::f32 || dt == DType::f64;  // storage at least as fine as f32
  const bool f32_angle_shows = wide || long_positions;
  switch (r) {
    case k::Recipe::accurate: return {dt == DType::f32 ? f32_reduced : fp64_angle, true, {}};
    case k::Recipe::hf:
      // hf casts its tables to the storage dtype and rotates in it; a sinusoidal table has no rotation,
      // so that cast is the storage rounding itself.
      if (sinusoidal || wide) return {fp32_angle, f32_angle_shows, {}};
      return {dt == DType::bf16 ? bf16_table : f16_table, true, {}};
    case k::Recipe::meta:
    case k::Recipe::ggml: return {fp32_angle, f32_angle_shows, {}};
    case k::Recipe::fast_sincos:
      return {fp32_angle, f32_angle_shows, f32_angle_shows ? std::optional(f32_reduced) : std::nullopt};
    case k::Recipe::bf16_table:
      if (sinusoidal && dt == DType::bf16) return {fp32_angle, f32_angle_shows, {}};
      return {bf16_table, true, f16_table};
    case k::Recipe::f16_table:
      if (sinusoidal && dt == DType::f16) return {fp32_angle, f32_angle_shows, {}};
      if (dt == DType::bf16) return {f16_table, false, {}};
      return {f16_table, true, fp32_angle};
    case k::Recipe::bf16_inv_freq:
    case k::Recipe::f16_inv_freq:
    case k::Recipe::bf16_positions:
    case k::Recipe::f16_positions: return {std::nullopt, false, fp32_angle};
  }
  return {};
}

// ---- one cell of the matrix -------------------------------------------------------------------------

struct ClassStat {
  bool satisfied = true;
  double worst = 0;  // max error / allowed over the tensors (exact: ulps from the golden value)
  std::optional<std::int64_t> first;
};

struct Cell {
  std::map<AccuracyClass, ClassStat> cls;
  std::optional<AccuracyClass> tightest;          // strictest class every tensor satisfies
  std::optional<AccuracyClass> tightest_inexact;  // ... other than exact
  std::int64_t nonfinite = 0;
};

Cell judge(const golden::GoldenSet& g, const std::vector<io::Tensor>& tensors) {
  checker::CheckOptions opt;
  opt.worst_count = 1;
  const checker::CheckReport rep = checker::check_candidate(g, tensors, opt);
  Cell cell;
  for (const checker::TensorReport& t : rep.tensors) {
    cell.nonfinite += t.nonfinite_mismatches;
    for (const checker::ClassResult& c : t.classes) {
      ClassStat& s = cell.cls[c.accuracy_class];
      // Held: no element exceeds the bound. Past ~1e6 a loose class is saturated for some pairs, which the
      // check reports as not tested (never satisfied); what this matrix calibrates is that the recipe's
      // errors stay inside the bound, so a not-tested class counts as held here.
      s.satisfied = s.satisfied && c.state != checker::ClassState::violated;
      s.worst = std::max(s.worst, c.worst_margin);
      if (c.first_violating_position && (!s.first || *c.first_violating_position < *s.first)) s.first = c.first_violating_position;
    }
  }
  for (AccuracyClass c : accuracy::kAccuracyClasses) {
    if (!cell.cls[c].satisfied) continue;
    if (!cell.tightest) cell.tightest = c;
    if (c != AccuracyClass::exact && !cell.tightest_inexact) cell.tightest_inexact = c;
  }
  return cell;
}

std::string class_name(std::optional<AccuracyClass> c) { return c ? std::string(accuracy::to_string(*c)) : "none"; }

// "f32-reduced 0.31" (the tightest class and its worst error / bound).
std::string landed(const Cell& c) {
  char buf[64];
  if (!c.tightest) return c.nonfinite ? "none (NaN/Inf)" : "none";
  const ClassStat& s = c.cls.at(*c.tightest);
  std::snprintf(buf, sizeof buf, "%s %.3g", class_name(c.tightest).c_str(), s.worst);
  return buf;
}

// The class just stricter than the tightest: "violates fp64-angle (3.1 from position 1)".
std::string stricter(const Cell& c) {
  const auto& all = accuracy::kAccuracyClasses;
  std::size_t i = all.size();
  if (c.tightest) i = static_cast<std::size_t>(std::find(all.begin(), all.end(), *c.tightest) - all.begin());
  if (i == 0) return "";
  const AccuracyClass s = all[i - 1];
  const ClassStat& st = c.cls.at(s);
  char buf[128];
  std::snprintf(buf, sizeof buf, "violates %s (%.3g%s from position %lld)", std::string(accuracy::to_string(s)).c_str(),
                st.worst, s == AccuracyClass::exact ? " ulp" : "", static_cast<long long>(st.first.value_or(-1)));
  return buf;
}

std::string dtype_suffix(const io::Tensor& t) { return t.name.substr(t.name.find('.') + 1); }

// The CPU kernels' names carry their recipe and path (plugin/kernel_name.hpp reads the names users give).
TEST(kernel_classes, CpuKernelNames) {
  for (const k::RecipeInfo& ri : k::recipes()) {
    k::KernelOptions portable;
    portable.portable = true;
    EXPECT_EQ(kut::cpu_kernel_name(ri.recipe, portable), "builtin:" + std::string(ri.name) + " (portable)");
  }
}

TEST(kernel_classes, EveryRecipeDtypeLayoutAndPathLandsInItsClass) {
  const TempRoot root;
  const bool have_avx512 = k::cpu_path() == "avx512";
  std::printf("CPU path here: %s%s\n", std::string(k::cpu_path()).c_str(),
              have_avx512 ? "" : " (no AVX-512: both columns run the portable path)");
  // Summary over the cases: recipe x dtype -> every tightest class seen.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> summary;
  int index = 0;
  for (const Case& cs : cases()) {
    const fs::path dir = write_set(root.path, cs, index++);
    const golden::GoldenSet g = golden::load_golden_set(dir);
    const bool sinusoidal = !g.is_rope();
    std::int64_t max_position = 0;
    for (const Position& p : g.positions()) max_position = std::max({max_position, p.t, p.h, p.w});
    const bool long_positions = max_position >= (std::int64_t{1} << 20);
    std::printf("\n== %s: %lld tokens, %d heads, positions %s\n", cs.name.c_str(), static_cast<long long>(g.tokens()),
                g.heads(), cs.positions.c_str());
    std::printf("  %-15s %-5s %-22s %-22s %s\n", "recipe", "dtype", "portable: tightest", "avx512: tightest",
                "(worst error / bound; the next stricter class)");
    for (const k::RecipeInfo& ri : k::recipes()) {
      std::map<bool, std::map<std::string, Cell>> cells;  // portable? -> dtype -> cell
      for (bool portable : {true, false}) {
        k::KernelOptions ko;
        ko.portable = portable;
        checker::KernelRun run = checker::run_kernel(*kut::make_cpu_kernel(ri.recipe, ko), g);
        ASSERT_TRUE(run.notes.empty()) << run.notes.front();
        std::map<std::string, std::vector<io::Tensor>> by_dtype;
        for (io::Tensor& t : run.tensors) by_dtype[dtype_suffix(t)].push_back(std::move(t));
        for (auto& [dt, ts] : by_dtype) cells[portable][dt] = judge(g, ts);
      }
      for (DType d : kStorage) {
        const std::string dt(to_string(d));
        const Cell& p = cells[true][dt];
        const Cell& a = cells[false][dt];
        std::printf("  %-15s %-5s %-22s %-22s %s\n", std::string(ri.name).c_str(), dt.c_str(), landed(p).c_str(),
                    landed(a).c_str(), stricter(p).c_str());
        summary[{std::string(ri.name), dt}].push_back(class_name(p.tightest));
        const Expect e = expected(ri.recipe, d, sinusoidal, long_positions);
        const std::string repro = "case '" + cs.name + "', recipe " + std::string(ri.name) + ", dtype " + dt +
                                  "; reproduce: ropecheck golden --preset " + cs.preset + " --positions " + cs.positions +
                                  " --heads " + std::to_string(cs.heads) +
                                  " --dtypes f32,f16,bf16 --out g && ropecheck check --golden g --kernel builtin:" +
                                  std::string(ri.name) + " --class ";
        for (const auto& [path, c] : {std::pair<const char*, const Cell*>{"portable", &p}, {"avx512", &a}}) {
          if (e.holds) {
            EXPECT_TRUE(c->cls.at(*e.holds).satisfied)
                << path << " path violates " << accuracy::to_string(*e.holds) << "; " << repro << accuracy::to_string(*e.holds);
          }
          if (e.holds && e.tightest) {
            EXPECT_EQ(class_name(c->tightest_inexact), class_name(e.holds))
                << path << " path lands elsewhere; " << repro << accuracy::to_string(*e.holds);
          }
          if (e.violates) {
            EXPECT_FALSE(c->cls.at(*e.violates).satisfied)
                << path << " path satisfies " << accuracy::to_string(*e.violates) << ", which it should violate; " << repro
                << accuracy::to_string(*e.violates);
          }
        }
        // The two paths agree on the class (their arithmetic differs only in the evaluation order the
        // recipe allows).
        EXPECT_EQ(class_name(p.tightest_inexact), class_name(a.tightest_inexact)) << repro << "...";
      }
    }
  }
  std::printf("\n== summary: tightest class (portable path) per recipe and storage dtype, over the %zu cases\n",
              cases().size());
  for (const k::RecipeInfo& ri : k::recipes())
    for (DType d : kStorage) {
      const std::string dt(to_string(d));
      const std::vector<std::string>& seen = summary[{std::string(ri.name), dt}];
      std::vector<std::string> distinct;
      for (const std::string& s : seen)
        if (std::find(distinct.begin(), distinct.end(), s) == distinct.end()) distinct.push_back(s);
      std::string line;
      for (const std::string& s : distinct)
        line += (line.empty() ? "" : ", ") + s + " x" + std::to_string(std::count(seen.begin(), seen.end(), s));
      std::printf("  %-15s %-5s %s\n", std::string(ri.name).c_str(), dt.c_str(), line.c_str());
    }
}

}  // namespace
}  // namespace ropecheck
