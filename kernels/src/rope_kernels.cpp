// rope_apply, the tables and the per-token rows (rope_kernels.hpp): argument checks, the choice of
// backend (AVX-512 or portable), and the OpenMP loop over tokens. The arithmetic lives in rows.cpp
// (per-token cos / sin) and in the backends (portable.cpp, simd_avx512.cpp).
#include "ropecheck/kernels/rope_kernels.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernel_detail.hpp"
#include "mla_slice.hpp"
#include "ropecheck/core/input_error.hpp"
#include "ropecheck/kernels/scalar_recipes.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"
#include "rows.hpp"
#include "storage.hpp"

namespace ropecheck::kernels {

using detail::Backend;
using detail::Mode;
using detail::RotateFn;
using detail::RotateJob;
using detail::RowEngine;

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("ropecheck::kernels: " + what); }

const Backend& choose_backend(const KernelOptions& opts) {
  if (!opts.portable)
    if (const Backend* b = detail::avx512_backend()) return *b;
  return detail::portable_backend();
}

// libgomp ends the process with exit status 1 ("Thread creation failed") when it cannot start a team
// thread, which reads as "check failed". So before a parallel region needs n threads, n - 1 threads
// with the default attributes (libgomp's too, unless OMP_STACKSIZE is set) are started side by side;
// if that fails the kernel throws (exit 2 with one line). The largest n that worked is remembered.
void ensure_threads_can_start(int n) {
  static std::atomic<int> verified{1};
  if (n <= verified.load()) return;
  std::mutex m;
  std::condition_variable cv;
  bool release = false;
  std::vector<std::thread> team;
  std::string error;
  try {
    for (int i = 1; i < n; ++i)
      team.emplace_back([&] {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return release; });
      });
  } catch (const std::system_error& e) {
    error = e.code().message();
  }
  {
    std::lock_guard<std::mutex> lock(m);
    release = true;
  }
  cv.notify_all();
  for (std::thread& t : team) t.join();
  // InputError, not the std::invalid_argument of a problem the kernels do not take: callers turn that
  // into "unsupported", and a machine out of threads is no property of the kernel (exit 2).
  if (!error.empty())
    throw InputError("--threads " + std::to_string(n) + ": cannot start " + std::to_string(n) + " threads (" + error +
                     " after " + std::to_string(team.size() + 1) + "); use a smaller --threads or OMP_NUM_THREADS");
  int seen = verified.load();
  while (seen < n && !verified.compare_exchange_weak(seen, n)) {
  }
}

int thread_count(const KernelOptions& opts, std::int64_t work_items) {
  if (opts.threads < 0) fail("threads must be >= 0, got " + std::to_string(opts.threads));
  int n = opts.threads;
#ifdef _OPENMP
  if (n == 0) n = omp_get_max_threads();
#else
  n = 1;
#endif
  if (work_items < n) n = static_cast<int>(std::max<std::int64_t>(work_items, 1));
  n = std::max(n, 1);
#ifdef _OPENMP
  ensure_threads_can_start(n);
#endif
  return n;
}

int thread_index() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

void check_positions(const PositionsView& p, std::int64_t tokens) {
  if (p.streams != 1 && p.streams != 3) fail("positions.streams must be 1 or 3, got " + std::to_string(p.streams));
  if (p.tokens != tokens)
    fail("positions.tokens (" + std::to_string(p.tokens) + ") != tensor tokens (" + std::to_string(tokens) + ")");
  if (p.tokens > 0 && p.data == nullptr) fail("positions.data is null");
  if (p.token_stride < 0 || (p.streams == 3 && p.stream_stride < 0)) fail("positions strides must be >= 0");
}

