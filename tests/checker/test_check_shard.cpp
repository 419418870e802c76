// A check split over `--shard I/N` parts (check_part.hpp) and the exact sums that make it mergeable
// (exact_sum.hpp): the parts of N in {1, 2, 3, 7}, written to JSON, read back and merged in any order,
// give the report one run gives, bit for bit; so does any thread count; parts of different runs,
// duplicate and missing shards are refused. ExactSum is checked against sums known exactly (integers
// times a power of two, summed in __int128) and on the rounding cases (ties to even, subnormals,
// overflow).
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ropecheck/checker/check_part.hpp"
#include "ropecheck/checker/checker.hpp"
#include "ropecheck/io/exact_sum.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/checker/kernel_run.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/reference/presets.hpp"

namespace ropecheck::golden {
using namespace ropecheck::io;
using namespace ropecheck::checker;
namespace {

namespace fs = std::filesystem;

// ---- ExactSum --------------------------------------------------------------------------------------

double sum_of(const std::vector<double>& v) {
  ExactSum s;
  for (double x : v) s.add(x);
  return s.value();
}

TEST(ExactSum, RoundsTheExactSumOnceToNearestEven) {
  const double u = std::ldexp(1.0, -53);  // half an ulp of 1
  EXPECT_EQ(sum_of({1.0, u, u}), 1.0 + 2 * u);       // a left fold in double gives 1
  EXPECT_EQ(sum_of({1.0, u}), 1.0);                  // a tie: to even
  EXPECT_EQ(sum_of({1.0 + 2 * u, u}), 1.0 + 4 * u);  // a tie: to even (upwards)
  EXPECT_EQ(sum_of({1.0, u, std::ldexp(1.0, -200)}), 1.0 + 2 * u);  // just past the tie: up
  EXPECT_EQ(sum_of({}), 0.0);
  const double tiny = std::numeric_limits<double>::denorm_min();
  EXPECT_EQ(sum_of({tiny, tiny, tiny}), 3 * tiny);
  EXPECT_EQ(sum_of({DBL_MAX, DBL_MAX}), std::numeric_limits<double>::infinity());
  EXPECT_EQ(sum_of({DBL_MAX, 0.0}), DBL_MAX);
  EXPECT_EQ(sum_of({1.0, std::numeric_limits<double>::infinity()}), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(sum_of({1.0, std::nan("")})));
  EXPECT_TRUE(std::isnan(sum_of({1.0, -1.0})));  // not an error magnitude
}

TEST(ExactSum, EqualsTheExactSumWhateverTheOrderOrGrouping) {
  // k_i * 2^-30 with k_i < 2^45: the exact sum is an __int128 times 2^-30, rounded once by the conversion.
  std::mt19937_64 rng(20261126);  // fixed seed
  std::vector<double> v;
  __extension__ __int128 exact = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::int64_t k = static_cast<std::int64_t>(rng() >> (19 + rng() % 40));
    v.push_back(std::ldexp(static_cast<double>(k), -30));
    exact += k;
  }
  const double want = std::ldexp(static_cast<double>(exact), -30);
  ExactSum fwd, rev;
  for (double x : v) fwd.add(x);
  for (auto it = v.rbegin(); it != v.rend(); ++it) rev.add(*it);
  EXPECT_EQ(fwd.value(), want);
  EXPECT_EQ(rev, fwd);
  std::vector<ExactSum> parts(7);
  for (std::size_t i = 0; i < v.size(); ++i) parts[(i * 7) / v.size()].add(v[i]);
  ExactSum merged;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) merged.merge(*it);
  EXPECT_EQ(merged, fwd);
  EXPECT_EQ(merged.to_text(), fwd.to_text());
}

