// A minimal parallel loop over std::thread (drift's own work: exact values, metrics, hashing). The
// kernels thread themselves; drift never nests its threads inside a kernel call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "ropecheck/core/spec.hpp"  // SpecError
#include "ropecheck/reference/mpfr_value.hpp"

namespace ropecheck::drift::detail {

inline int resolve_threads(int threads) {
  return threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Calls fn(begin, end, worker) on `threads` contiguous slices of [0, n); rethrows the first
// exception a worker threw. Runs inline with one thread or a small n.
template <class Fn>
void parallel_for(std::int64_t n, int threads, Fn&& fn) {
  const int t = static_cast<int>(std::min<std::int64_t>(resolve_threads(threads), std::max<std::int64_t>(n, 1)));
  if (t <= 1) {
    fn(std::int64_t{0}, n, 0);
    return;
  }
  std::vector<std::thread> pool;
  std::exception_ptr error;
  std::mutex m;
  std::string spawn_error;
  for (int w = 0; w < t; ++w) {
    try {
      pool.emplace_back([&, w] {
        const MpfrThreadCaches mpfr_caches;  // exact values and angle reductions call MPFR
        const std::int64_t b = n * w / t, e = n * (w + 1) / t;
        try {
          fn(b, e, w);
        } catch (...) {
          std::lock_guard<std::mutex> lock(m);
          if (!error) error = std::current_exception();
        }
      });
    } catch (const std::system_error& ex) {
      // Out of threads (a pids limit, an address-space limit): the started ones finish, then exit 2.
      spawn_error = ex.code().message();
      break;
    }
  }
  for (std::thread& th : pool) th.join();
  if (!spawn_error.empty())
    throw SpecError("--threads " + std::to_string(t) + ": cannot start worker thread " + std::to_string(pool.size() + 1) +
                    " (" + spawn_error + "); use a smaller --threads");
  if (error) std::rethrow_exception(error);
}

}  // namespace ropecheck::drift::detail