// Byte range [lo, hi) a view touches (empty when any extent is 0).
std::pair<const unsigned char*, const unsigned char*> extent(const TensorView& v) {
  const auto* base = static_cast<const unsigned char*>(v.data);
  if (v.tokens == 0 || v.heads == 0 || v.head_dim == 0) return {base, base};
  const std::int64_t last = (v.tokens - 1) * v.stride_token + (v.heads - 1) * v.stride_head + (v.head_dim - 1) * v.stride_dim;
  return {base, base + (last + 1) * detail::dtype_size(v.dtype)};
}

void check_pair(const char* name, const RopePlan& plan, const TensorView& in, const TensorView& out) {
  const std::string n(name);
  const bool empty = in.tokens == 0 || in.heads == 0 || in.head_dim == 0;  // may have no data
  if (in.head_dim != plan.head_dim)
    fail(n + "_in.head_dim (" + std::to_string(in.head_dim) + ") != spec head_dim (" + std::to_string(plan.head_dim) + ")");
  if (in.tokens < 0 || in.heads < 0) fail(n + "_in has a negative extent");
  if (out.tokens != in.tokens || out.heads != in.heads || out.head_dim != in.head_dim)
    fail(n + "_out shape differs from " + n + "_in shape");
  if (in.data == nullptr && !empty) fail(n + "_in.data is null");
  if (out.data == nullptr && !empty) fail(n + "_out.data is null");
  for (const TensorView* v : {&in, &out})
    if (v->stride_token < 0 || v->stride_head < 0 || v->stride_dim < 0) fail(n + " strides must be >= 0");
  const bool same = in.data == out.data && in.dtype == out.dtype && in.stride_token == out.stride_token &&
                    in.stride_head == out.stride_head && in.stride_dim == out.stride_dim;
  if (!same) {
    const auto [a0, a1] = extent(in);
    const auto [b0, b1] = extent(out);
    if (a0 < b1 && b0 < a1) fail(n + "_out partially overlaps " + n + "_in (in place needs the same view)");
  }
}

struct TensorTask {
  TensorView in, out;
  Mode mode = Mode::f32;
  RotateFn fn = nullptr;
  bool stream_out = false;
};

// Streaming stores pay off for outputs well beyond the caches that are not read back at once: large
// out-of-place f32 / bf16 outputs, half-split, whose every full output vector is 64-byte aligned
// (the AVX-512 rotation streams only those: 16 f32 or 32 bf16 values).
constexpr std::int64_t kStreamMinBytes = std::int64_t{32} << 20;

bool streamable(const RopePlan& plan, const TensorView& in, const TensorView& out) {
  if (out.data == in.data || plan.interleaved || out.stride_dim != 1) return false;
  if (out.dtype != DType::f32 && out.dtype != DType::bf16) return false;
  const std::int64_t es = detail::dtype_size(out.dtype);
  if (out.tokens * out.heads * out.head_dim * es < kStreamMinBytes) return false;
  return reinterpret_cast<std::uintptr_t>(out.data) % 64 == 0 && (out.stride_token * es) % 64 == 0 &&
         (out.stride_head * es) % 64 == 0 && (plan.pairs * es) % 64 == 0;
}

TensorTask make_task(const RopePlan& plan, const Backend& be, const TensorView& in, const TensorView& out) {
  TensorTask t{in, out, detail::mode_of(table_dtype(plan.recipe, out.dtype)), nullptr};
  const bool unit = in.stride_dim == 1 && out.stride_dim == 1;
  const detail::Fmt fi = detail::fmt_of(in.dtype), fo = detail::fmt_of(out.dtype);
  t.fn = be.rotate_fn(fi, fo, t.mode, plan.interleaved, unit);
  if (t.fn == nullptr) t.fn = detail::portable_backend().rotate_fn(fi, fo, t.mode, plan.interleaved, unit);
  t.stream_out = &be != &detail::portable_backend() && streamable(plan, in, out);
  return t;
}

