// props' one generic target over any kernel under test (props/kut_target.hpp): the bridge between the
// property suite and kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kut_problem.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/props/kut_target.hpp"

namespace ropecheck {
namespace {

namespace k = ropecheck::kernels;
using test::Problem;
using test::rope_apply;

// A kernel whose every call fails (as a crashed plugin's do: outputs NaN) or is unsupported.
class FailingKernel final : public kut::KernelUnderTest {
 public:
  explicit FailingKernel(kut::CallResult::Status s) : status_(s) {
    info_.name = "failing";
    info_.capabilities.rope_apply = true;
    info_.capabilities.output_dtypes = {DType::f32};
  }
  const kut::Info& info() const override { return info_; }
  kut::CallResult rope_apply(const kut::RopeApplyCall& c) override {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (std::size_t i = 0; i < c.out.bytes.size(); i += 4) std::memcpy(c.out.bytes.data() + i, &nan, 4);
    return {status_, "killed by SIGSEGV"};
  }
  kut::CallResult rope_cos_sin(const kut::RopeTableCall&) override { return {kut::CallResult::Status::unsupported, ""}; }
  kut::CallResult sinusoidal(const kut::SinusoidalCall&) override { return {kut::CallResult::Status::unsupported, ""}; }
  void forgive() override { ++forgiven; }
  int forgiven = 0;

 private:
  kut::CallResult::Status status_;
  kut::Info info_;
};

// props' one generic target: outputs decoded, failures counted and reported once, unsupported skips,
// undeclared dtypes and entry points never called, with_output only where asked for.
TEST(KutTarget, PropsTargetOverAnyKernel) {
  const Problem p;
  std::vector<double> x(p.x.begin(), p.x.end()), out(x.size());
  props::TargetInfo info;
  info.name = "t";
  auto failing = std::make_shared<FailingKernel>(kut::CallResult::Status::failed);
  std::unique_ptr<props::Target> t = props::make_kut_target(failing, info);
  EXPECT_FALSE(t->info().negative_positions);  // from the kernel's capabilities
  EXPECT_TRUE(t->rope_apply(p.spec, p.pos, p.heads, x, out));  // a failed call still ran: NaN outputs fail the property
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(t->rope_apply(p.spec, p.pos, p.heads, x, out));
  props::Target::Failures f = t->take_failures();
  EXPECT_EQ(f.failed, 2);
  EXPECT_EQ(f.calls, 2);
  EXPECT_EQ(f.first, "killed by SIGSEGV");
  EXPECT_EQ(failing->forgiven, 1);
  EXPECT_EQ(t->take_failures().failed, 0);  // reported once
  EXPECT_EQ(t->with_output(DType::bf16), nullptr);
  std::vector<double> pe(64);
  EXPECT_FALSE(t->sinusoidal(load_preset("transformer-base"), std::vector<std::int64_t>{0}, pe));  // no entry point

  auto unsupported = std::make_shared<FailingKernel>(kut::CallResult::Status::unsupported);
  t = props::make_kut_target(unsupported, info);
  EXPECT_FALSE(t->rope_apply(p.spec, p.pos, p.heads, x, out));
  EXPECT_EQ(t->take_failures().failed, 0);

  info.dtype = DType::f32;
  t = props::make_kut_target(kut::make_cpu_kernel(k::Recipe::hf), info, true);
  EXPECT_TRUE(t->info().negative_positions);
  std::unique_ptr<props::Target> bf = t->with_output(DType::bf16);
  ASSERT_NE(bf, nullptr);
  EXPECT_EQ(bf->info().dtype, DType::bf16);
  ASSERT_TRUE(bf->rope_apply(p.spec, p.pos, p.heads, x, out));
  kut::CallResult res;
  const std::vector<std::byte> want = rope_apply(*kut::make_cpu_kernel(k::Recipe::hf), p, DType::bf16, &res);
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], load_element(want.data() + 2 * i, DType::bf16)) << i;
}
}  // namespace
}  // namespace ropecheck
