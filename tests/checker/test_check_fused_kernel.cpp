// A kernel's fused entry points judged by check (kernel_abi.h revision 3; checker/CHECK_REPORT.md,
// "Quantized stores" and "KV-cache writes"): builtin:accurate's stores (kernel_stores.cpp) fail nothing
// and a code it gets wrong fails; a kernel without the entry leaves the stores not tested; its append
// (kernel_kv_cache) passes the cache check, an extra write fails it, a failed call is listed and fails,
// and a kernel without the entry gives no candidate, saying why.
#include <gtest/gtest.h>

#include "ropecheck/checker/kv_cache.hpp"
#include "ropecheck/checker/run_check.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/reference/presets.hpp"
#include "temp_root.hpp"

namespace ropecheck::checker {
namespace {

const golden::GoldenSet& make_set(const std::string& name, bool kv) {
  static const testing_support::TempRoot root("ropecheck_check_fused_kernel_");
  static std::map<std::string, golden::GoldenSet> sets;
  if (auto it = sets.find(name); it != sets.end()) return it->second;
  golden::GoldenOptions o;
  o.spec = load_preset("llama-3.1-8b");
  o.dtypes = {DType::f32};
  o.heads = 2;
  o.seed = 5;
  o.out = root.path() / name;
  o.threads = 1;
  if (kv) {
    o.kv_cache = kv::parse_cache_spec({{"sequences", {{{"cached", 0}, {"appended", 5}}, {{"cached", 6}, {"appended", 1}}}},
                                       {"cache", "paged"}, {"layout", "NHD"}, {"page_size", 4}},
                                      3);
    for (std::int64_t p : kv::positions(*o.kv_cache)) o.positions.positions.push_back(Position::uniform(p));
    o.positions.argument = "kv-cache";
  } else {
    o.positions = parse_positions("0:8");
    o.stores = "e4m3fn,q8_0";
  }
  golden::write_golden_set(o);
  return sets.emplace(name, golden::load_golden_set(o.out)).first->second;
}

// builtin:accurate with one thing changed: the fused entries absent, answering failed, or writing one
// byte too many (a code flipped in a store, a byte of an unused cache slot).
class Altered : public kut::KernelUnderTest {
 public:
  enum class Mode { none, no_fused, failed, extra_byte } mode;
  explicit Altered(Mode m) : mode(m), inner_(kut::make_cpu_kernel(kernels::Recipe::accurate, {.threads = 1})) {
    info_ = inner_->info();
    if (mode == Mode::no_fused) info_.capabilities.rope_quantize = info_.capabilities.rope_append_kv = false;
  }
  const kut::Info& info() const override { return info_; }
  kut::CallResult rope_apply(const kut::RopeApplyCall& c) override { return inner_->rope_apply(c); }
  kut::CallResult rope_cos_sin(const kut::RopeTableCall& c) override { return inner_->rope_cos_sin(c); }
  kut::CallResult sinusoidal(const kut::SinusoidalCall& c) override { return inner_->sinusoidal(c); }
  kut::CallResult rope_quantize(const kut::RopeQuantizeCall& c) override {
    if (mode == Mode::failed) return {kut::CallResult::Status::failed, "crashed"};
    const kut::CallResult r = inner_->rope_quantize(c);
    if (mode == Mode::extra_byte) c.codes[100] ^= std::byte{0x08};  // FP8: another exponent; q8_0: a far code
    return r;
  }
  kut::CallResult rope_append_kv(const kut::KvAppendCall& c) override {
    if (mode == Mode::failed) return {kut::CallResult::Status::failed, "crashed"};
    const kut::CallResult r = inner_->rope_append_kv(c);
    if (mode == Mode::extra_byte) c.k_cache.bytes.back() = std::byte{0};  // the pool's last slot: nobody's
    return r;
  }

 private:
  std::unique_ptr<kut::KernelUnderTest> inner_;
  kut::Info info_;
};

CheckOutcome check_with(Altered::Mode m) {
  CheckRequest request;
  request.diagnose = CheckRequest::Diagnose::never;
  return run_check(make_set("stores", false), kernel_candidate(std::make_shared<Altered>(m), "altered", {}), request);
}

TEST(FusedKernelCheck, StoresOfTheKernelAreJudged) {
  const CheckOutcome good = check_with(Altered::Mode::none);
  ASSERT_TRUE(good.report.stores.has_value());
  ASSERT_EQ(good.report.stores->stores.size(), 4u);
  for (const StoreCheck& s : good.report.stores->stores) EXPECT_EQ(s.failed + s.groups_failed, 0) << s.golden_name;
  const CheckOutcome bad = check_with(Altered::Mode::extra_byte);
  ASSERT_TRUE(bad.report.stores.has_value());
  EXPECT_EQ(bad.report.stores->verdict, Verdict::fail);
  EXPECT_EQ(bad.verdict, Verdict::fail);
  const CheckOutcome none = check_with(Altered::Mode::no_fused);
  EXPECT_FALSE(none.report.stores.has_value());
  EXPECT_EQ(none.verdict, Verdict::not_tested);
  EXPECT_EQ(std::count(none.report.not_tested.begin(), none.report.not_tested.end(), "q_rot.e4m3fn"), 1);
  const CheckOutcome failed = check_with(Altered::Mode::failed);
  EXPECT_EQ(failed.verdict, Verdict::fail);
}

TEST(FusedKernelCheck, AppendOfTheKernelIsJudgedAsACache) {
  const golden::GoldenSet& g = make_set("kv", true);
  CheckRequest request;
  request.diagnose = CheckRequest::Diagnose::never;
  Altered good(Altered::Mode::none), extra(Altered::Mode::extra_byte), none(Altered::Mode::no_fused),
      failed(Altered::Mode::failed);
  const KernelKvCache a = kernel_kv_cache(good, g);
  ASSERT_TRUE(a.candidate.has_value()) << a.not_tested;
  EXPECT_EQ(check_kv_cache(g, *a.candidate, request).verdict, Verdict::pass);
  const KernelKvCache b = kernel_kv_cache(extra, g);
  ASSERT_TRUE(b.candidate.has_value());
  const KvCacheReport rb = check_kv_cache(g, *b.candidate, request);
  EXPECT_EQ(rb.verdict, Verdict::fail);
  EXPECT_EQ(rb.out_of_slot_writes, 1);
  const KernelKvCache c = kernel_kv_cache(none, g);
  EXPECT_FALSE(c.candidate.has_value());
  EXPECT_NE(c.not_tested.find("ropecheck_rope_append_kv"), std::string::npos) << c.not_tested;
  const KernelKvCache d = kernel_kv_cache(failed, g);
  ASSERT_TRUE(d.candidate.has_value());
  ASSERT_EQ(d.failures.size(), 1u);
  const KvCacheReport rd = check_kv_cache(g, *d.candidate, request);
  EXPECT_EQ(rd.verdict, Verdict::fail);
  EXPECT_EQ(rd.missing_writes, 6);
}

}  // namespace
}  // namespace ropecheck::checker
