// Golden-table generation: the fast correct-rounding engine against plain MPFR evaluation.
//
// The table is Llama-3.1-8B's cos/sin, 131072 positions x 64 pairs, correctly rounded to f64,
// f32, bf16 and f16, on 2 threads (positions split in halves):
//   BM_EngineTable          RopeRoundingEngine, cos / sin only (proven correct rounding: DD fast
//                           path, MPFR Ziv fallback)
//   BM_EngineTableWithHeads the same plus one q and one k head (head_dim 128) rotated per token,
//                           as `ropecheck golden` does with its default --heads 1
//   BM_PlainMpfrTable       Boost Real (MPFR) at the reference working precision: rope_cos_sin
//                           per position, then round_to_double per value and dtype
// The plain run takes tens of seconds. Set ROPECHECK_BENCH_MPFR_SAMPLE=16 (or pass
// --mpfr-sample=16) to evaluate only positions p % 16 == 0 and scale the time by 16; the summary
// says "extrapolated from 1/16" then. The last line printed is the summary:
//   table 131072x64 -> f64,f32,bf16,f16: fast X s, plain MPFR Y s (measured|extrapolated from 1/N),
//   ratio Y/X, fallbacks N
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "ropecheck/reference/fast_rounding.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/reference/rounding.hpp"

