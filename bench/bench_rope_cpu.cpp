// The CPU kernels' throughput bars (bench/README.md "bench_rope_cpu"):
//
// 1. rope_apply in place at the Llama-3-8B shape, 8192 tokens x 32 heads x 128 (q; also q 32 + k 8 heads),
//    f32 and bf16, recipes accurate (the default) and hf, on 1 and 2 threads, against a memcpy of the same
//    buffer size timed in the same benchmark, iteration by iteration (so both see the same machine load).
//    Bytes: rope_apply reads and writes every element once (2 x size), memcpy reads the source and
//    writes the destination (2 x size): equal, so ratio_vs_memcpy = memcpy time / rope_apply time.
//    Bar: >= 0.90.
// 2. rope_cos_sin_table for 131072 positions x 64 pairs (Llama-3.1-8B), accurate against hf, timed
//    alternately in the same benchmark: ratio_accurate_vs_hf = hf time / accurate time. Bar: >= 0.5.
//
// A summary with the median ratio of every configuration over the repetitions follows the runs
// (--benchmark_repetitions=N; the default is one).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kernels/scalar_recipes.hpp"
#include "ropecheck/reference/presets.hpp"

namespace {

using namespace ropecheck;
using namespace ropecheck::kernels;
using Clock = std::chrono::steady_clock;

constexpr std::int64_t kTokens = 8192, kQHeads = 32, kKHeads = 8, kHeadDim = 128;

// 64-byte aligned, zero-initialised, touched once (first-touch page faults stay out of the timings).
struct Buffer {
  std::size_t bytes = 0;
  std::unique_ptr<unsigned char, decltype(&std::free)> mem{nullptr, &std::free};
  explicit Buffer(std::size_t n) : bytes(n), mem(static_cast<unsigned char*>(std::aligned_alloc(64, (n + 63) / 64 * 64)), &std::free) {
    std::memset(mem.get(), 0, n);
  }
  unsigned char* data() { return mem.get(); }
};

void fill(Buffer& b, DType t, std::uint32_t seed) {
  std::uint32_t s = seed;
  const std::size_t n = b.bytes / (t == DType::f32 ? 4 : 2);
  for (std::size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    const float v = static_cast<float>(static_cast<int>(s >> 23) - 256) / 64.0f;
    if (t == DType::f32)
      std::memcpy(b.data() + 4 * i, &v, 4);
    else {
      const std::uint16_t h = f32_to_bf16_bits(v);
      std::memcpy(b.data() + 2 * i, &h, 2);
    }
  }
}

// memcpy of `bytes` split evenly over `threads` OpenMP threads (the kernels' own thread pool).
void parallel_memcpy(unsigned char* dst, const unsigned char* src, std::size_t bytes, int threads) {
  if (threads <= 1) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const std::size_t chunk = (bytes / static_cast<std::size_t>(threads) + 63) / 64 * 64;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int i = 0; i < threads; ++i) {
    const std::size_t lo = std::min(bytes, chunk * static_cast<std::size_t>(i));
    const std::size_t hi = std::min(bytes, lo + chunk);
    std::memcpy(dst + lo, src + lo, hi - lo);
  }
}

std::map<std::string, std::vector<double>>& ratios() {
  static std::map<std::string, std::vector<double>> r;
  return r;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// args: recipe (0 accurate, 1 hf), dtype (0 f32, 1 bf16), heads (0: q 32 in place, 1: q 32 + k 8 in
// place, 2: q 32 out of place), threads
void BM_rope_apply(benchmark::State& state) {
  const Recipe recipe = state.range(0) == 0 ? Recipe::accurate : Recipe::hf;
  const DType dt = state.range(1) == 0 ? DType::f32 : DType::bf16;
  const bool with_k = state.range(2) == 1;
  const bool out_of_place = state.range(2) == 2;  // q32 into a second buffer (streaming stores)
  const int threads = static_cast<int>(state.range(3));
  const std::size_t es = dt == DType::f32 ? 4 : 2;
  const RopePlan plan = make_rope_plan(load_preset("llama-3-8b").rope, recipe);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(kTokens));
  for (std::int64_t t = 0; t < kTokens; ++t) pos[static_cast<std::size_t>(t)] = t;
  Buffer q(static_cast<std::size_t>(kTokens * kQHeads * kHeadDim) * es);
  Buffer k(with_k ? static_cast<std::size_t>(kTokens * kKHeads * kHeadDim) * es : 0);
  fill(q, dt, 1);
  if (with_k) fill(k, dt, 2);
  const std::size_t bytes = q.bytes + k.bytes;
  Buffer src(bytes), dst(bytes);
  fill(src, dt, 3);
  const TensorView vq = TensorView::contiguous(q.data(), dt, kTokens, kQHeads, kHeadDim);
  const TensorView vk = with_k ? TensorView::contiguous(k.data(), dt, kTokens, kKHeads, kHeadDim) : TensorView{};
  Buffer qo(out_of_place ? q.bytes : 0);
  const TensorView vo = out_of_place ? TensorView::contiguous(qo.data(), dt, kTokens, kQHeads, kHeadDim) : vq;
  const KernelOptions opts{.threads = threads};
  // Warm-up: thread pool started, pages touched.
  rope_apply(plan, PositionsView::of(pos), vq, vo, vk, vk, opts);
  parallel_memcpy(dst.data(), src.data(), bytes, threads);
  double t_rope = 0, t_copy = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    rope_apply(plan, PositionsView::of(pos), vq, vo, vk, vk, opts);
    const auto t1 = Clock::now();
    parallel_memcpy(dst.data(), src.data(), bytes, threads);
    const auto t2 = Clock::now();
    benchmark::DoNotOptimize(q.data());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
    t_rope += seconds(t1 - t0);
    t_copy += seconds(t2 - t1);
    state.SetIterationTime(seconds(t1 - t0));
  }
  const double moved = 2.0 * static_cast<double>(bytes) * static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(moved));
  state.counters["memcpy_GBps"] = moved / t_copy / 1e9;
  state.counters["ratio_vs_memcpy"] = t_copy / t_rope;
  const std::string key = std::string(to_string(recipe)) + " " + std::string(to_string(dt)) + (with_k ? " q32+k8" : (out_of_place ? " q32 oop" : " q32   ")) +
                          " threads " + std::to_string(threads);
  ratios()[key].push_back(t_copy / t_rope);
  state.SetLabel(key);
}

