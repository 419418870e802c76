// Tests for the error model (accuracy/error_model.hpp, derivation in accuracy/ERROR_MODEL.md).
//
// Structure: the bounds are monotone in |theta| and the classes nest; then the calibration, the
// part that matters: each class's computation is simulated operation by operation
// (tests/support/float_recipes.hpp: the Hugging Face fp32 recipe, the binary64 recipe, bf16 / f16
// tables with the rotation in that dtype), run over positions up to 2^26 and random input pairs on
// several presets, and compared with the exact reference (MPFR, rope_frequencies<Real>). Every
// error must stay within its class's bound (a failure would be a bug in the model), and the worst
// ratio error / bound is printed. Known-bad recipes (bf16 / f16 inverse frequencies) must violate
// fp32-angle at positions a user meets.
//
// Exact values are kept as double-double (hi + lo), so errors down to 2^-106 relative are resolved,
// which the fp64-angle class needs.
#include <gtest/gtest.h>

#include "test_paths.hpp"
#include "test_scale.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "float_recipes.hpp"
#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"
#include "ropecheck/core/spec_json.hpp"

namespace ropecheck {
namespace {

using accuracy::AccuracyClass;
using accuracy::ClassBound;
using accuracy::PairAngle;
using accuracy::Quantity;

constexpr std::array<DType, 4> kDTypes = {DType::f64, DType::f32, DType::f16, DType::bf16};
constexpr std::array<AccuracyClass, 5> kInexactClasses = {AccuracyClass::fp64_angle, AccuracyClass::f32_reduced,
                                                          AccuracyClass::fp32_angle, AccuracyClass::f16_table,
                                                          AccuracyClass::bf16_table};

// ---- the bounds themselves -----------------------------------------------------------------------

TEST(error_model, NamesRoundTrip) {
  for (AccuracyClass c : accuracy::kAccuracyClasses) {
    EXPECT_EQ(accuracy::parse_accuracy_class(accuracy::to_string(c)), c);
    EXPECT_FALSE(accuracy::describe(c).empty());
  }
  EXPECT_FALSE(accuracy::parse_accuracy_class("fp32"));
  EXPECT_FALSE(accuracy::parse_accuracy_class("FP32-ANGLE"));
  EXPECT_EQ(accuracy::kDefaultAccuracyClass, AccuracyClass::fp32_angle);
}

TEST(error_model, UnitRoundoffs) {
  EXPECT_EQ(unit_roundoff(DType::f64), std::ldexp(1.0, -53));
  EXPECT_EQ(unit_roundoff(DType::f32), std::ldexp(1.0, -24));
  EXPECT_EQ(unit_roundoff(DType::f16), std::ldexp(1.0, -11));
  EXPECT_EQ(unit_roundoff(DType::bf16), std::ldexp(1.0, -8));
  EXPECT_EQ(min_subnormal(DType::f16), std::ldexp(1.0, -24));
  EXPECT_EQ(min_subnormal(DType::bf16), std::ldexp(1.0, -133));
}

// The formulas at a few points, written out from ERROR_MODEL.md (guards against silent changes).
TEST(error_model, WorkedValues) {
  const double g1 = 1 + 1.0 / 32, u32 = std::ldexp(1.0, -24), u16 = std::ldexp(1.0, -11), ub = std::ldexp(1.0, -8);
  // fp32-angle, f32 output, rotated, theta = 1000, w = 1: (14 * 1000 + 8 + 1) u32 (1 + g).
  EXPECT_DOUBLE_EQ(accuracy::element_bound(AccuracyClass::fp32_angle, DType::f32, {1000, 0}, Quantity::rotated),
                   g1 * (14 * 1000 + 9) * u32);
  // ... with |ln w| = 3: the inverse-frequency term grows by 6 * 3 per radian.
  EXPECT_DOUBLE_EQ(accuracy::element_bound(AccuracyClass::fp32_angle, DType::f32, {1000, 3}, Quantity::rotated),
                   g1 * ((14 + 18) * 1000 + 9) * u32);
  // bf16-table, bf16 output, rotated, theta = 0: 6 u32 + 3 u_bf16 + u_bf16.
  EXPECT_DOUBLE_EQ(accuracy::element_bound(AccuracyClass::bf16_table, DType::bf16, {0, 0}, Quantity::rotated),
                   g1 * (6 * u32 + 4 * ub));
  // f16-table, f16 output, table value: 4 u32 + u16 + u16.
  EXPECT_DOUBLE_EQ(accuracy::element_bound(AccuracyClass::f16_table, DType::f16, {0, 0}, Quantity::table),
                   g1 * (4 * u32 + 2 * u16));
  // f32-reduced: the angle term of fp64-angle, the constant of fp32-angle.
  const double u64 = std::ldexp(1.0, -53);
  EXPECT_DOUBLE_EQ(accuracy::element_bound(AccuracyClass::f32_reduced, DType::f32, {1000, 3}, Quantity::rotated),
                   g1 * ((14 + 18) * 1000 * u64 + 9 * u32));
  EXPECT_DOUBLE_EQ(accuracy::element_bound(AccuracyClass::f32_reduced, DType::bf16, {0, 0}, Quantity::table),
                   g1 * (4 * u32 + ub));
  EXPECT_EQ(accuracy::absolute_floor(AccuracyClass::f32_reduced, DType::f32), 2 * std::ldexp(1.0, -149));
  EXPECT_EQ(accuracy::absolute_floor(AccuracyClass::f32_reduced, DType::f64), 2 * std::ldexp(1.0, -149));
  // exact: u_dt; the angle term caps at 2.
  EXPECT_EQ(accuracy::element_bound(AccuracyClass::exact, DType::bf16, {1e9, 5}, Quantity::rotated), ub);
  EXPECT_DOUBLE_EQ(accuracy::element_bound(AccuracyClass::fp32_angle, DType::f32, {1e12, 0}, Quantity::table),
                   2 + g1 * 5 * u32);
  // pass-through: the storage rounding only, whatever the angle.
  EXPECT_DOUBLE_EQ(accuracy::element_bound(AccuracyClass::bf16_table, DType::f16, {1e6, 2}, Quantity::passthrough), g1 * u16);
}

std::vector<double> theta_grid() {
  std::vector<double> v = {0};
  for (double t = 1e-6; t < 1e10; t *= 1.7) v.push_back(t);
  return v;
}

TEST(error_model, MonotoneInTheta) {
  for (AccuracyClass c : accuracy::kAccuracyClasses)
    for (DType dt : kDTypes)
      for (Quantity q : {Quantity::table, Quantity::rotated, Quantity::passthrough})
        for (double lnw : {0.0, 0.5, 4.0, 13.0}) {
          double prev = -1;
          for (double th : theta_grid()) {
            const double b = accuracy::element_bound(c, dt, {th, lnw}, q);
            ASSERT_GE(b, prev) << accuracy::to_string(c) << " " << to_string(dt) << " theta " << th;
            ASSERT_GT(b, 0);
            prev = b;
          }
        }
}

TEST(error_model, ClassesNest) {
  for (DType dt : kDTypes)
    for (Quantity q : {Quantity::table, Quantity::rotated, Quantity::passthrough})
      for (double lnw : {0.0, 2.0, 9.0})
        for (double th : theta_grid())
          for (double M : {0.0, 1e-30, 1e-8, 1.0, 7.5}) {
            double prev = -1;
            for (AccuracyClass c : accuracy::kAccuracyClasses) {
              const double allowed = accuracy::class_bound(c, dt, q).allowed({th, lnw}, M);
              ASSERT_GE(allowed, prev) << accuracy::to_string(c) << " " << to_string(dt) << " theta " << th << " M " << M;
              prev = allowed;
            }
          }
}

// ---- calibration against real computations ---------------------------------------------------

struct DD {  // an exact value as double-double
  double hi = 0, lo = 0;
};
DD dd(const Real& v) {
  const double hi = v.convert_to<double>();
  const Real rest = v - Real(hi);
  return {hi, rest.convert_to<double>()};
}
// |cand - exact|: cand - hi is exact when the two are close (Sterbenz), and a far-off candidate
// needs no more than double accuracy.
double err(double cand, const DD& e) { return std::fabs((cand - e.hi) - e.lo); }

std::uint64_t next(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
// An input in (-4, 4), exactly representable in bf16 (so in every dtype); sometimes 0 or tiny.
float random_input(std::uint64_t& s) {
  const std::uint64_t z = next(s);
  if (z % 61 == 0) return 0.0f;
  const double u = static_cast<double>(z >> 11) * 0x1p-53;
  float v = static_cast<float>((u - 0.5) * 8);
  if (z % 53 == 1) v *= 1e-3f;
  return recipes::round_bf16(v);
}

// Positions 0..16, then 24 random positions in each octave [2^e, 2^(e+1)) up to 2^26 (3 at the small
// test scale, 1 at the tiny one: every octave and every assertion below still runs) and the last
// position of each octave (past 2^24 the f32 position itself is rounded).
std::vector<std::int64_t> calibration_positions() {
  std::vector<std::int64_t> v;
  for (std::int64_t p = 0; p <= 16; ++p) v.push_back(p);
  std::uint64_t s = 12345;
  const int per_octave = test::scaled(24, 3, 1);
  for (int e = 4; e < 26; ++e) {
    const std::int64_t lo = std::int64_t{1} << e;
    for (int i = 0; i < per_octave; ++i) v.push_back(lo + static_cast<std::int64_t>(next(s) % static_cast<std::uint64_t>(lo)));
    v.push_back(2 * lo - 1);
  }
  return v;
}

struct Sample {
  std::int64_t p = 0;
  int j = 0;
  float a = 0, b = 0;
  DD c, s, ya, yb;
  PairAngle angle;
  double M = 0;  // att * (|a| + |b|)
};

struct RopeCase {
  std::string name;
  RopeSpec rope;
  std::vector<Sample> samples;
};

RopeCase build_case(const std::string& preset, const std::vector<std::int64_t>& positions) {
  RopeCase rc{preset, load_preset(preset).rope, {}};
  std::int64_t maxp = 0;
  for (auto p : positions) maxp = std::max(maxp, p);
  ScopedPrecision prec(working_precision_bits(106, rope_max_abs_angle(rc.rope, std::nullopt, maxp)));
  const RopeFrequencies<Real> f = rope_frequencies<Real>(rc.rope);
  const double att = f.attention_factor.convert_to<double>();
  std::uint64_t seed = std::hash<std::string>{}(preset);
  std::vector<Real> c, s;
  for (std::int64_t p : positions) {
    rope_cos_sin(rc.rope, f, Position::uniform(p), c, s);
    for (int j = 0; j < rope_pairs(rc.rope); ++j) {
      const double w = f.inv_freq[static_cast<std::size_t>(j)].convert_to<double>();
      for (int k = 0; k < 2; ++k) {
        Sample x;
        x.p = p;
        x.j = j;
        x.a = random_input(seed);
        x.b = random_input(seed);
        const Real& cj = c[static_cast<std::size_t>(j)];
        const Real& sj = s[static_cast<std::size_t>(j)];
        x.c = dd(cj);
        x.s = dd(sj);
        x.ya = dd(f.attention_factor * (Real(x.a) * cj - Real(x.b) * sj));
        x.yb = dd(f.attention_factor * (Real(x.b) * cj + Real(x.a) * sj));
        x.angle = accuracy::pair_angle(static_cast<double>(p), w);
        x.M = att * (std::fabs(static_cast<double>(x.a)) + std::fabs(static_cast<double>(x.b)));
        rc.samples.push_back(x);
      }
    }
  }
  return rc;
}

const std::vector<RopeCase>& rope_cases() {
  static const std::vector<RopeCase> cases = [] {
    std::vector<RopeCase> v;
    const std::vector<std::int64_t> pos = calibration_positions();
    // Plain (power-of-two and non-power-of-two rotary dims), llama3, yarn with and without an
    // attention factor, longrope, partial rotary.
    for (const char* p : {"llama-2-7b", "llama-3.1-8b", "qwen2.5-7b-yarn", "deepseek-v3", "gpt-oss-20b",
                          "phi-3.5-mini", "gpt-neox-20b", "gemma-3-4b-global"})
      v.push_back(build_case(p, pos));
    return v;
  }();
  return cases;
}

// Worst error / allowed over a set of elements.
struct Margin {
  double worst = 0;        // max error / allowed over all elements
  double worst_linear = 0; // ... over elements whose angle term is below 1/2 (far from the cap of 2)
  double worst_angle = 0;  // ... of those, elements whose angle term dominates (>= 4x the rest)
  std::int64_t violations = 0;
  std::int64_t first_violation = -1;  // smallest violating position
  std::string where;

  void add(const ClassBound& b, const PairAngle& a, double M, double e, std::int64_t p, int j, const char* what) {
    const double allowed = b.allowed(a, M);
    const double ratio = std::isnan(e) ? INFINITY : e / allowed;
    if (ratio > worst) {
      worst = ratio;
      where = std::string(what) + " p=" + std::to_string(p) + " j=" + std::to_string(j);
    }
    const double angle_term = (b.k_log * a.abs_log_freq + b.k_lin) * a.abs_theta;
    if (angle_term < 0.5) {
      worst_linear = std::max(worst_linear, ratio);
      if (angle_term >= 4 * b.k_const && M > 0) worst_angle = std::max(worst_angle, ratio);
    }
    if (ratio > 1) {
      ++violations;
      if (first_violation < 0 || p < first_violation) first_violation = p;
    }
  }
  void merge(const Margin& o) {
    if (o.worst > worst) {
      worst = o.worst;
      where = o.where;
    }
    worst_angle = std::max(worst_angle, o.worst_angle);
    worst_linear = std::max(worst_linear, o.worst_linear);
    violations += o.violations;
    if (o.first_violation >= 0 && (first_violation < 0 || o.first_violation < first_violation))
      first_violation = o.first_violation;
  }
};

using Margins = std::map<AccuracyClass, Margin>;

// Runs a kernel (cos_sin_table(p, j), rotate(a, b, p, j)) over a case and measures every class.
template <class Kernel>
Margins measure(const RopeCase& rc, const Kernel& k, DType out) {
  Margins m;
  std::map<AccuracyClass, std::array<ClassBound, 2>> bounds;
  for (AccuracyClass c : kInexactClasses)
    bounds[c] = {accuracy::class_bound(c, out, Quantity::table), accuracy::class_bound(c, out, Quantity::rotated)};
  for (const Sample& x : rc.samples) {
    const auto [c, s] = k.cos_sin_table(x.p, x.j);
    const auto [ya, yb] = k.rotate(x.a, x.b, x.p, x.j);
    const double ec = err(c, x.c), es = err(s, x.s), ea = err(ya, x.ya), eb = err(yb, x.yb);
    for (AccuracyClass cl : kInexactClasses) {
      Margin& mg = m[cl];
      const auto& b = bounds[cl];
      mg.add(b[0], x.angle, 1.0, ec, x.p, x.j, "cos");
      mg.add(b[0], x.angle, 1.0, es, x.p, x.j, "sin");
      mg.add(b[1], x.angle, x.M, ea, x.p, x.j, "rot_a");
      mg.add(b[1], x.angle, x.M, eb, x.p, x.j, "rot_b");
    }
  }
  return m;
}

void report(const std::string& what, AccuracyClass c, const Margin& m) {
  std::printf("  %-36s %-11s worst %.4f, below the cap %.4f, angle-dominated %.4f; violations %lld%s%s\n",
              what.c_str(), std::string(accuracy::to_string(c)).c_str(), m.worst, m.worst_linear, m.worst_angle,
              static_cast<long long>(m.violations),
              m.where.empty() ? "" : "  at ", m.where.c_str());
}

std::string recipe_name(const recipes::Recipe& r) {
  std::string s = r.inv == recipes::InvFreqMode::hf_f32       ? "hf-f32"
                  : r.inv == recipes::InvFreqMode::f64_to_f32 ? "f64->f32"
                  : r.inv == recipes::InvFreqMode::bf16       ? "bf16-inv"
                                                              : "f16-inv";
  if (r.trig == recipes::TrigMode::fast_math_model) s += "+fastsin";
  s += " table " + std::string(to_string(r.table)) + " out " + std::string(to_string(r.out));
  return s;
}

// One recipe over every case: the merged margins, each case printed.
Margins run_recipe(const recipes::Recipe& r, std::initializer_list<AccuracyClass> print) {
  Margins all;
  for (const RopeCase& rc : rope_cases()) {
    const recipes::RecipeKernel k(rc.rope, std::nullopt, r);
    const Margins m = measure(rc, k, r.out);
    for (auto& [c, mg] : m) all[c].merge(mg);
  }
  for (AccuracyClass c : print) report(recipe_name(r), c, all[c]);
  return all;
}

// The inverse-frequency allowance (6 |ln w| + 12) u32 against the Hugging Face f32 recipe on every
// RoPE preset and every variant spec of the mpmath cross-check (tests/python/specs: dynamic,
// proportional, odd bases, partial rotary ...), with and without a long run-time sequence
// (dynamic NTK, the LongRoPE switch).
TEST(error_model_calibration, HfInverseFrequenciesWithinAllowance) {
  const double u32 = std::ldexp(1.0, -24);
  double worst_all = 0;
  std::vector<std::pair<std::string, EncodingSpec>> specs;
  for (const std::string& name : preset_names()) specs.emplace_back(name, load_preset(name));
  for (const auto& f : std::filesystem::directory_iterator(ropecheck::test::specs_dir()))
    if (f.path().extension() == ".json") specs.emplace_back(f.path().stem().string(), load_spec_file(f.path()));
  ASSERT_GT(specs.size(), 40u);
  for (const auto& [name, spec] : specs) {
    if (spec.family != Family::rope) continue;
    for (std::optional<std::int64_t> seq : {std::optional<std::int64_t>{}, std::optional<std::int64_t>{1 << 20}}) {
      ScopedPrecision prec(160);
      const RopeFrequencies<Real> exact = rope_frequencies<Real>(spec.rope, seq);
      const std::vector<float> hf = recipes::hf_inv_freq_f32(spec.rope, seq);
      double worst_rho = 0, worst_ratio = 0;
      for (std::size_t j = 0; j < hf.size(); ++j) {
        if (exact.inv_freq[j] == 0) continue;
        const double rho = (abs(Real(hf[j]) - exact.inv_freq[j]) / exact.inv_freq[j]).convert_to<double>() / u32;
        const double lnw = std::fabs(std::log(exact.inv_freq[j].convert_to<double>()));
        const double allowance = accuracy::model::kInvLog * lnw + accuracy::model::kInvConst;
        worst_rho = std::max(worst_rho, rho);
        worst_ratio = std::max(worst_ratio, rho / allowance);
      }
      std::printf("  %-20s seq %-7s worst |rho| %.2f u32, worst |rho| / allowance %.3f\n", name.c_str(),
                  seq ? "2^20" : "default", worst_rho, worst_ratio);
      EXPECT_LE(worst_ratio, 1.0) << name;
      worst_all = std::max(worst_all, worst_ratio);
    }
  }
  EXPECT_GT(worst_all, 0.05);
}

TEST(error_model_calibration, HuggingFaceFp32RecipeIsFp32Angle) {
  // The HF recipe with f32 activations, and with its f32 result stored in bf16 / f16; also the
  // f32 recipe with correctly rounded f32 frequencies.
  for (DType out : {DType::f32, DType::bf16, DType::f16}) {
    for (auto inv : {recipes::InvFreqMode::hf_f32, recipes::InvFreqMode::f64_to_f32}) {
      const recipes::Recipe r{inv, recipes::TrigMode::libm, DType::f32, out};
      const Margins m = run_recipe(r, {AccuracyClass::fp32_angle, AccuracyClass::f32_reduced, AccuracyClass::fp64_angle});
      const Margin& f32 = m.at(AccuracyClass::fp32_angle);
      EXPECT_LE(f32.worst, 1.0) << recipe_name(r) << " " << f32.where;
      // Calibrated, not absurdly loose: where the angle term dominates, errors reach a visible
      // fraction of it.
      EXPECT_GT(f32.worst_angle, 0.05) << recipe_name(r);
      // And it is not better than the stricter classes allow (the classes separate): its f32 angle
      // error is far outside f32-reduced's binary64 angle term.
      EXPECT_GT(m.at(AccuracyClass::fp64_angle).violations, 0) << recipe_name(r);
      EXPECT_GT(m.at(AccuracyClass::f32_reduced).violations, 0) << recipe_name(r);
    }
  }
}

TEST(error_model_calibration, Binary64RecipeIsFp64Angle) {
  for (DType out : {DType::f64, DType::f32, DType::bf16}) {
    Margins all;
    for (const RopeCase& rc : rope_cases()) {
      const recipes::F64Kernel k(rc.rope, std::nullopt, out);
      for (auto& [c, mg] : measure(rc, k, out)) all[c].merge(mg);
    }
    const std::string name = "f64 out " + std::string(to_string(out));
    report(name, AccuracyClass::fp64_angle, all[AccuracyClass::fp64_angle]);
    EXPECT_LE(all[AccuracyClass::fp64_angle].worst, 1.0) << name << " " << all[AccuracyClass::fp64_angle].where;
    if (out == DType::f64) {
      EXPECT_GT(all[AccuracyClass::fp64_angle].worst_angle, 0.05);
    }
  }
}

// The `accurate` recipe (angle formed and reduced in binary64, f32 sin / cos and rotation,
// recipes::AccurateKernel): with f32 storage it lands in f32-reduced and not in fp64-angle (its f32
// sin / cos and rotation are far above fp64-angle's constant for an f32 output); with bf16 / f16
// storage the storage rounding dominates and it lands in fp64-angle (ERROR_MODEL.md section 10:
// its f32 errors, <= ~9 u32 M, fit in the g u_dt M slack of those dtypes).
TEST(error_model_calibration, AccurateRecipeIsF32Reduced) {
  for (DType out : {DType::f32, DType::bf16, DType::f16}) {
    Margins all;
    for (const RopeCase& rc : rope_cases()) {
      const recipes::AccurateKernel k(rc.rope, std::nullopt, out);
      for (auto& [c, mg] : measure(rc, k, out)) all[c].merge(mg);
    }
    const std::string name = "accurate out " + std::string(to_string(out));
    report(name, AccuracyClass::fp64_angle, all[AccuracyClass::fp64_angle]);
    report(name, AccuracyClass::f32_reduced, all[AccuracyClass::f32_reduced]);
    const Margin& red = all[AccuracyClass::f32_reduced];
    EXPECT_LE(red.worst, 1.0) << name << " " << red.where;
    if (out == DType::f32) {
      EXPECT_GT(all[AccuracyClass::fp64_angle].violations, 0) << name;
      // The constant is calibrated, not absurdly loose: errors reach a visible fraction of it.
      EXPECT_GT(red.worst, 0.1) << name;
    } else {
      EXPECT_LE(all[AccuracyClass::fp64_angle].worst, 1.0) << name << " " << all[AccuracyClass::fp64_angle].where;
    }
  }
}

TEST(error_model_calibration, TableRecipesAreTheirTableClass) {
  struct Row {
    DType table, out;
    AccuracyClass cls, stricter;
  };
  for (const Row& row : {Row{DType::bf16, DType::bf16, AccuracyClass::bf16_table, AccuracyClass::f16_table},
                         Row{DType::bf16, DType::f32, AccuracyClass::bf16_table, AccuracyClass::f16_table},
                         Row{DType::f16, DType::f16, AccuracyClass::f16_table, AccuracyClass::fp32_angle},
                         Row{DType::f16, DType::f32, AccuracyClass::f16_table, AccuracyClass::fp32_angle}}) {
    const recipes::Recipe r{recipes::InvFreqMode::hf_f32, recipes::TrigMode::libm, row.table, row.out};
    const Margins m = run_recipe(r, {row.cls, row.stricter});
    EXPECT_LE(m.at(row.cls).worst, 1.0) << recipe_name(r) << " " << m.at(row.cls).where;
    EXPECT_GT(m.at(row.cls).worst, 0.25) << recipe_name(r);  // the table terms are tight
    EXPECT_GT(m.at(row.stricter).violations, 0) << recipe_name(r);
  }
}

TEST(error_model_calibration, CorrectlyRoundedValuesSatisfyEveryClass) {
  for (const RopeCase& rc : rope_cases())
    for (DType out : kDTypes)
      for (AccuracyClass c : accuracy::kAccuracyClasses) {
        const ClassBound bt = accuracy::class_bound(c, out, Quantity::table), br = accuracy::class_bound(c, out, Quantity::rotated);
        Margin m;
        for (const Sample& x : rc.samples) {
          auto rounded = [&](const DD& e) { return recipes::round_double_to(e.hi + e.lo, out); };
          m.add(bt, x.angle, 1.0, err(rounded(x.c), x.c), x.p, x.j, "cos");
          m.add(br, x.angle, x.M, err(rounded(x.ya), x.ya), x.p, x.j, "rot_a");
        }
        ASSERT_LE(m.worst, 1.0) << rc.name << " " << to_string(out) << " " << accuracy::to_string(c) << " " << m.where;
      }
}

// Sinusoidal tables the f32 way frameworks build them: w_i = expf(i * f32(-ln(base) / denom))
// (Vaswani's annotated transformer, fairseq / tensor2tensor), angle = f32(p + offset) * w_i.
TEST(error_model_calibration, SinusoidalFp32RecipesAreFp32Angle) {
  for (const char* preset : {"transformer-base", "fairseq-transformer"}) {
    const SinusoidalSpec s = load_preset(preset).sinusoidal;
    const int n = sinusoidal_frequency_count(s);
    const bool vaswani = s.frequencies == SinusoidalFrequencies::vaswani;
    const double denom = vaswani ? s.d_model : std::max(s.d_model / 2 - 1, 1);
    const float step = static_cast<float>(-std::log(s.base) / denom);
    std::vector<float> w(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) w[static_cast<std::size_t>(i)] = std::exp(static_cast<float>(vaswani ? 2 * i : i) * step);
    const std::vector<std::int64_t> positions = calibration_positions();
    std::int64_t maxp = 0;
    for (auto p : positions) maxp = std::max(maxp, p);
    ScopedPrecision prec(working_precision_bits(106, sinusoidal_max_abs_angle(s, maxp)));
    const std::vector<Real> wx = sinusoidal_frequencies<Real>(s);
    struct Pe {
      std::int64_t p;
      int i;
      float value;  // the f32 recipe's value
      DD exact;
      PairAngle angle;
    };
    std::vector<Pe> pes;
    for (std::int64_t p : positions) {
      const std::vector<Real> row = sinusoidal_row<Real>(s, wx, p);
      for (int c = 0; c < s.d_model; ++c) {
        const SinusoidalColumn col = sinusoidal_column(s, c);
        if (col.kind == SinusoidalKind::zero) continue;
        const std::size_t i = static_cast<std::size_t>(col.frequency);
        const float angle = static_cast<float>(p + s.position_offset) * w[i];
        pes.push_back({p, col.frequency, col.kind == SinusoidalKind::sine ? std::sin(angle) : std::cos(angle),
                       dd(row[static_cast<std::size_t>(c)]),
                       accuracy::pair_angle(static_cast<double>(p + s.position_offset), wx[i].convert_to<double>())});
      }
    }
    for (DType out : {DType::f32, DType::bf16, DType::f16}) {
      const ClassBound b = accuracy::class_bound(AccuracyClass::fp32_angle, out, Quantity::table);
      Margin m;
      for (const Pe& e : pes) m.add(b, e.angle, 1.0, err(recipes::round_float_to(e.value, out), e.exact), e.p, e.i, "pe");
      report(std::string(preset) + " f32 out " + std::string(to_string(out)), AccuracyClass::fp32_angle, m);
      EXPECT_LE(m.worst, 1.0) << preset << " " << m.where;
      if (out == DType::f32) {
        EXPECT_GT(m.worst_angle, 0.05) << preset;
      }
    }
  }
}

// Known-bad recipes a user meets: inverse frequencies cast to bf16 (transformers #29496, sglang-jax
// #1472) or f16 (OpenVINO #35674) before the angle. They must violate fp32-angle within the first
// 4096 positions, whatever the output dtype.
TEST(error_model_calibration, LowPrecisionInverseFrequenciesViolateFp32Angle) {
  for (const char* preset : {"llama-2-7b", "llama-3.1-8b"}) {
    const RopeSpec r = load_preset(preset).rope;
    ScopedPrecision prec(working_precision_bits(106, rope_max_abs_angle(r, std::nullopt, 4096)));
    const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
    struct Probe {
      recipes::Recipe recipe;
      recipes::RecipeKernel kernel;
      ClassBound bound;
      std::int64_t first = -1;
      double worst_at_4096 = 0;
    };
    std::vector<Probe> probes;
    for (auto inv : {recipes::InvFreqMode::bf16, recipes::InvFreqMode::f16})
      for (DType out : {DType::f32, DType::bf16}) {
        const recipes::Recipe rec{inv, recipes::TrigMode::libm, DType::f32, out};
        probes.push_back({rec, recipes::RecipeKernel(r, std::nullopt, rec),
                          accuracy::class_bound(AccuracyClass::fp32_angle, out, Quantity::table)});
      }
    std::vector<Real> c, s;
    for (std::int64_t p = 0; p <= 4096; ++p) {
      bool pending = p == 4096;
      for (const Probe& pr : probes) pending = pending || pr.first < 0;
      if (!pending) continue;
      rope_cos_sin(r, f, Position::uniform(p), c, s);
      for (Probe& pr : probes)
        for (int j = 0; j < rope_pairs(r); ++j) {
          const std::size_t jj = static_cast<std::size_t>(j);
          const auto [cc, ss] = pr.kernel.cos_sin_table(p, j);
          const PairAngle a = accuracy::pair_angle(static_cast<double>(p), f.inv_freq[jj].convert_to<double>());
          const double e = std::max(err(cc, dd(c[jj])), err(ss, dd(s[jj])));
          const double ratio = e / pr.bound.allowed(a, 1.0);
          if (ratio > 1 && pr.first < 0) pr.first = p;
          if (p == 4096) pr.worst_at_4096 = std::max(pr.worst_at_4096, ratio);
        }
    }
    for (const Probe& pr : probes) {
      std::printf("  %-14s %-32s first fp32-angle violation at position %lld; worst error/bound at 4096: %.1f\n",
                  preset, recipe_name(pr.recipe).c_str(), static_cast<long long>(pr.first), pr.worst_at_4096);
      EXPECT_GE(pr.first, 1) << preset << " " << recipe_name(pr.recipe);
      EXPECT_LE(pr.first, 4096) << preset << " " << recipe_name(pr.recipe);
      EXPECT_GT(pr.worst_at_4096, 1.0) << preset << " " << recipe_name(pr.recipe);
    }
  }
}

// CUDA fast-math sin / cos (the model in float_recipes.hpp: argument scaled by f32(1/(2 pi)) with
// a round-toward-zero multiply). Its extra error is proportional to |theta| with a coefficient of
// 0.7 to 2.7 u32, the same order as the f32 angle error itself, so it stays inside fp32-angle: the
// class cannot tell it from the libm recipe, but the checker's per-position error (pair-relative,
// binned) shows it, and it is far outside fp64-angle.
TEST(error_model_calibration, FastMathSinModelStaysInFp32Angle) {
  const recipes::Recipe fast{recipes::InvFreqMode::hf_f32, recipes::TrigMode::fast_math_model, DType::f32, DType::f32};
  const recipes::Recipe libm{recipes::InvFreqMode::hf_f32, recipes::TrigMode::libm, DType::f32, DType::f32};
  const Margins mf = run_recipe(fast, {AccuracyClass::fp32_angle});
  const Margins ml = run_recipe(libm, {AccuracyClass::fp32_angle});
  EXPECT_LE(mf.at(AccuracyClass::fp32_angle).worst, 1.0);
  EXPECT_GT(mf.at(AccuracyClass::fp32_angle).worst_angle, ml.at(AccuracyClass::fp32_angle).worst_angle);
}

}  // namespace
}  // namespace ropecheck
