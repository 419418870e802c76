// The CUDA kernels on a GPU against the CPU kernels and the exact reference (label gpu): the matrix of
// cuda_matrix.hpp run through cuda_kernels.hpp, plus the device-only checks (host pointers rejected,
// buffers, the runtime). Every test skips (GTEST_SKIP, with the reason) when no CUDA device is
// present; test_cuda_emulation.cpp runs the same matrix on the kernels' code without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_matrix.hpp"
#include "ropecheck/kernels/cuda_kernels.hpp"

namespace {

using namespace ropecheck;
using namespace ropecheck::kernels;
using namespace ropecheck::cuda_matrix;

#define ROPECHECK_REQUIRE_GPU()                                                            \
  do {                                                                                     \
    std::string why;                                                                       \
    if (!cuda_device_available(&why)) GTEST_SKIP() << "no CUDA device (" << why << ")"; \
  } while (0)

// Bytes from a view's first element to one past its last.
std::size_t view_bytes(const TensorView& v) {
  if (v.tokens == 0 || v.heads == 0 || v.head_dim == 0) return 0;
  const std::int64_t last = (v.tokens - 1) * v.stride_token + (v.heads - 1) * v.stride_head + (v.head_dim - 1) * v.stride_dim;
  return static_cast<std::size_t>(last + 1) * dsize(v.dtype);
}
std::size_t positions_bytes(const PositionsView& p) {
  if (p.tokens == 0) return 0;
  const std::int64_t last = (p.tokens - 1) * p.token_stride + (p.streams == 3 ? 2 * p.stream_stride : 0);
  return static_cast<std::size_t>(last + 1) * (p.is_int64 ? 8 : 4);
}

// The host data of a view on the device (uploaded), and back.
struct Mirror {
  CudaBuffer buf;
  std::size_t bytes = 0;
  Mirror(const void* host, std::size_t n) : buf(std::max<std::size_t>(n, 1)), bytes(n) { buf.upload(host, n); }
};

class GpuCandidate : public Candidate {
 public:
  void apply(const RopePlan& plan, const PositionsView& pos, const TensorView& q_in, const TensorView& q_out,
             const TensorView& k_in, const TensorView& k_out) override {
    const CudaRopePlan dplan(plan);
    Mirror dpos(pos.data, positions_bytes(pos));
    PositionsView dp = pos;
    dp.data = dpos.buf.data();
    auto mirror = [](const TensorView& in, const TensorView& out, std::vector<Mirror>& keep, TensorView& din,
                     TensorView& dout) {
      if (in.data == nullptr) return;
      keep.emplace_back(in.data, view_bytes(in));
      din = in;
      din.data = keep.back().buf.data();
      if (out.data == in.data) {
        dout = out;
        dout.data = din.data;
      } else {
        keep.emplace_back(out.data, view_bytes(out));
        dout = out;
        dout.data = keep.back().buf.data();
      }
    };
    std::vector<Mirror> keep;
    keep.reserve(4);
    TensorView dqi, dqo, dki, dko;
    mirror(q_in, q_out, keep, dqi, dqo);
    mirror(k_in, k_out, keep, dki, dko);
    cuda_rope_apply(dplan, dp, dqi, dqo, dki, dko);
    const std::size_t qo = q_out.data == q_in.data ? 0 : 1, ko = keep.size() - 1;
    keep[qo].buf.download(q_out.data, view_bytes(q_out));
    if (k_in.data != nullptr) keep[ko].buf.download(k_out.data, view_bytes(k_out));
  }
  void cos_sin_table(const RopePlan& plan, const PositionsView& pos, void* cos_out, void* sin_out,
                     DType dtype) override {
    const CudaRopePlan dplan(plan);
    Mirror dpos(pos.data, positions_bytes(pos));
    PositionsView dp = pos;
    dp.data = dpos.buf.data();
    const std::size_t bytes = static_cast<std::size_t>(pos.tokens * plan.pairs) * dsize(dtype);
    CudaBuffer c(std::max<std::size_t>(bytes, 1)), s(std::max<std::size_t>(bytes, 1));
    cuda_rope_cos_sin_table(dplan, dp, c.data(), s.data(), dtype);
    c.download(cos_out, bytes);
    s.download(sin_out, bytes);
  }
  void sinusoidal(const SinusoidalSpec& spec, Recipe recipe, const PositionsView& pos, void* out,
                  DType dtype) override {
    Mirror dpos(pos.data, positions_bytes(pos));
    PositionsView dp = pos;
    dp.data = dpos.buf.data();
    const std::size_t bytes = static_cast<std::size_t>(pos.tokens * spec.d_model) * dsize(dtype);
    CudaBuffer o(std::max<std::size_t>(bytes, 1));
    cuda_sinusoidal_table(spec, recipe, dp, o.data(), dtype);
    o.download(out, bytes);
  }
};

class CudaRopeApply : public ::testing::TestWithParam<std::string> {
 protected:
  static void TearDownTestSuite() {
    if (!stats_table().empty()) print_stats("cuda_rope_apply (GPU) against the CPU and the exact reference");
  }
};

TEST_P(CudaRopeApply, EveryRecipeDtypeLayoutMatchesCpuAndClass) {
  ROPECHECK_REQUIRE_GPU();
  GpuCandidate gpu;
  run_apply_matrix(gpu, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Presets, CudaRopeApply, ::testing::ValuesIn(apply_presets()), test_name);

TEST(CudaTables, CosSinTableEveryRecipeDtype) {
  ROPECHECK_REQUIRE_GPU();
  GpuCandidate gpu;
  run_cos_sin_table_matrix(gpu);
  print_stats("cuda_rope_cos_sin_table (GPU) against the CPU and the exact reference");
}

TEST(CudaTables, SinusoidalEveryRecipeDtype) {
  ROPECHECK_REQUIRE_GPU();
  GpuCandidate gpu;
  run_sinusoidal_matrix(gpu);
  print_stats("cuda_sinusoidal_table (GPU) against the CPU and the exact reference");
}

// ---- argument checks (no launch happens; a device is still needed to build a plan) --------------------

TEST(CudaArguments, BadInputIsRejectedWithANamedError) {
  ROPECHECK_REQUIRE_GPU();
  const RopeSpec r = load_preset("llama-3.1-8b").rope;
  const CudaRopePlan plan(make_rope_plan(r, Recipe::accurate));
  const std::int64_t T = 4, H = 2, D = r.head_dim;
  CudaBuffer q(static_cast<std::size_t>(T * H * D) * 4), pos(static_cast<std::size_t>(T) * 8);
  std::vector<std::int64_t> zeros(static_cast<std::size_t>(T), 0);
  pos.upload(zeros.data(), zeros.size() * 8);
  const PositionsView p{pos.data(), true, T, 1, 1, 0};
  const TensorView v = TensorView::contiguous(q.data(), DType::f32, T, H, D);
  auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no exception";
  };
  // A host pointer where device memory is needed.
  std::vector<float> host(static_cast<std::size_t>(T * H * D));
  const TensorView hv = TensorView::contiguous(host.data(), DType::f32, T, H, D);
  EXPECT_NE(message([&] { cuda_rope_apply(plan, p, hv, hv); }).find("q_in.data is not device memory"), std::string::npos);
  PositionsView hp = p;
  hp.data = zeros.data();
  EXPECT_NE(message([&] { cuda_rope_apply(plan, hp, v, v); }).find("positions.data is not device memory"), std::string::npos);
  // Shapes.
  TensorView wrong = v;
  wrong.head_dim = D - 2;
  EXPECT_NE(message([&] { cuda_rope_apply(plan, p, wrong, wrong); }).find("head_dim"), std::string::npos);
  PositionsView short_p = p;
  short_p.tokens = T - 1;
  EXPECT_NE(message([&] { cuda_rope_apply(plan, short_p, v, v); }).find("positions.tokens"), std::string::npos);
  // Partial overlap.
  TensorView shifted = v;
  shifted.data = static_cast<float*>(q.data()) + 1;
  shifted.tokens = T - 1;
  TensorView in = v;
  in.tokens = T - 1;
  EXPECT_NE(message([&] { cuda_rope_apply(plan, p, in, shifted); }).find("partially overlaps"), std::string::npos);
  // A plan not made by make_rope_plan.
  RopePlan broken = make_rope_plan(r, Recipe::hf);
  broken.inv_freq_f64.clear();
  EXPECT_NE(message([&] { CudaRopePlan bad(broken); }).find("inv_freq_f64"), std::string::npos);
}

TEST(CudaRuntime, AvailabilityAndBuffers) {
  std::string why;
  const bool available = cuda_device_available(&why);
  if (!available) {
    EXPECT_FALSE(why.empty()) << "cuda_device_available must say why it returns false";
    EXPECT_THROW(cuda_device_description(), std::runtime_error);
    GTEST_SKIP() << "no CUDA device (" << why << ")";
  }
  std::printf("device: %s\n", cuda_device_description().c_str());
  CudaBuffer b(16);
  const std::uint8_t in[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  std::uint8_t out[16] = {};
  b.upload(in, 16);
  CudaBuffer moved = std::move(b);
  moved.download(out, 16);
  EXPECT_EQ(std::memcmp(in, out, 16), 0);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_THROW(moved.upload(in, 17), std::invalid_argument);
  cuda_synchronize();
}

}  // namespace
