// The streaming check (run_check.hpp, candidate_source.hpp, kernel_blocks.hpp): a report does not
// depend on the thread count or the block size, nor on where the candidate comes from (a file in pieces,
// arrays in place, a kernel run per block or on the whole set); --layout bhsd gathered per block equals
// the tensors rewritten whole; a shard runs the kernel on its own tokens, and later blocks call it only
// for what is checked; a kernel call failing on a later block is listed once and reads as NaN from there;
// a changed golden file is a hash mismatch, never a verdict; the parts of a run hash each file once; a
// budget too small for one token is refused, one too small for the diagnosis skips it and says so.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "ropecheck/checker/run_check.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/io/safetensors.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/reference/presets.hpp"
#include "temp_root.hpp"
#include "test_scale.hpp"

namespace ropecheck::checker {
namespace {

namespace fs = std::filesystem;
using golden::GoldenSet;
using io::Tensor;

const fs::path& root() {
  static const testing_support::TempRoot r("ropecheck_check_stream_");
  return r.path();
}

fs::path make_set(const std::string& name, const std::string& preset, const std::string& positions,
                  io::FileFormat format = io::FileFormat::safetensors, std::vector<DType> dtypes = {DType::f32, DType::bf16}) {
  const fs::path out = root() / name;
  if (fs::exists(out / "manifest.json")) return out;
  golden::GoldenOptions o;
  o.spec = load_preset(preset);
  o.positions = parse_positions(positions);
  o.dtypes = std::move(dtypes);
  o.heads = o.spec.family == Family::rope ? 2 : 1;
  o.seed = 11;
  o.format = format;
  o.out = out;
  o.threads = 2;
  golden::write_golden_set(o);
  return out;
}

void write_bytes(const fs::path& p, const std::vector<std::uint8_t>& b) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

std::shared_ptr<kut::KernelUnderTest> cpu(kernels::Recipe r) { return kut::make_cpu_kernel(r); }

CheckRequest request(int threads, std::int64_t block, accuracy::AccuracyClass c = accuracy::kDefaultAccuracyClass) {
  CheckRequest r;
  r.options.criterion = Criterion::of_class(c);
  r.options.threads = threads;
  r.options.block_tokens = block;
  r.options.worst_count = 6;
  return r;
}

std::string outcome_text(const CheckOutcome& o) { return o.to_json().dump() + "\n" + o.summary(); }

// A kernel that passes calls to the CPU kernel, counting the tokens it is asked for and failing where told.
class Counting final : public kut::KernelUnderTest {
 public:
  explicit Counting(kernels::Recipe r) : inner_(kut::make_cpu_kernel(r)) {}
  const kut::Info& info() const override { return inner_->info(); }
  kut::CallResult rope_apply(const kut::RopeApplyCall& c) override {
    ++calls;
    apply_tokens += static_cast<std::int64_t>(c.problem.positions.size());
    if (fail_from >= 0 && c.problem.positions.front().t >= fail_from && c.input == "q")
      return {kut::CallResult::Status::failed, "told to fail"};
    return inner_->rope_apply(c);
  }
  kut::CallResult rope_cos_sin(const kut::RopeTableCall& c) override {
    ++calls;
    table_tokens += static_cast<std::int64_t>(c.problem.positions.size());
    return inner_->rope_cos_sin(c);
  }
  kut::CallResult sinusoidal(const kut::SinusoidalCall& c) override { return inner_->sinusoidal(c); }
  int calls = 0;
  std::int64_t apply_tokens = 0, table_tokens = 0, fail_from = -1;