namespace {

using namespace ropecheck;
using Clock = std::chrono::steady_clock;

constexpr std::int64_t kPositions = 131072;
constexpr int kThreads = 2;
constexpr std::array<DType, 4> kTypes = {DType::f64, DType::f32, DType::bf16, DType::f16};

int g_mpfr_sample = 1;

struct Summary {
  double fast_s = -1, heads_s = -1, plain_s = -1, ctor_s = -1;
  double fast_cpu_s = -1, heads_cpu_s = -1, plain_cpu_s = -1;  // largest per-thread CPU time
  std::int64_t fast_values = 0, fallback_values = 0;
  std::int64_t heads_fast_values = 0, heads_fallback_values = 0;
  std::uint64_t checksum = 0;
};
Summary g_summary;

const EncodingSpec& llama() {
  static const EncodingSpec spec = load_preset("llama-3.1-8b");
  return spec;
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The largest per-thread CPU time of the last run_split: what the wall time would be on
// kThreads otherwise idle cores (the wall time also counts time lost to other processes).
double g_last_thread_cpu = 0;

// Runs f(begin, end, thread index) on kThreads threads over [0, kPositions); returns wall seconds.
template <class F>
double run_split(F&& f) {
  std::array<double, kThreads> cpu{};
  const auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i)
    ts.emplace_back([&, i] {
      const double c0 = thread_cpu_seconds();
      f(kPositions * i / kThreads, kPositions * (i + 1) / kThreads, i);
      cpu[static_cast<std::size_t>(i)] = thread_cpu_seconds() - c0;
    });
  for (std::thread& t : ts) t.join();
  g_last_thread_cpu = *std::max_element(cpu.begin(), cpu.end());
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::uint64_t mix(std::uint64_t h, double v) { return (h ^ std::bit_cast<std::uint64_t>(v)) * 0x100000001B3ULL; }

// One full table with the engine; heads = 0: cos / sin only.
double engine_table(const RopeRoundingEngine& eng, int heads, RoundingStats& total, std::uint64_t& checksum) {
  const int P = eng.pairs(), D = eng.head_dim();
  std::array<RoundingStats, kThreads> stats{};
  std::array<std::uint64_t, kThreads> sums{};
  const double s = run_split([&](std::int64_t b, std::int64_t e, int ti) {
    std::vector<double> buf(kTypes.size() * static_cast<std::size_t>(2 * P + heads * D));
    std::vector<double> x(static_cast<std::size_t>(heads * D));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(static_cast<double>((i * 37) % 255) - 127.0, -5);
    std::array<RoundedOut, 4> outs{};
    double* p = buf.data();
    for (std::size_t d = 0; d < kTypes.size(); ++d) {
      outs[d].cos = p;
      outs[d].sin = p + P;
      outs[d].rot = heads > 0 ? p + 2 * P : nullptr;
      p += 2 * P + heads * D;
    }
    std::uint64_t h = 0;
    for (std::int64_t pos = b; pos < e; ++pos) {
      eng.evaluate(Position::uniform(pos), x, heads, kTypes, outs, stats[static_cast<std::size_t>(ti)]);
      h = mix(h, buf[static_cast<std::size_t>(pos % P)]);
    }
    sums[static_cast<std::size_t>(ti)] = h;
  });
  for (int i = 0; i < kThreads; ++i) {
    total += stats[static_cast<std::size_t>(i)];
    checksum ^= sums[static_cast<std::size_t>(i)];
  }
  return s;
}

void BM_EngineTable(benchmark::State& state) {
  const auto t0 = Clock::now();
  const RopeRoundingEngine eng(llama().rope, std::nullopt, kPositions - 1);
  g_summary.ctor_s = std::chrono::duration<double>(Clock::now() - t0).count();
  double cpu = 0;
  for (auto _ : state) {
    RoundingStats st;
    const double s = engine_table(eng, 0, st, g_summary.checksum);
    cpu = g_last_thread_cpu;
    state.SetIterationTime(s);
    if (g_summary.fast_s < 0 || s < g_summary.fast_s) g_summary.fast_s = s;
    if (g_summary.fast_cpu_s < 0 || g_last_thread_cpu < g_summary.fast_cpu_s) g_summary.fast_cpu_s = g_last_thread_cpu;
    g_summary.fast_values = st.fast_values;
    g_summary.fallback_values = st.fallback_values;
  }
  state.counters["values"] = static_cast<double>(g_summary.fast_values + g_summary.fallback_values);
  state.counters["fallbacks"] = static_cast<double>(g_summary.fallback_values);
  state.counters["thread_cpu_ns_per_angle"] = cpu * 1e9 / static_cast<double>(kPositions * 64) * kThreads;
  state.counters["ctor_s"] = g_summary.ctor_s;
  state.counters["thread_cpu_s"] = cpu;
}
BENCHMARK(BM_EngineTable)
    ->Unit(benchmark::kSecond)
    ->UseManualTime()
    ->Iterations(1)
    ->Repetitions(3)
    ->ReportAggregatesOnly(false);

void BM_EngineTableWithHeads(benchmark::State& state) {
  const RopeRoundingEngine eng(llama().rope, std::nullopt, kPositions - 1);
  double cpu = 0;
  for (auto _ : state) {
    RoundingStats st;
    const double s = engine_table(eng, 2, st, g_summary.checksum);
    cpu = g_last_thread_cpu;
    state.SetIterationTime(s);
    if (g_summary.heads_s < 0 || s < g_summary.heads_s) g_summary.heads_s = s;
    if (g_summary.heads_cpu_s < 0 || g_last_thread_cpu < g_summary.heads_cpu_s)
      g_summary.heads_cpu_s = g_last_thread_cpu;
    g_summary.heads_fast_values = st.fast_values;
    g_summary.heads_fallback_values = st.fallback_values;
  }
  state.counters["values"] = static_cast<double>(g_summary.heads_fast_values + g_summary.heads_fallback_values);
  state.counters["fallbacks"] = static_cast<double>(g_summary.heads_fallback_values);
  state.counters["thread_cpu_s"] = cpu;
}
BENCHMARK(BM_EngineTableWithHeads)->Unit(benchmark::kSecond)->UseManualTime()->Iterations(1);

void BM_PlainMpfrTable(benchmark::State& state) {
  const RopeSpec& r = llama().rope;
  const unsigned bits = working_precision_bits(53, rope_max_abs_angle(r, std::nullopt, kPositions - 1));
  ScopedPrecision prec(bits);  // set before the threads start; they share it (README)
  const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
  const int sample = g_mpfr_sample;
  for (auto _ : state) {
    std::array<std::uint64_t, kThreads> sums{};
    const double s = run_split([&](std::int64_t b, std::int64_t e, int ti) {
      std::vector<Real> c, sn;
      std::uint64_t h = 0;
      for (std::int64_t pos = b; pos < e; ++pos) {
        if (pos % sample != 0) continue;
        rope_cos_sin(r, f, Position::uniform(pos), c, sn);
        for (std::size_t j = 0; j < c.size(); ++j)
          for (DType t : kTypes) {
            h = mix(h, round_to_double(c[j], t));
            h = mix(h, round_to_double(sn[j], t));
          }
      }
      sums[static_cast<std::size_t>(ti)] = h;
    });
    state.SetIterationTime(s * sample);
    g_summary.plain_s = s * sample;
    g_summary.plain_cpu_s = g_last_thread_cpu * sample;
    g_summary.checksum ^= sums[0] ^ sums[1];
  }
  state.counters["precision_bits"] = bits;
  state.counters["sample_1_in"] = sample;
  if (g_summary.fast_s > 0) {
    state.counters["fast_s"] = g_summary.fast_s;
    state.counters["plain_s"] = g_summary.plain_s;
    state.counters["ratio"] = g_summary.plain_s / g_summary.fast_s;
    state.counters["thread_cpu_ratio"] = g_summary.plain_cpu_s / g_summary.fast_cpu_s;
  }
}
BENCHMARK(BM_PlainMpfrTable)->Unit(benchmark::kSecond)->UseManualTime()->Iterations(1);

}  // namespace

int main(int argc, char** argv) {
  if (const char* e = std::getenv("ROPECHECK_BENCH_MPFR_SAMPLE")) g_mpfr_sample = std::max(1, std::atoi(e));
  // Our own flag, removed before Google Benchmark sees the arguments.
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--mpfr-sample=", 14) == 0)
      g_mpfr_sample = std::max(1, std::atoi(argv[i] + 14));
    else
      argv[out++] = argv[i];
  }
  argc = out;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  const Summary& s = g_summary;
  if (s.fast_s > 0)
    std::printf(
        "engine alone: %.3f s wall (largest thread CPU %.3f s) for %lld values (%lld fast, %lld fallback), "
        "engine construction %.3f s\n",
        s.fast_s, s.fast_cpu_s, static_cast<long long>(s.fast_values + s.fallback_values),
        static_cast<long long>(s.fast_values), static_cast<long long>(s.fallback_values), s.ctor_s);
  if (s.heads_s > 0)
    std::printf(
        "with one q and one k head per token: %.3f s wall (largest thread CPU %.3f s) for %lld values (%lld "
        "fallback)\n",
        s.heads_s, s.heads_cpu_s, static_cast<long long>(s.heads_fast_values + s.heads_fallback_values),
        static_cast<long long>(s.heads_fallback_values));
  if (s.plain_s > 0)
    std::printf("plain MPFR: %.2f s wall (largest thread CPU %.2f s)%s\n", s.plain_s, s.plain_cpu_s,
                g_mpfr_sample == 1 ? "" : (", both scaled by " + std::to_string(g_mpfr_sample)).c_str());
  const std::string how =
      g_mpfr_sample == 1 ? std::string("measured") : "extrapolated from 1/" + std::to_string(g_mpfr_sample);
  if (s.fast_s > 0 && s.plain_s > 0)
    std::printf(
        "table 131072x64 -> f64,f32,bf16,f16: fast %.3f s, plain MPFR %.2f s (%s), ratio %.1f, fallbacks %lld\n",
        s.fast_s, s.plain_s, how.c_str(), s.plain_s / s.fast_s, static_cast<long long>(s.fallback_values));
  else if (s.fast_s > 0)
    std::printf("table 131072x64 -> f64,f32,bf16,f16: fast %.3f s, plain MPFR not run, fallbacks %lld\n", s.fast_s,
                static_cast<long long>(s.fallback_values));
  std::printf("(checksum %016llx)\n", static_cast<unsigned long long>(s.checksum));
  return 0;
}