// args: dtype (0 f32, 1 bf16), threads
void BM_table_accurate_vs_hf(benchmark::State& state) {
  const DType dt = state.range(0) == 0 ? DType::f32 : DType::bf16;
  const int threads = static_cast<int>(state.range(1));
  const RopeSpec spec = load_preset("llama-3.1-8b").rope;
  const RopePlan acc = make_rope_plan(spec, Recipe::accurate), hf = make_rope_plan(spec, Recipe::hf);
  const std::int64_t T = 131072, P = acc.pairs;
  std::vector<std::int64_t> pos(static_cast<std::size_t>(T));
  for (std::int64_t t = 0; t < T; ++t) pos[static_cast<std::size_t>(t)] = t;
  const std::size_t es = dt == DType::f32 ? 4 : 2;
  Buffer c(static_cast<std::size_t>(T * P) * es), s(c.bytes);
  const KernelOptions opts{.threads = threads};
  rope_cos_sin_table(hf, PositionsView::of(pos), c.data(), s.data(), dt, opts);
  double t_acc = 0, t_hf = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    rope_cos_sin_table(acc, PositionsView::of(pos), c.data(), s.data(), dt, opts);
    const auto t1 = Clock::now();
    rope_cos_sin_table(hf, PositionsView::of(pos), c.data(), s.data(), dt, opts);
    const auto t2 = Clock::now();
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
    t_acc += seconds(t1 - t0);
    t_hf += seconds(t2 - t1);
    state.SetIterationTime(seconds(t1 - t0));
  }
  const double values = 2.0 * static_cast<double>(T * P) * static_cast<double>(state.iterations());
  state.counters["accurate_Mvalues_per_s"] = values / t_acc / 1e6;
  state.counters["hf_Mvalues_per_s"] = values / t_hf / 1e6;
  state.counters["ratio_accurate_vs_hf"] = t_hf / t_acc;
  const std::string key = std::string("table 131072x64 accurate/hf ") + std::string(to_string(dt)) + " threads " +
                          std::to_string(threads);
  ratios()[key].push_back(t_hf / t_acc);
  state.SetLabel(key);
}

void rope_args(benchmark::internal::Benchmark* b) {
  for (int recipe : {0, 1})
    for (int dt : {0, 1})
      for (int with_k : {0, 1})
        for (int threads : {1, 2}) b->Args({recipe, dt, with_k, threads});
  // Out of place (not a bar: reads q, writes a second buffer with streaming stores, as memcpy does).
  for (int dt : {0, 1})
    for (int threads : {1, 2}) b->Args({0, dt, 2, threads});
}

// Fixed iteration counts: every call of a benchmark function is then a reported repetition (no
// calibration runs to leave out of the summary).
BENCHMARK(BM_rope_apply)->Apply(rope_args)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(12);
BENCHMARK(BM_table_accurate_vs_hf)
    ->Args({0, 1})
    ->Args({0, 2})
    ->Args({1, 2})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(4);

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::printf("CPU path: %s\n", std::string(cpu_path()).c_str());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::printf("\nSummary (median over %s): ratio, bar\n", "repetitions");
  bool all = true;
  for (const auto& [key, v] : ratios()) {
    const bool table = key.rfind("table", 0) == 0;
    const bool informative = key.find(" oop") != std::string::npos;  // no bar
    const double bar = table ? 0.5 : (informative ? 0.0 : 0.90);
    const double m = median(v);
    all = all && m >= bar;
    std::printf("  %-44s %s %.3f (n=%zu, min %.3f, max %.3f)  bar %.2f %s\n", key.c_str(),
                table ? "ratio_accurate_vs_hf" : "ratio_vs_memcpy", m, v.size(), *std::min_element(v.begin(), v.end()),
                *std::max_element(v.begin(), v.end()), bar, informative ? "(no bar)" : (m >= bar ? "met" : "NOT MET"));
  }
  std::printf("%s\n", all ? "every bar met" : "some bars not met");
  return 0;
}
