// Attention-level golden values: the correctly rounded scores and outputs of a causal block for one head
// group, and how the cost grows with the block (attention/engine.hpp: double-double fast path with proven
// bounds, MPFR ball-arithmetic fallback).
//
// Llama-3.1-8B's RoPE (head_dim 128), one GQA group of 4 query heads over one key / value head (its
// 32 / 8 heads), a causal block of N tokens at positions 0 .. N-1, bf16-exact normal inputs, scores
// (N (N + 1) / 2 per query head) and outputs (N x 128 per query head) rounded to f64, f32, f16 and
// bf16, on 2 worker threads; N = 256, 512, 1024, 2048. Each size runs once (the engine is built
// outside the timing). The summary lines at the end:
//   causal N: X s (cpu Y s; engine built in Z s, not counted), S scores + O outputs per dtype, F fallback values
//   growth 256 -> 2048: ... (N^2 would be 64x)
// The bar (docs/measurements.md "Attention"): N = 2048 in at most 10 s on the project's 2-core machine.
#include <benchmark/benchmark.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>
#include <vector>

#include "ropecheck/attention/engine.hpp"
#include "ropecheck/reference/presets.hpp"

namespace {

using namespace ropecheck;
using namespace ropecheck::attention;
using Clock = std::chrono::steady_clock;

constexpr int kGroup = 4;
constexpr int kThreads = 2;
constexpr std::array<DType, 4> kTypes = {DType::f64, DType::f32, DType::f16, DType::bf16};

struct Figure {
  double wall = 0, cpu = 0, ctor = 0;
  std::int64_t scores = 0, outputs = 0, fallbacks = 0;
};
std::map<std::int64_t, Figure> g_figures;

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

std::vector<double> inputs(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<double> out(n);
  for (double& x : out) {
    // bf16-exact: the value nearest a normal sample with 8 significant bits.
    const float f = nd(rng);
    int e = 0;
    const float m = std::frexp(f, &e);
    x = std::ldexp(std::nearbyint(static_cast<double>(m) * 256.0) / 256.0, e);
  }
  return out;
}

void BM_CausalBlock(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const RopeSpec rope = load_preset("llama-3.1-8b").rope;
  AttentionSpec a;
  a.group = kGroup;
  AttentionEngineOptions opt;
  opt.threads = kThreads;
  const auto built = Clock::now();
  const AttentionEngine engine(rope, std::nullopt, a, n - 1, opt);
  const double ctor = std::chrono::duration<double>(Clock::now() - built).count();
  const std::size_t N = static_cast<std::size_t>(n), D = 128;
  const std::vector<double> q = inputs(N * kGroup * D, 1), k = inputs(N * D, 2), v = inputs(N * D, 3);
  std::vector<Position> pos;
  for (std::int64_t i = 0; i < n; ++i) pos.push_back(Position::uniform(i));
  const BlockLayout layout(a, n);
  const std::size_t ns = static_cast<std::size_t>(layout.total()) * kGroup, no = N * kGroup * D;
  std::vector<std::vector<double>> s(4, std::vector<double>(ns)), o(4, std::vector<double>(no));
  std::vector<AttentionOut> out;
  for (std::size_t d = 0; d < 4; ++d) out.push_back({s[d].data(), o[d].data()});
  for (auto _ : state) {
    RoundingStats stats;
    const double c0 = process_cpu_seconds();
    const auto t0 = Clock::now();
    engine.block(pos, q, k, v, kTypes, out, stats);
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(wall);
    g_figures[n] = {wall, process_cpu_seconds() - c0, ctor, static_cast<std::int64_t>(ns),
                    static_cast<std::int64_t>(no), stats.fallback_values};
    benchmark::DoNotOptimize(s[0][ns / 2]);
  }
  state.counters["fallbacks"] = static_cast<double>(g_figures[n].fallbacks);
}
BENCHMARK(BM_CausalBlock)->Arg(256)->Arg(512)->Arg(1024)->Arg(2048)->Iterations(1)->UseManualTime()->Unit(benchmark::kSecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  for (const auto& [n, f] : g_figures)
    std::printf("causal %lld: %.2f s (cpu %.2f s; engine built in %.2f s, not counted), %lld scores + %lld outputs "
                "per dtype, %lld fallback values\n",
                static_cast<long long>(n), f.wall, f.cpu, f.ctor, static_cast<long long>(f.scores),
                static_cast<long long>(f.outputs), static_cast<long long>(f.fallbacks));
  if (g_figures.count(256) && g_figures.count(2048))
    std::printf("growth 256 -> 2048: %.1fx wall, %.1fx cpu (N^2: 64x)\n", g_figures[2048].wall / g_figures[256].wall,
                g_figures[2048].cpu / g_figures[256].cpu);
  return 0;
}
