// The CUDA RoPE kernels against a device-to-device memcpy of the same size, in one run (cudaEvent
// timing of batches of 10 calls): cuda_rope_apply in place on q [8192 tokens, 32 heads, 128] (Llama-3-8B's shape; also q +
// k with 8 KV heads), f32 and bf16, recipes accurate (the default) and hf. Bytes count what the
// kernel must move: every element read once and written once; the memcpy moves the same bytes
// (read + write of a buffer of the tensor's size). The ratio rope / memcpy bandwidth is the figure;
// the bar is 0.85 on an H100 / H200 (bench/README.md).
//
// Host code only (it calls cuda_kernels.hpp and the CUDA runtime API), so a .cpp compiled by the
// C++ compiler: nvcc cannot parse the reference's C++20 headers that cuda_kernels.hpp includes.
// Without a GPU it says so and exits 0.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "ropecheck/kernels/cuda_kernels.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/reference/presets.hpp"

namespace {

using namespace ropecheck;
using namespace ropecheck::kernels;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct Events {
  cudaEvent_t e[3]{};
  Events() {
    for (cudaEvent_t& x : e) check(cudaEventCreate(&x), "cudaEventCreate");
  }
  ~Events() {
    for (cudaEvent_t& x : e) cudaEventDestroy(x);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Result {
  std::string name;
  double rope_us, memcpy_us, bytes;
};

constexpr double kBar = 0.85;

// One case: `reps` timed pairs of batches (rope, then memcpy of the same bytes), after `warmup`
// untimed ones; medians of the per-call times.
Result measure(const RopeSpec& spec, Recipe recipe, DType dt, std::int64_t tokens, std::int64_t hq, std::int64_t hk,
               int warmup, int reps) {
  const std::int64_t D = spec.head_dim;
  const std::size_t esize = dt == DType::f32 ? 4 : 2;
  const std::size_t q_bytes = static_cast<std::size_t>(tokens * hq * D) * esize;
  const std::size_t k_bytes = static_cast<std::size_t>(tokens * hk * D) * esize;
  const std::size_t bytes = q_bytes + k_bytes;

  CudaBuffer q(q_bytes), k(std::max<std::size_t>(k_bytes, 1)), copy_src(bytes), copy_dst(bytes), pos(
      static_cast<std::size_t>(tokens) * 8);
  // Inputs: small values (0.25 in every format), positions 0 .. tokens - 1.
  {
    std::vector<unsigned char> host(bytes);
    for (std::size_t i = 0; i < bytes; i += esize) {
      if (esize == 4) {
        const float v = 0.25f;
        std::copy_n(reinterpret_cast<const unsigned char*>(&v), 4, host.data() + i);
      } else {
        const std::uint16_t v = dt == DType::bf16 ? 0x3E80 : 0x3400;  // 0.25
        std::copy_n(reinterpret_cast<const unsigned char*>(&v), 2, host.data() + i);
      }
    }
    q.upload(host.data(), q_bytes);
    if (k_bytes) k.upload(host.data(), k_bytes);
    copy_src.upload(host.data(), bytes);
    std::vector<std::int64_t> p(static_cast<std::size_t>(tokens));
    std::iota(p.begin(), p.end(), 0);
    pos.upload(p.data(), p.size() * 8);
  }
  const CudaRopePlan plan(make_rope_plan(spec, recipe));
  PositionsView pv;
  pv.data = pos.data();
  pv.is_int64 = true;
  pv.tokens = tokens;
  const TensorView qv = TensorView::contiguous(q.data(), dt, tokens, hq, D);
  const TensorView kv = hk ? TensorView::contiguous(k.data(), dt, tokens, hk, D) : TensorView{};

  // Each timed sample is a batch of kBatch back-to-back calls: the host enqueues the next call while
  // the device runs the previous one, so host-side overhead (argument checks, launch) is not timed
  // as device idle time, except once per batch.
  constexpr int kBatch = 10;
  Events ev;
  std::vector<double> rope_ms, copy_ms;
  for (int r = 0; r < warmup + reps; ++r) {
    check(cudaEventRecord(ev.e[0]), "cudaEventRecord");
    for (int i = 0; i < kBatch; ++i) cuda_rope_apply(plan, pv, qv, qv, kv, kv);
    check(cudaEventRecord(ev.e[1]), "cudaEventRecord");
    for (int i = 0; i < kBatch; ++i)
      check(cudaMemcpyAsync(copy_dst.data(), copy_src.data(), bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
    check(cudaEventRecord(ev.e[2]), "cudaEventRecord");
    check(cudaEventSynchronize(ev.e[2]), "cudaEventSynchronize");
    if (r < warmup) continue;
    float a = 0, b = 0;
    check(cudaEventElapsedTime(&a, ev.e[0], ev.e[1]), "cudaEventElapsedTime");
    check(cudaEventElapsedTime(&b, ev.e[1], ev.e[2]), "cudaEventElapsedTime");
    rope_ms.push_back(a / kBatch);
    copy_ms.push_back(b / kBatch);
  }
  cuda_synchronize();
  const std::string name = std::string(to_string(recipe)) + " " + std::string(to_string(dt)) + " q" +
                           std::to_string(hq) + (hk ? "+k" + std::to_string(hk) : std::string());
  return {name, 1000 * median(rope_ms), 1000 * median(copy_ms), 2.0 * static_cast<double>(bytes)};
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 50;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_rope_cuda [--reps N]  (N >= 1, default 50)\n");
      return 2;
    }
  }
  if (reps < 1) {
    std::fprintf(stderr, "bench_rope_cuda: --reps must be >= 1\n");
    return 2;
  }
  std::string why;
  if (!cuda_device_available(&why)) {
    std::printf("bench_rope_cuda: no CUDA device (%s): nothing measured\n", why.c_str());
    return 0;
  }
  try {
    const RopeSpec spec = load_preset("llama-3.1-8b").rope;
    const std::int64_t tokens = 8192;
    std::printf("device: %s\n", cuda_device_description().c_str());
    std::printf("cuda_rope_apply in place, %lld tokens x heads x %d (llama-3.1-8b), median of %d batches of 10 (cudaEvent), "
                "bytes = read + write\n\n",
                static_cast<long long>(tokens), spec.head_dim, reps);
    std::printf("%-26s %10s %12s %12s %14s %8s\n", "case", "rope us", "rope GB/s", "memcpy us", "memcpy GB/s",
                "ratio");
    std::vector<Result> results;
    for (Recipe r : {Recipe::accurate, Recipe::hf})
      for (DType dt : {DType::f32, DType::bf16})
        for (std::int64_t hk : {0, 8}) {
          const Result x = measure(spec, r, dt, tokens, 32, hk, 5, reps);
          std::printf("%-26s %10.1f %12.1f %12.1f %14.1f %8.3f\n", x.name.c_str(), x.rope_us, x.bytes / x.rope_us / 1e3,
                      x.memcpy_us, x.bytes / x.memcpy_us / 1e3, x.memcpy_us / x.rope_us);
          results.push_back(x);
        }
    double worst = 1e300;
    for (const Result& x : results) worst = std::min(worst, x.memcpy_us / x.rope_us);
    std::printf("\nworst ratio rope / memcpy bandwidth: %.3f (bar %.2f: %s)\n", worst, kBar,
                worst >= kBar ? "met" : "NOT met");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_rope_cuda: %s\n", e.what());
    return 1;
  }
  return 0;
}