TEST(ExactSum, TextReadsBackExactly) {
  std::vector<ExactSum> sums(5);
  sums[1].add(std::numeric_limits<double>::denorm_min());
  sums[2].add(1e300);
  sums[2].add(1e-300);
  sums[2].add(3.25);
  sums[3].add(std::numeric_limits<double>::infinity());
  sums[4].add(std::nan(""));
  for (const ExactSum& s : sums) {
    const std::optional<ExactSum> back = ExactSum::from_text(s.to_text());
    ASSERT_TRUE(back) << s.to_text();
    EXPECT_EQ(*back, s) << s.to_text();
  }
  EXPECT_EQ(sums[0].to_text(), "0");
  EXPECT_EQ(sums[1].to_text(), "0x1p-1074");
  ExactSum three;
  three.add(3.0);
  EXPECT_EQ(three.to_text(), "0xc000000000000p-50");  // 3 * 2^50 * 2^-50: whole 64-bit limbs, from 2^-1074
  EXPECT_EQ(ExactSum::from_text("0x3p+0")->value(), 3.0);
  for (const char* bad : {"", "1", "0x", "0xp-3", "0x1g-3", "0x1p", "0x1p-", "0x1p3", "0x1p-99999", "inf ", "0x1p+9999"})
    EXPECT_FALSE(ExactSum::from_text(bad)) << bad;
}

// ---- check parts -----------------------------------------------------------------------------------

fs::path set_dir() {
  static const fs::path dir = [] {
    const fs::path out = fs::temp_directory_path() / ("ropecheck_check_shard_" + std::to_string(::getpid()));
    fs::remove_all(out);
    GoldenOptions o;
    o.spec = load_preset("qwen2-vl-7b");  // three position streams: bins keyed by each
    o.positions = parse_positions("0:20,grid:8:3:4,4095,65535");
    o.dtypes = {DType::f32, DType::bf16};
    o.heads = 2;
    o.seed = 11;
    o.out = out;
    o.threads = 2;
    write_golden_set(o);
    return out;
  }();
  return dir;
}

struct Cleanup {
  ~Cleanup() {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("ropecheck_check_shard_" + std::to_string(::getpid())), ec);
  }
} cleanup;

// The HF recipe fails f32-reduced on some elements, so violations, first positions and worst lists
// carry information.
std::vector<Tensor> hf_candidate(const GoldenSet& g) { return run_kernel(*kut::make_cpu_kernel(kernels::Recipe::hf), g).tensors; }

CheckOptions options(int threads) {
  CheckOptions o;
  o.criterion = Criterion::of_class(accuracy::AccuracyClass::f32_reduced);
  o.threads = threads;
  o.worst_count = 7;
  return o;
}

nlohmann::json round_trip(const CheckPart& p, const nlohmann::json& run) {
  return nlohmann::json::parse(part_to_json(p, run, {{"kind", "test"}}).dump());
}

TEST(CheckShard, PartsMergedEqualOneRunBitForBit) {
  const GoldenSet g = load_golden_set(set_dir());
  const std::vector<Tensor> cand = hf_candidate(g);
  const CheckReport one = check_candidate(g, cand, options(1));
  ASSERT_EQ(one.verdict, Verdict::fail) << "the case must have failures to merge";
  const std::string want = one.to_json().dump();
  EXPECT_EQ(check_candidate(g, cand, options(3)).to_json().dump(), want) << "thread count changed the report";
  for (int n : {1, 2, 3, 7}) {
    std::vector<nlohmann::json> parts;
    std::vector<std::string> names;
    for (int i = n; i >= 1; --i) {  // any order
      parts.push_back(round_trip(check_candidate_part(g, cand, options(1 + i % 2), Shard{i, n}), {{"x", 1}}));
      names.push_back(std::to_string(i) + ".json");
    }
    const MergedCheck m = merge_check_parts(parts, names);
    EXPECT_EQ(finalize(m.whole).to_json().dump(), want) << n << " parts";
    EXPECT_EQ(m.run, (nlohmann::json{{"x", 1}}));
    EXPECT_EQ(m.source, (nlohmann::json{{"kind", "test"}}));
  }
}