 private:
  std::unique_ptr<kut::KernelUnderTest> inner_;
};

TEST(CheckStream, ReportsDoNotDependOnThreadsOrBlockSize) {
  const fs::path llama = make_set("llama", "llama-3.1-8b", "0:20,65000:65010,131060:131071");
  const fs::path npz = make_set("npz", "llama-3.1-8b", "0:23", io::FileFormat::npz);
  const fs::path sinus = make_set("sinus", "transformer-base", "0:29");
  const fs::path mrope = make_set("mrope", "qwen2-vl-7b", "0:17");
  struct Case {
    fs::path set;
    std::function<Candidate(const GoldenSet&)> candidate;
    accuracy::AccuracyClass cls;
  };
  const std::vector<Case> cases = {
      {llama, [](const GoldenSet&) { return kernel_candidate(cpu(kernels::Recipe::hf), "hf", {{"kind", "t"}}); },
       accuracy::AccuracyClass::f32_reduced},
      {llama, [&](const GoldenSet& g) { return open_candidate_file(llama / "outputs_bf16.safetensors", g); },
       accuracy::AccuracyClass::exact},
      {npz, [&](const GoldenSet& g) { return open_candidate_file(npz / "outputs_f32.npz", g); }, accuracy::AccuracyClass::exact},
      {sinus, [&](const GoldenSet& g) { return open_candidate_file(sinus / "outputs_f32.safetensors", g); },
       accuracy::kDefaultAccuracyClass},
      {mrope, [](const GoldenSet&) { return kernel_candidate(cpu(kernels::Recipe::hf), "hf", {{"kind", "t"}}); },
       accuracy::AccuracyClass::fp64_angle}};
  for (const Case& c : cases) {
    const GoldenSet g = golden::load_golden_set(c.set, {.hash_files = false});
    CheckRequest one = request(1, 0, c.cls);
    one.diagnose = CheckRequest::Diagnose::always;
    const std::string want = outcome_text(run_check(g, c.candidate(g), one));
    // Tiny scale (the sanitized run): blocks of 3 and whole, still split across both threads.
    const std::vector<std::int64_t> blocks = ropecheck::test::scaled<std::vector<std::int64_t>>({1, 3, 7, 1000}, {1, 3, 7, 1000}, {3, 1000});
    for (int threads : {1, 2})
      for (std::int64_t block : blocks) {
        CheckRequest r = request(threads, block, c.cls);
        r.diagnose = CheckRequest::Diagnose::always;
        EXPECT_EQ(outcome_text(run_check(g, c.candidate(g), r)), want) << c.set << " threads " << threads << " block " << block;
      }
  }
}

// The same tensors from a file read in pieces, from memory, from a kernel run per block and from the
// kernel run on the whole set: one report.
TEST(CheckStream, EverySourceGivesTheSameReport) {
  const fs::path dir = make_set("llama", "llama-3.1-8b", "0:20,65000:65010,131060:131071");
  const GoldenSet g = golden::load_golden_set(dir);
  const CheckRequest r = request(2, 4, accuracy::AccuracyClass::f32_reduced);
  auto whole_kernel = kut::make_cpu_kernel(kernels::Recipe::hf);
  const Candidate in_memory = run_kernel_candidate(*whole_kernel, "hf", {{"kind", "t"}}, g);
  const std::string want = outcome_text(run_check(g, in_memory, r));
  EXPECT_EQ(outcome_text(run_check(g, kernel_candidate(cpu(kernels::Recipe::hf), "hf", {{"kind", "t"}}), r)), want);
  write_bytes(root() / "hf.safetensors", io::serialize_safetensors(in_memory.tensors, {}));
  Candidate file = open_candidate_file(root() / "hf.safetensors", g);
  Candidate mem;
  mem.blocks = memory_candidate(in_memory.tensors);
  for (Candidate* c : {&file, &mem}) {
    c->source = in_memory.source;
    c->header = in_memory.header;
    EXPECT_EQ(outcome_text(run_check(g, std::move(*c), r)), want);
  }
}

// [tokens, heads, head_dim] tensors as [1, heads, tokens, head_dim].
Tensor to_bhsd(const Tensor& t) {
  const std::int64_t T = t.shape[0], H = t.shape[1], D = t.shape[2];
  const std::size_t row = static_cast<std::size_t>(D) * io::dtype_size(t.dtype);
  Tensor o{t.name, t.dtype, {1, H, T, D}, std::vector<std::uint8_t>(t.data.size())};
  for (std::int64_t h = 0; h < H; ++h)
    for (std::int64_t tok = 0; tok < T; ++tok)
      std::memcpy(o.data.data() + static_cast<std::size_t>(h * T + tok) * row, t.data.data() + static_cast<std::size_t>(tok * H + h) * row, row);
  return o;
}

TEST(CheckStream, LayoutBhsdGatheredPerBlockEqualsTheRewrittenTensors) {
  const fs::path dir = make_set("llama", "llama-3.1-8b", "0:20,65000:65010,131060:131071");
  const GoldenSet g = golden::load_golden_set(dir);
  auto k = kut::make_cpu_kernel(kernels::Recipe::hf);
  std::vector<Tensor> thd = run_kernel(*k, g).tensors, bhsd;
  for (const Tensor& t : thd) bhsd.push_back(t.shape.size() == 3 ? to_bhsd(t) : t);
  Candidate a;
  a.tensors = thd;
  const std::string want = outcome_text(run_check(g, a, request(1, 0)));
  for (std::int64_t block : {1, 5}) {
    Candidate b;
    b.blocks = memory_candidate(bhsd);
    CheckRequest r = request(2, block);
    r.layout = CandidateLayout::bhsd;
    EXPECT_EQ(outcome_text(run_check(g, std::move(b), r)), want) << block;
  }
  Candidate batch2;
  Tensor bad = bhsd[0];
  bad.shape[0] = 2;
  bad.shape[2] /= 2;
  batch2.tensors = {bad};
  CheckRequest r = request(1, 0);
  r.layout = CandidateLayout::bhsd;
  EXPECT_THROW(run_check(g, std::move(batch2), r), InputError);
}

// A shard runs the kernel on its own tokens (and its first block's); after the first block only the
// outputs checked are computed.
TEST(CheckStream, AShardRunsTheKernelOnItsTokensOnly) {
  const fs::path dir = make_set("llama", "llama-3.1-8b", "0:20,65000:65010,131060:131071");
  const GoldenSet g = golden::load_golden_set(dir);
  auto k = std::make_shared<Counting>(kernels::Recipe::hf);
  Candidate c = kernel_candidate(k, "hf", {{"kind", "t"}});
  CheckRequest r = request(1, 4);
  r.options.only = {"q_rot.f32"};
  const CheckPartOutcome part = run_check_part(g, std::move(c), r, Shard{2, 3}, {});
  const auto [t0, t1] = shard_range(g.tokens(), Shard{2, 3}, "tokens");
  // The first block: every call (q and k per dtype: f64, f32, bf16); then q_rot.f32's only.
  EXPECT_EQ(k->apply_tokens, 2 * 3 * 4 + (t1 - t0 - 4));
  EXPECT_EQ(k->table_tokens, 3 * 4);
  EXPECT_EQ(part.part["tokens"]["first"], t0);
}

TEST(CheckStream, AKernelCallFailingOnALaterBlockIsListedOnceAndReadsNaN) {
  const fs::path dir = make_set("llama", "llama-3.1-8b", "0:20,65000:65010,131060:131071");
  const GoldenSet g = golden::load_golden_set(dir);
  auto k = std::make_shared<Counting>(kernels::Recipe::hf);
  k->fail_from = 65000;  // the blocks of 8 tokens from token 24 on (position 65004)
  CheckRequest r = request(1, 8, accuracy::AccuracyClass::bf16_table);
  r.diagnose = CheckRequest::Diagnose::never;
  const CheckOutcome o = run_check(g, kernel_candidate(k, "hf", {{"kind", "t"}}), r);
  EXPECT_TRUE(o.kernel_failed);
  EXPECT_EQ(o.verdict, Verdict::fail);
  ASSERT_EQ(o.source["failures"].size(), 3u);  // q_rot of f64, f32, bf16: once each
  for (const TensorReport& t : o.report.tensors) {
    const std::int64_t per_token = t.elements / g.tokens();
    EXPECT_EQ(t.nan_count, t.base == "q_rot" ? (g.tokens() - 24) * per_token : 0) << t.golden_name;
  }
  // Six blocks of 9 calls (q, k, table per dtype), but q is not called again after it failed in the fourth.
  EXPECT_EQ(k->calls, 4 * 9 + 2 * 6);
}

// A call failing on the first block (run_kernel: the whole set is one) reads as NaN there too, whatever
// the kernel left in its output (the CPU kernel is not called: its zeros would pass as values).
TEST(CheckStream, AKernelCallFailingOnTheFirstBlockReadsNaN) {
  const fs::path dir = make_set("llama", "llama-3.1-8b", "0:20,65000:65010,131060:131071");
  const GoldenSet g = golden::load_golden_set(dir);
  Counting k(kernels::Recipe::hf);
  k.fail_from = 0;
  const KernelRun run = run_kernel(k, g);
  ASSERT_EQ(run.failures.size(), 3u);  // q_rot of f64, f32, bf16
  for (const io::Tensor& t : run.tensors) {
    std::int64_t nan = 0;
    for (std::int64_t i = 0; i < t.numel(); ++i) nan += std::isnan(t.value(i));
    EXPECT_EQ(nan, t.name.starts_with("q_rot") ? t.numel() : 0) << t.name;
  }
}

TEST(CheckStream, AChangedGoldenFileIsAHashMismatchNotAVerdict) {
  const fs::path dir = make_set("llama", "llama-3.1-8b", "0:20,65000:65010,131060:131071");
  const fs::path bad = root() / "llama_bad";
  if (!fs::exists(bad)) fs::copy(dir, bad);
  {
    std::fstream f(bad / "outputs_bf16.safetensors", std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(fs::file_size(bad / "outputs_bf16.safetensors") - 3));
    f.put('\x55');
  }
  const GoldenSet g = golden::load_golden_set(bad, {.hash_files = false});
  try {
    run_check(g, kernel_candidate(cpu(kernels::Recipe::hf), "hf", {{"kind", "t"}}), request(2, 5));
    FAIL() << "a verdict on a changed file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("manifest hash mismatch for"), std::string::npos) << e.what();
  }
  // Not read: not hashed, no error.
  CheckRequest only = request(2, 5);
  only.options.only = {"q_rot.f32"};
  EXPECT_NO_THROW(run_check(g, kernel_candidate(cpu(kernels::Recipe::hf), "hf", {{"kind", "t"}}), only));
}

TEST(CheckStream, ThePartsOfARunHashEachFileOnce) {
  const fs::path dir = make_set("llama", "llama-3.1-8b", "0:20,65000:65010,131060:131071");
  const GoldenSet g = golden::load_golden_set(dir);
  for (int n : {1, 2, 3, 7}) {
    std::multiset<std::string> hashed;
    std::vector<std::string> read;
    for (int i = 1; i <= n; ++i) {
      const CheckPartOutcome p =
          run_check_part(g, kernel_candidate(cpu(kernels::Recipe::hf), "hf", {{"kind", "t"}}), request(1, 0), Shard{i, n}, {});
      read = p.part["golden_files"]["read"].get<std::vector<std::string>>();
      for (const std::string& f : p.part["golden_files"]["hashed"].get<std::vector<std::string>>()) hashed.insert(f);
    }
    EXPECT_EQ(read.size(), g.files().size());
    EXPECT_EQ(hashed, std::multiset<std::string>(read.begin(), read.end())) << n;
  }
}

TEST(CheckStream, TheMemoryBudget) {
  const fs::path dir = make_set("llama", "llama-3.1-8b", "0:20,65000:65010,131060:131071");
  const GoldenSet g = golden::load_golden_set(dir);
  CheckRequest tiny = request(1, 0);
  tiny.options.max_memory = 1 << 20;
  EXPECT_THROW(run_check(g, kernel_candidate(cpu(kernels::Recipe::hf), "hf", {{"kind", "t"}}), tiny), SpecError);
  // Room for the check (its reserve: 64 MiB and a hasher's 8 MiB; blocks of a few tokens) but not for the
  // whole set (about 20 MB) and candidate.
  const GoldenSet big = golden::load_golden_set(make_set("llama1000", "llama-3.1-8b", "0:1000"));
  CheckRequest some = request(1, 0);
  some.options.max_memory = std::uint64_t{73} << 20;
  some.diagnose = CheckRequest::Diagnose::always;
  const CheckOutcome o = run_check(big, kernel_candidate(cpu(kernels::Recipe::hf), "hf", {{"kind", "t"}}), some);
  ASSERT_TRUE(o.diagnosis.has_value());
  EXPECT_FALSE(o.diagnosis->applicable);
  EXPECT_NE(o.diagnosis->not_applicable_reason.find("--max-memory"), std::string::npos);
}

// Rotated outputs go a head row at a time through vector code (check_rows.cpp); with
// ROPECHECK_CHECK_BY_ELEMENT set, element by element. Candidates with every kind of value (NaN, both
// infinities, zeros of both signs, subnormals, huge, off by an ulp), multimodal positions (several position
// bins a token), a Q/K norm set and every criterion kind: the same report.
TEST(CheckStream, RowsGiveTheElementByElementReport) {
  const fs::path llama = make_set("llama", "llama-3.1-8b", "0:20,65000:65010,131060:131071");
  const fs::path mrope = make_set("mrope", "qwen2-vl-7b", "0:17");
  // Past 2^24 the looser classes' bounds saturate: the rows count each class's saturation as the
  // element pass does (asserted to happen below, so the comparison covers it).
  const fs::path far = make_set("far", "llama-3.1-8b", "0:4,16777200:16777215");
  // A Q/K RMSNorm set: both paths take M of the normalized head and add the norm's term.
  const fs::path norm = make_set("norm", "qwen3-8b", "0:6,4090:4096");
  for (const fs::path& dir : {llama, mrope, far, norm}) {
    const GoldenSet g = golden::load_golden_set(dir);
    auto k = kut::make_cpu_kernel(kernels::Recipe::hf);
    std::vector<Tensor> cand = run_kernel(*k, g).tensors;
    ASSERT_FALSE(cand.empty()) << dir;
    std::mt19937_64 rng(3);
    const std::vector<double> odd = {std::nan(""), INFINITY, -INFINITY, 0.0, -0.0, 1e-310, 1e300, -5e-324, 3.0};
    for (Tensor& t : cand) {  // one element in 5 replaced
      for (std::int64_t i = 0; i < t.numel(); ++i) {
        if (rng() % 5 != 0) continue;
        const double v = odd[rng() % odd.size()];
        const std::size_t es = io::dtype_size(t.dtype);
        if (t.dtype == io::TensorDType::f64) std::memcpy(t.data.data() + i * es, &v, 8);
        if (t.dtype == io::TensorDType::f32) {
          const float f = static_cast<float>(v);
          std::memcpy(t.data.data() + i * es, &f, 4);
        }
        if (t.dtype == io::TensorDType::bf16 && std::isnan(v)) t.data[i * es + 1] = 0x7F, t.data[i * es] = 0xC1;
        if (t.dtype == io::TensorDType::bf16 && std::isinf(v)) t.data[i * es + 1] = v > 0 ? 0x7F : 0xFF, t.data[i * es] = 0x80;
      }
    }
    std::vector<Criterion> criteria = {Criterion::of_class(accuracy::AccuracyClass::fp32_angle),
                                       Criterion::of_class(accuracy::AccuracyClass::exact), Criterion::of_max_ulp(3),
                                       Criterion::of_tolerance(1e-6, 1e-5), Criterion::of_tolerance(0, 0)};
    for (const Criterion& c : criteria) {
      CheckRequest r = request(2, 7);
      r.options.criterion = c;
      r.options.worst_count = 20;
      r.diagnose = CheckRequest::Diagnose::never;
      Candidate a;
      a.tensors = cand;
      const std::string rows = outcome_text(run_check(g, a, r));
      ::setenv("ROPECHECK_CHECK_BY_ELEMENT", "1", 1);
      const std::string elements = outcome_text(run_check(g, a, r));
      ::unsetenv("ROPECHECK_CHECK_BY_ELEMENT");
      EXPECT_EQ(rows, elements) << dir << " " << c.to_string();
    }
    if (dir == far) {  // some class is saturated somewhere, and counted as such
      Candidate a;
      a.tensors = cand;
      CheckRequest r = request(2, 7);
      r.diagnose = CheckRequest::Diagnose::never;
      std::int64_t saturated = 0;
      for (const TensorReport& t : run_check(g, a, r).report.tensors)
        for (const ClassResult& cr : t.classes) saturated += cr.saturated;
      EXPECT_GT(saturated, 0);
    }
  }
}

}  // namespace
}  // namespace ropecheck::checker