void run_task(const TensorTask& task, const RopePlan& plan, const RowEngine& eng, std::int64_t token) {
  if (task.in.heads == 0) return;
  RotateJob job;
  job.in = static_cast<const unsigned char*>(task.in.data) + token * task.in.stride_token * detail::dtype_size(task.in.dtype);
  job.out = static_cast<unsigned char*>(task.out.data) + token * task.out.stride_token * detail::dtype_size(task.out.dtype);
  job.heads = task.in.heads;
  job.in_stride_head = task.in.stride_head;
  job.in_stride_dim = task.in.stride_dim;
  job.out_stride_head = task.out.stride_head;
  job.out_stride_dim = task.out.stride_dim;
  job.pairs = plan.pairs;
  job.head_dim = plan.head_dim;
  job.interleaved = plan.interleaved;
  // Prefetch the same head some 16 KiB of this tensor ahead (at least one token), while there is one.
  const std::int64_t in_bytes = task.in.stride_token * detail::dtype_size(task.in.dtype);
  const std::int64_t ahead = std::clamp<std::int64_t>(in_bytes > 0 ? 16384 / in_bytes : 1, 1, 64);
  if (token + ahead < task.in.tokens && in_bytes > 0) {
    job.prefetch_in_bytes = ahead * in_bytes;
    if (task.out.data != task.in.data) job.prefetch_out_bytes = ahead * task.out.stride_token * detail::dtype_size(task.out.dtype);
  }
  job.stream_out = task.stream_out;
  job.cc = eng.cc();
  job.ss = eng.ss();
  job.ccd = eng.ccd();
  job.ssd = eng.ssd();
  task.fn(job);
}

}  // namespace

std::string_view cpu_path() { return detail::avx512_backend() != nullptr ? "avx512" : "portable"; }

void recipe_cos_sin_row(const RopePlan& plan, const Position& p, float* cos_out, float* sin_out) {
  RowEngine eng(plan, choose_backend({}));
  eng.angles(p);
  eng.cos_sin();
  std::copy_n(eng.c(), plan.pairs, cos_out);
  std::copy_n(eng.s(), plan.pairs, sin_out);
}

void recipe_angle_row(const RopePlan& plan, const Position& p, double* angle_out) {
  RowEngine eng(plan, detail::portable_backend());
  eng.angles(p);
  std::copy_n(eng.theta_d(), plan.pairs, angle_out);
}

void rope_apply(const RopePlan& plan, const PositionsView& positions, const TensorView& q_in, const TensorView& q_out,
                const TensorView& k_in, const TensorView& k_out, const KernelOptions& opts) {
  if (plan.spec.rotary_offset != 0) return detail::rope_apply_slice(plan, positions, q_in, q_out, k_in, k_out, opts);
  check_pair("q", plan, q_in, q_out);
  const bool has_k = k_in.data != nullptr || k_out.data != nullptr || k_in.heads != 0 || k_out.heads != 0;
  if (has_k) {
    check_pair("k", plan, k_in, k_out);
    if (k_in.tokens != q_in.tokens) fail("k tokens differ from q tokens");
  }
  check_positions(positions, q_in.tokens);
  if (static_cast<int>(plan.stream.size()) != plan.pairs || static_cast<int>(plan.inv_freq_f32.size()) != plan.pairs)
    fail("the plan is not made by make_rope_plan");

  const Backend& be = choose_backend(opts);
  const TensorTask tq = make_task(plan, be, q_in, q_out);
  TensorTask tk;
  if (has_k) tk = make_task(plan, be, k_in, k_out);
  const bool need_f32_row = tq.mode != Mode::f64 || plan.recipe != Recipe::accurate || (has_k && tk.mode != Mode::f64);

  const std::int64_t T = q_in.tokens;
  const int nt = thread_count(opts, T);
  std::vector<RowEngine> engines;  // per-thread scratch, allocated before the parallel region
  engines.reserve(static_cast<std::size_t>(nt));
  for (int i = 0; i < nt; ++i) engines.emplace_back(plan, be);

#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (std::int64_t t = 0; t < T; ++t) {
    RowEngine& eng = engines[static_cast<std::size_t>(thread_index())];
    eng.angles(positions.at(t));
    if (need_f32_row) eng.cos_sin();
    eng.prepare(tq.mode);
    run_task(tq, plan, eng, t);
    if (has_k) {
      if (tk.mode != tq.mode) eng.prepare(tk.mode);
      run_task(tk, plan, eng, t);
    }
  }
}