// A kernel that declined every output: a part with no tensor, every asked-for output not tested and the
// kernel's reason; its parts merge into the not-tested report one run gives.
TEST(CheckShard, DeclinedKernelIsNotTestedWithItsReason) {
  const GoldenSet g = load_golden_set(set_dir());
  CheckOptions o = options(1);
  o.only = {"q_rot"};
  const CheckReport one = finalize(declined_check_part(g, o, Shard{}, "no multimodal RoPE here"));
  EXPECT_EQ(one.verdict, Verdict::not_tested);
  EXPECT_FALSE(one.pass);
  EXPECT_TRUE(one.tensors.empty());
  EXPECT_EQ(one.not_tested, (std::vector<std::string>{"q_rot.f32", "q_rot.bf16"}));
  EXPECT_EQ(one.declined, "no multimodal RoPE here");
  EXPECT_NE(one.reason.find("the kernel declined every output asked for (q_rot.f32, q_rot.bf16): no multimodal RoPE here"),
            std::string::npos) << one.reason;
  EXPECT_TRUE(one.satisfied_classes().empty());
  EXPECT_EQ(one.to_json()["declined"], "no multimodal RoPE here");
  std::vector<nlohmann::json> parts;
  for (int i = 1; i <= 2; ++i) parts.push_back(round_trip(declined_check_part(g, o, Shard{i, 2}, "no multimodal RoPE here"), {}));
  EXPECT_EQ(finalize(merge_check_parts(parts, {"1.json", "2.json"}).whole).to_json().dump(), one.to_json().dump());
  o.only = {"nope"};
  EXPECT_THROW(declined_check_part(g, o, Shard{}, "x"), InputError);  // the options are still checked
}

std::string merge_error(const std::vector<nlohmann::json>& parts) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    std::string name = "p";  // built piecewise: GCC 12 warns (-Wrestrict, falsely) on "p" + std::string
    name += std::to_string(i + 1);
    name += ".json";
    names.push_back(name);
  }
  try {
    merge_check_parts(parts, names);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(merged)";
}

TEST(CheckShard, RefusesPartsOfDifferentRunsDuplicatesAndGaps) {
  const GoldenSet g = load_golden_set(set_dir());
  const std::vector<Tensor> cand = hf_candidate(g);
  auto part = [&](int i, int n, const CheckOptions& o = options(1), nlohmann::json run = {{"x", 1}}) {
    return round_trip(check_candidate_part(g, cand, o, Shard{i, n}), run);
  };
  const nlohmann::json p1 = part(1, 3), p2 = part(2, 3), p3 = part(3, 3);
  EXPECT_NE(merge_error({p1, p2, p2, p3}).find("shard 2/3 given twice"), std::string::npos) << merge_error({p1, p2, p2, p3});
  EXPECT_NE(merge_error({p1, p3}).find("shard 2/3 is missing"), std::string::npos) << merge_error({p1, p3});
  EXPECT_NE(merge_error({p1, p2, part(3, 4)}).find("differ in shard_count"), std::string::npos);
  CheckOptions strict = options(1);
  strict.criterion = Criterion::of_class(accuracy::AccuracyClass::exact);
  EXPECT_NE(merge_error({p1, part(2, 3, strict), p3}).find("differ in header.criterion"), std::string::npos);
  EXPECT_NE(merge_error({p1, part(2, 3, options(1), {{"x", 2}}), p3}).find("differ in run.x"), std::string::npos);
  nlohmann::json other_version = p2;
  other_version["ropecheck_version"] = "0.0.0";
  EXPECT_NE(merge_error({p1, other_version, p3}).find("differ in ropecheck_version"), std::string::npos);
  nlohmann::json broken = p2;
  broken["tensors"][0]["sum_ulps"] = "1.5";
  EXPECT_NE(merge_error({p1, broken, p3}).find("p2.json: not a usable check part ('sum_ulps' is not an exact sum)"),
            std::string::npos)
      << merge_error({p1, broken, p3});
  nlohmann::json golden_shard = p2;
  golden_shard["format"] = "ropecheck-golden-shard";
  EXPECT_NE(merge_error({p1, golden_shard, p3}).find("not a usable check part"), std::string::npos);
  EXPECT_THROW(check_candidate_part(g, cand, options(1), Shard{1, 1000}), SpecError);  // fewer tokens than shards
}

}  // namespace
}  // namespace ropecheck::golden
