// The CUDA kernels' code without a GPU (label unit): the matrix of cuda_matrix.hpp run through the
// host emulation (kernels/cuda/emulation.hpp), which executes the kernels' own phases, argument
// handling, fast / generic path choice and chunking on the host. It proves, on any machine, that
// the CUDA code computes every recipe as the CPU kernels do: bit for bit for accurate, and within
// the recipe's class elsewhere (the emulation's sinf / cosf are the host libm's, not CUDA's; the
// real device functions are checked by test_cuda_kernels on a GPU).
#include <gtest/gtest.h>

#include <string>

#include "cuda_matrix.hpp"
#include "emulation.hpp"

namespace {

using namespace ropecheck;
using namespace ropecheck::kernels;
using namespace ropecheck::cuda_matrix;

class EmulatedCandidate : public Candidate {
 public:
  void apply(const RopePlan& plan, const PositionsView& pos, const TensorView& q_in, const TensorView& q_out,
             const TensorView& k_in, const TensorView& k_out) override {
    cuda_detail::emulate_rope_apply(plan, pos, q_in, q_out, k_in, k_out);
  }
  void cos_sin_table(const RopePlan& plan, const PositionsView& pos, void* cos_out, void* sin_out,
                     DType dtype) override {
    cuda_detail::emulate_rope_cos_sin_table(plan, pos, cos_out, sin_out, dtype);
  }
  void sinusoidal(const SinusoidalSpec& spec, Recipe recipe, const PositionsView& pos, void* out,
                  DType dtype) override {
    cuda_detail::emulate_sinusoidal_table(spec, recipe, pos, out, dtype);
  }
};

class CudaEmulationApply : public ::testing::TestWithParam<std::string> {
 protected:
  static void TearDownTestSuite() {
    if (!stats_table().empty()) print_stats("CUDA kernels' code (host emulation) against the CPU and the exact reference");
  }
};

TEST_P(CudaEmulationApply, EveryRecipeDtypeLayoutMatchesCpuAndClass) {
  EmulatedCandidate emu;
  run_apply_matrix(emu, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Presets, CudaEmulationApply, ::testing::ValuesIn(apply_presets()), test_name);

TEST(CudaEmulationTables, CosSinTableEveryRecipeDtype) {
  EmulatedCandidate emu;
  run_cos_sin_table_matrix(emu);
  print_stats("CUDA cos / sin table code (host emulation) against the CPU and the exact reference");
}

TEST(CudaEmulationTables, SinusoidalEveryRecipeDtype) {
  EmulatedCandidate emu;
  run_sinusoidal_matrix(emu);
  print_stats("CUDA sinusoidal table code (host emulation) against the CPU and the exact reference");
}

// Argument errors come from the same checks as the device entry points (device-memory checks aside).
TEST(CudaEmulationArguments, BadInputIsRejectedWithANamedError) {
  const RopeSpec r = load_preset("llama-3.1-8b").rope;
  const RopePlan plan = make_rope_plan(r, Recipe::accurate);
  const std::int64_t T = 4, H = 2, D = r.head_dim;
  std::vector<float> q(static_cast<std::size_t>(T * H * D));
  std::vector<std::int64_t> pos(static_cast<std::size_t>(T), 0);
  const PositionsView p = PositionsView::of(std::span<const std::int64_t>(pos));
  const TensorView v = TensorView::contiguous(q.data(), DType::f32, T, H, D);
  auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no exception";
  };
  TensorView wrong = v;
  wrong.head_dim = D - 2;
  EXPECT_NE(message([&] { cuda_detail::emulate_rope_apply(plan, p, wrong, wrong); }).find("head_dim"), std::string::npos);
  PositionsView short_p = p;
  short_p.tokens = T - 1;
  EXPECT_NE(message([&] { cuda_detail::emulate_rope_apply(plan, short_p, v, v); }).find("positions.tokens"),
            std::string::npos);
  TensorView shifted = v, in = v;
  shifted.data = q.data() + 1;
  shifted.tokens = in.tokens = T - 1;
  EXPECT_NE(message([&] { cuda_detail::emulate_rope_apply(plan, p, in, shifted); }).find("partially overlaps"),
            std::string::npos);
  RopePlan broken = plan;
  broken.inv_freq_f64.clear();
  EXPECT_NE(message([&] { cuda_detail::emulate_rope_apply(broken, p, v, v); }).find("inv_freq_f64"), std::string::npos);
  PositionsView three = p;
  three.streams = 2;
  EXPECT_NE(message([&] { cuda_detail::emulate_rope_apply(plan, three, v, v); }).find("positions.streams"),
            std::string::npos);
}

}  // namespace