namespace {

// One row of `n` cos / sin values (f32, or binary64 when `d` is set) rounded to the table dtype, then
// stored as `dtype`.
void store_row(const float* v, const double* d, std::int64_t n, DType table, DType dtype, void* out, std::int64_t offset) {
  if (d == nullptr && dtype == DType::f32 && (table == DType::f32 || table == DType::f64)) {  // no rounding at all
    std::memcpy(static_cast<float*>(out) + offset, v, static_cast<std::size_t>(n) * sizeof(float));
    return;
  }
  for (std::int64_t j = 0; j < n; ++j) {
    const std::int64_t o = offset + j;
    if (d != nullptr) {  // binary64 values (accurate, f64)
      detail::store_double<DType::f64>(out, o, d[j]);
      continue;
    }
    const float r = round_to_dtype(v[j], table == DType::f64 ? DType::f32 : table);
    switch (dtype) {
      case DType::f32: detail::store_float<DType::f32>(out, o, r); break;
      case DType::f64: detail::store_float<DType::f64>(out, o, r); break;
      case DType::bf16: detail::store_float<DType::bf16>(out, o, r); break;
      case DType::f16: detail::store_float<DType::f16>(out, o, r); break;
    }
  }
}

}  // namespace

void rope_cos_sin_table(const RopePlan& plan, const PositionsView& positions, void* cos_out, void* sin_out, DType dtype,
                        const KernelOptions& opts) {
  check_positions(positions, positions.tokens);
  if (positions.tokens < 0) fail("positions.tokens is negative");
  if (positions.tokens > 0 && (cos_out == nullptr || sin_out == nullptr)) fail("cos_out / sin_out is null");
  const Backend& be = choose_backend(opts);
  const DType table = table_dtype(plan.recipe, dtype);
  const bool f64_values = table == DType::f64 && plan.recipe == Recipe::accurate;
  const std::int64_t T = positions.tokens, P = plan.pairs;
  const int nt = thread_count(opts, T);
  std::vector<RowEngine> engines;
  engines.reserve(static_cast<std::size_t>(nt));
  for (int i = 0; i < nt; ++i) engines.emplace_back(plan, be);

#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (std::int64_t t = 0; t < T; ++t) {
    RowEngine& eng = engines[static_cast<std::size_t>(thread_index())];
    eng.angles(positions.at(t));
    if (f64_values) {
      eng.cos_sin_f64();
      store_row(nullptr, eng.cd(), P, table, dtype, cos_out, t * P);
      store_row(nullptr, eng.sd(), P, table, dtype, sin_out, t * P);
    } else {
      eng.cos_sin();
      store_row(eng.c(), nullptr, P, table, dtype, cos_out, t * P);
      store_row(eng.s(), nullptr, P, table, dtype, sin_out, t * P);
    }
  }
}

