// What the checker's units share (private to golden/): name helpers, the number format of the
// text report and the one-tensor check that check_candidate runs per matched output.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <atomic>
#include <cstdint>
#include <thread>
#include <optional>
#include <string>
#include <vector>

#include "ropecheck/checker/check_part.hpp"
#include "ropecheck/checker/checker.hpp"

namespace ropecheck::checker::check_detail {
// The checker's vocabulary from the modules below it.
using golden::GoldenSet;
using golden::ManifestTensor;
using io::Tensor;
using io::TensorDType;

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// "a, b, c", at most max_items of them, "(none)" for none.
inline std::string join(const std::vector<std::string>& v, std::size_t max_items = 24) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < max_items; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > max_items) s += fmt::format(", ... ({} in all)", v.size());
  return s.empty() ? "(none)" : s;
}

// The golden output's base name: "q_rot" of "q_rot.f32".
inline std::string base_of(const std::string& name) { return name.substr(0, name.find('.')); }

inline std::optional<DType> float_dtype(TensorDType t) {
  switch (t) {
    case TensorDType::f64: return DType::f64;
    case TensorDType::f32: return DType::f32;
    case TensorDType::f16: return DType::f16;
    case TensorDType::bf16: return DType::bf16;
    default: return std::nullopt;
  }
}

inline void note_first(std::optional<std::int64_t>& first, std::int64_t p) {
  if (!first || p < *first) first = p;
}

// Four significant digits, as the text report and the criterion's name print numbers.
inline std::string g4(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.4g}", v);
}

// The number of workers for_each_chunk runs: `threads` (0: hardware concurrency), at most `chunks`.
inline int chunk_workers(std::int64_t chunks, int threads) {
  const int n = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(n, chunks)));
}

// Runs chunk(k, w) for k in [0, chunks) on chunk_workers() workers, w the worker's number; chunks are
// taken in order, so per-chunk results merged in order do not depend on the thread count.
template <class Chunk>
void for_each_chunk_on(std::int64_t chunks, int threads, Chunk&& chunk) {
  const int n = chunk_workers(chunks, threads);
  std::atomic<std::int64_t> next{0};
  auto worker = [&](int w) {
    for (std::int64_t k; (k = next.fetch_add(1)) < chunks;) chunk(k, w);
  };
  if (n <= 1) {
    worker(0);
    return;
  }
  std::vector<std::thread> pool;
  for (int i = 0; i < n; ++i) pool.emplace_back(worker, i);
  for (std::thread& th : pool) th.join();
}

// Runs chunk(k) for k in [0, chunks) on `threads` workers (for_each_chunk_on).
template <class Chunk>
void for_each_chunk(std::int64_t chunks, int threads, Chunk&& chunk) {
  for_each_chunk_on(chunks, threads, [&](std::int64_t k, int) { chunk(k); });
}

// Checks tokens [first_token, last_token) of one candidate tensor against the golden output
// golden_name (check_accumulate.cpp).
TensorStats check_tensor(const GoldenSet& g, const std::string& golden_name, const Tensor& cand, const CheckOptions& opt,
                         std::int64_t first_token, std::int64_t last_token);

}  // namespace ropecheck::checker::check_detail