void sinusoidal_table(const SinusoidalSpec& spec, Recipe recipe, std::span<const std::int64_t> positions, void* out,
                      DType dtype, const KernelOptions& opts) {
  EncodingSpec e;
  e.family = Family::sinusoidal;
  e.sinusoidal = spec;
  validate(e);
  if (!positions.empty() && out == nullptr) fail("out is null");
  const Backend& be = choose_backend(opts);
  const DType table = table_dtype(recipe, dtype);
  const bool f64_values = table == DType::f64 && recipe == Recipe::accurate;
  const int n = sinusoidal_frequency_count(spec), d = spec.d_model;

  // Frequencies the recipe's way: binary64 for accurate, the f32 formulas otherwise, the known-bad
  // frequency recipes rounding them.
  const std::vector<double> w64 = sinusoidal_frequencies<double>(spec);
  std::vector<float> w32 = hf_sinusoidal_frequencies_f32(spec);
  if (recipe == Recipe::bf16_inv_freq)
    for (float& w : w32) w = round_to_dtype(w, DType::bf16);
  if (recipe == Recipe::f16_inv_freq)
    for (float& w : w32) w = round_to_dtype(w, DType::f16);
  std::vector<SinusoidalColumn> cols;
  cols.reserve(static_cast<std::size_t>(d));
  for (int c = 0; c < d; ++c) cols.push_back(sinusoidal_column(spec, c));

  const auto T = static_cast<std::int64_t>(positions.size());
  const int nt = thread_count(opts, T);
  const auto nn = static_cast<std::size_t>(n);
  // Per-thread scratch: angles (f64, f32), sin, cos (f32, f64), one output row of floats.
  struct Scratch {
    std::vector<double> td, sd, cd;
    std::vector<float> tf, s, c, row;
    std::vector<double> rowd;
  };
  std::vector<Scratch> scratch(static_cast<std::size_t>(nt));
  for (Scratch& s : scratch) {
    s.td.resize(nn), s.sd.resize(nn), s.cd.resize(nn), s.tf.resize(nn), s.s.resize(nn), s.c.resize(nn);
    s.row.resize(static_cast<std::size_t>(d)), s.rowd.resize(static_cast<std::size_t>(d));
  }

#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (std::int64_t t = 0; t < T; ++t) {
    Scratch& sc = scratch[static_cast<std::size_t>(thread_index())];
    const std::int64_t p = positions[static_cast<std::size_t>(t)] + spec.position_offset;
    if (recipe == Recipe::accurate) {
      const auto pd = static_cast<double>(p);
      for (std::size_t i = 0; i < nn; ++i) sc.td[i] = pd * w64[i];
    } else {
      const float pf = detail::recipe_position_f32(recipe, p);
      for (std::size_t i = 0; i < nn; ++i) {
        sc.tf[i] = pf * w32[i];
        sc.td[i] = static_cast<double>(sc.tf[i]);
      }
    }
    if (f64_values) {
      for (std::size_t i = 0; i < nn; ++i) {
        sc.sd[i] = std::sin(sc.td[i]);
        sc.cd[i] = std::cos(sc.td[i]);
      }
      for (int c = 0; c < d; ++c) {
        const SinusoidalColumn& col = cols[static_cast<std::size_t>(c)];
        const auto f = static_cast<std::size_t>(col.frequency);
        sc.rowd[static_cast<std::size_t>(c)] =
            col.kind == SinusoidalKind::zero ? 0.0 : (col.kind == SinusoidalKind::sine ? sc.sd[f] : sc.cd[f]);
      }
      store_row(nullptr, sc.rowd.data(), d, table, dtype, out, t * d);
      continue;
    }
    if (recipe == Recipe::fast_sincos)
      be.fast_sincos(sc.tf.data(), n, sc.s.data(), sc.c.data());
    else
      be.sincos(sc.td.data(), n, sc.s.data(), sc.c.data());
    for (int c = 0; c < d; ++c) {
      const SinusoidalColumn& col = cols[static_cast<std::size_t>(c)];
      const auto f = static_cast<std::size_t>(col.frequency);
      sc.row[static_cast<std::size_t>(c)] =
          col.kind == SinusoidalKind::zero ? 0.0f : (col.kind == SinusoidalKind::sine ? sc.s[f] : sc.c[f]);
    }
    store_row(sc.row.data(), nullptr, d, table, dtype, out, t * d);
  }
}

}  // namespace ropecheck::kernels
