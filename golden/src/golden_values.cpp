// The golden values of one run (golden_values.hpp): the exact reference's values correctly rounded to
// each dtype, computed on worker threads block by block and written at their tokens' place.
#include "golden_values.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>

#include "ropecheck/golden/input_generator.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/reference/fast_rounding.hpp"
#include "ropecheck/reference/mpfr_value.hpp"

namespace ropecheck::golden::detail {
namespace {

using Clock = std::chrono::steady_clock;

// Output buffers of one dtype.
struct DtypeOutputs {
  DType dtype;
  Tensor cos, sin, q_rot, k_rot, pe;
};

void run_parallel(std::int64_t tokens, int threads, const std::function<void(std::int64_t, std::int64_t)>& progress,
                  const std::function<void(std::int64_t begin, std::int64_t end, std::atomic<std::int64_t>& done)>& work) {
  std::atomic<std::int64_t> done{0};
  std::vector<std::thread> pool;
  std::exception_ptr error;
  std::mutex error_mutex;
  // Contiguous chunks: each token is computed independently, so any split gives the same bytes.
  const std::int64_t chunk = (tokens + threads - 1) / threads;
  std::string spawn_error;
  for (int t = 0; t < threads; ++t) {
    const std::int64_t b = std::min(tokens, t * chunk), e = std::min(tokens, (t + 1) * chunk);
    try {
      pool.emplace_back([&, b, e] {
        const MpfrThreadCaches mpfr_caches;  // the fast rounding engine's Ziv fallback calls MPFR
        try {
          work(b, e, done);
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (!error) error = std::current_exception();
        }
      });
    } catch (const std::system_error& ex) {
      // Out of threads (a pids limit, an address-space limit): the started ones finish, then exit 2.
      spawn_error = ex.code().message();
      break;
    }
  }
  if (!spawn_error.empty()) {
    for (auto& th : pool) th.join();
    throw SpecError("--threads " + std::to_string(threads) + ": cannot start worker thread " +
                    std::to_string(pool.size() + 1) + " (" + spawn_error + "); use a smaller --threads");
  }
  if (progress) {
    auto last = Clock::now();
    while (done.load() < tokens) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (error) break;
      }
      if (Clock::now() - last > std::chrono::milliseconds(250)) {
        progress(done.load(), tokens);
        last = Clock::now();
      }
    }
  }
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
  if (progress) progress(tokens, tokens);
}

std::span<const std::uint8_t> bytes_of(const Tensor& t) { return {t.data.data(), t.data.size()}; }

// positions: [tokens] or [3, tokens], one stream at a time
void write_positions(const RunPlan& plan, detail::GoldenFiles& files) {
  std::vector<std::int64_t> pv(static_cast<std::size_t>(plan.tokens));
  for (int s = 0; s < plan.streams; ++s) {
    for (std::int64_t t = 0; t < plan.tokens; ++t) {
      const Position& p = plan.positions[static_cast<std::size_t>(t)];
      pv[static_cast<std::size_t>(t)] = s == 0 ? p.t : s == 1 ? p.h : p.w;
    }
    files.group(0).write(0, static_cast<std::uint64_t>(s * plan.file_tokens() + plan.at_token()) * 8,
                         {reinterpret_cast<const std::uint8_t*>(pv.data()), pv.size() * 8});
  }
}

// One block of tokens [start, start + tokens) of the run: its inputs (RoPE) and its output buffers.
struct Block {
  std::int64_t start = 0, tokens = 0;
  std::vector<float> q, k;
  std::vector<DtypeOutputs> outs;
};

// The values, correctly rounded from the exact reference, computed block by block on the worker
// threads and written at their place in the files.
class ValueWriter {
 public:
  ValueWriter(const GoldenOptions& opt, const RunPlan& plan, detail::GoldenFiles& files)
      : opt_(opt), plan_(plan), files_(files), hd_(static_cast<std::size_t>(plan.H * plan.D)),
        kw_(static_cast<std::size_t>(plan.KW)) {
    if (plan.rope) {
      rope_engine_ = std::make_unique<const RopeRoundingEngine>(opt.spec.rope, plan.seq_len, plan.max_pos);
      // Heads [0, H) are q, [H, 2H) are k: each normalized by its input's stage (weights filled in).
      if (has_qk_norm(opt.spec.rope))
        for (std::int64_t h = 0; h < 2 * plan.H; ++h) norms_.push_back(norm_stage(opt.spec.rope, h < plan.H ? "q" : "k"));
      if (opt.spec.rope.key_layout == KeyLayout::k_pe)  // MLA: the key is the rotary slice alone, one a token
        key_engine_ = std::make_unique<const RopeRoundingEngine>(key_rope(opt.spec.rope), plan.seq_len, plan.max_pos);
    } else {
      sin_engine_ = std::make_unique<const SinusoidalRoundingEngine>(opt.spec.sinusoidal, plan.max_pos);
    }
  }

  void write_all() {
    if (has_whole_tensor_store(plan_)) {  // their scales take the amax over every token: q_rot, k_rot held whole
      whole_q_ = make_zeros("q_rot.f64", TensorDType::f64, {plan_.tokens, plan_.H, plan_.D});
      whole_k_ = make_zeros("k_rot.f64", TensorDType::f64, {plan_.tokens, plan_.H, plan_.D});
    }
    for (std::int64_t tb = 0; tb < plan_.tokens; tb += plan_.block) {
      const std::int64_t bt = std::min(plan_.block, plan_.tokens - tb);
      if (plan_.rope)
        rope_block(tb, bt);
      else
        sinusoidal_block(tb, bt);
    }
    if (!whole_q_.data.empty()) write_store_block(plan_, files_, plan_.stores_group, 0, whole_q_, whole_k_, true);
  }
  std::int64_t fast_values() const { return fast_.load(); }
  std::int64_t fallback_values() const { return fallback_.load(); }

 private:
  std::vector<const RmsNormStage*> norms_;  // per evaluated head; empty: the spec has no norm stage
  using Work = std::function<void(std::int64_t, std::int64_t, std::atomic<std::int64_t>&)>;

  // Runs `work` over the block's tokens, reporting progress over the run's.
  void run_block(const Block& blk, const Work& work) {
    std::function<void(std::int64_t, std::int64_t)> progress;
    if (opt_.progress)
      progress = [&](std::int64_t done, std::int64_t) { opt_.progress(blk.start + done, plan_.tokens); };
    run_parallel(blk.tokens, plan_.threads, progress, work);
  }

  void rope_block(std::int64_t tb, std::int64_t bt) {
    Block blk{tb, bt, {}, {}, {}};
    const std::uint64_t first = static_cast<std::uint64_t>(plan_.first + tb), n = static_cast<std::uint64_t>(bt);
    blk.q = generate_inputs(opt_.seed, InputStream::q, n * hd_, first * hd_);
    blk.k = generate_inputs(opt_.seed, InputStream::k, n * kw_, first * kw_);  // k, or k_pe (kw_ a token)
    const std::int64_t H = plan_.H, D = plan_.D, P = plan_.P;
    for (DType d : plan_.dtypes) {
      const std::string s(to_string(d));
      blk.outs.push_back({d, make_zeros("cos." + s, tensor_dtype(d), {bt, P}), make_zeros("sin." + s, tensor_dtype(d), {bt, P}),
                          make_zeros("q_rot." + s, tensor_dtype(d), {bt, H, D}),
                          key_engine_ ? make_zeros("k_pe_rot." + s, tensor_dtype(d), {bt, plan_.KW})
                                      : make_zeros("k_rot." + s, tensor_dtype(d), {bt, H, D}),
                          {}});
    }
    run_block(blk, [&](std::int64_t b, std::int64_t e, std::atomic<std::int64_t>& done) { rope_tokens(blk, b, e, done); });
    const std::uint64_t in_token = static_cast<std::uint64_t>(plan_.at_token() + tb);
    files_.group(0).write(1, in_token * hd_ * 4, {reinterpret_cast<const std::uint8_t*>(blk.q.data()), blk.q.size() * 4});
    files_.group(0).write(2, in_token * kw_ * 4, {reinterpret_cast<const std::uint8_t*>(blk.k.data()), blk.k.size() * 4});
    for (std::size_t d = 0; d < blk.outs.size(); ++d) {
      const DtypeOutputs& o = blk.outs[d];
      const std::uint64_t sz = dtype_size(o.cos.dtype), t0b = static_cast<std::uint64_t>(plan_.at_token() + tb);
      files_.group(1 + d).write(0, t0b * static_cast<std::uint64_t>(P) * sz, bytes_of(o.cos));
      files_.group(1 + d).write(1, t0b * static_cast<std::uint64_t>(P) * sz, bytes_of(o.sin));
      files_.group(1 + d).write(2, t0b * hd_ * sz, bytes_of(o.q_rot));
      files_.group(1 + d).write(3, t0b * kw_ * sz, bytes_of(o.k_rot));
    }
    if (!plan_.stores.empty())  // from the f64 outputs (dtypes[0])
      write_store_block(plan_, files_, plan_.stores_group, plan_.at_token() + tb, blk.outs[0].q_rot, blk.outs[0].k_rot);
    if (!whole_q_.data.empty()) {  // kept for the whole-tensor stores (write_all)
      const auto at = [tb](std::size_t per_token) { return static_cast<std::ptrdiff_t>(static_cast<std::size_t>(tb) * per_token * 8); };
      std::copy(blk.outs[0].q_rot.data.begin(), blk.outs[0].q_rot.data.end(), whole_q_.data.begin() + at(hd_));
      std::copy(blk.outs[0].k_rot.data.begin(), blk.outs[0].k_rot.data.end(), whole_k_.data.begin() + at(kw_));
    }
  }

  // Tokens [b, e) of a block, on one worker thread.
  void rope_tokens(Block& blk, std::int64_t b, std::int64_t e, std::atomic<std::int64_t>& done) {
    const std::size_t n = plan_.dtypes.size(), hd = hd_, kw = kw_, P = static_cast<std::size_t>(plan_.P);
    // q and a per-head k share one evaluation: heads [0, H) are q, [H, 2H) are k. A k_pe key (MLA) is
    // one head of the key engine's, after q's; its cos / sin are the same values, kept aside.
    std::vector<std::vector<double>> c(n, std::vector<double>(P)), s = c, kc = c, ks = c;
    std::vector<std::vector<double>> rot(n, std::vector<double>(hd + kw));
    std::vector<double> x(hd + kw);
    std::vector<RoundedOut> rounded(n), key_rounded(n);
    for (std::size_t d = 0; d < n; ++d) {
      rounded[d] = {c[d].data(), s[d].data(), rot[d].data()};
      key_rounded[d] = {kc[d].data(), ks[d].data(), rot[d].data() + hd};
    }
    RoundingStats stats;
    for (std::int64_t t = b; t < e; ++t) {
      const std::size_t base = static_cast<std::size_t>(t) * hd, kbase = static_cast<std::size_t>(t) * kw;
      for (std::size_t i = 0; i < hd; ++i) x[i] = blk.q[base + i];
      for (std::size_t i = 0; i < kw; ++i) x[hd + i] = blk.k[kbase + i];
      const Position& pos = plan_.positions[static_cast<std::size_t>(blk.start + t)];
      if (key_engine_) {
        rope_engine_->evaluate(pos, std::span<const double>(x).first(hd), static_cast<int>(plan_.H), plan_.dtypes, rounded,
                               stats);
        key_engine_->evaluate(pos, std::span<const double>(x).subspan(hd), 1, plan_.dtypes, key_rounded, stats);
      } else if (norms_.empty()) {
        rope_engine_->evaluate(pos, x, static_cast<int>(2 * plan_.H), plan_.dtypes, rounded, stats);
      } else {  // heads [0, H) q, [H, 2H) k, each normalized by its stage first (no norm with MLA: spec.cpp)
        rope_engine_->evaluate_normed(pos, x, static_cast<int>(2 * plan_.H), norms_, plan_.dtypes, rounded, stats);
      }
      for (std::size_t d = 0; d < n; ++d) {
        DtypeOutputs& o = blk.outs[d];
        const std::size_t sz = dtype_size(o.cos.dtype);
        const std::size_t row = static_cast<std::size_t>(t) * P * sz;
        for (std::size_t j = 0; j < P; ++j) {
          store_element(o.cos.data.data() + row + j * sz, c[d][j], o.dtype);
          store_element(o.sin.data.data() + row + j * sz, s[d][j], o.dtype);
        }
        for (std::size_t i = 0; i < hd; ++i) store_element(o.q_rot.data.data() + (base + i) * sz, rot[d][i], o.dtype);
        for (std::size_t i = 0; i < kw; ++i) store_element(o.k_rot.data.data() + (kbase + i) * sz, rot[d][hd + i], o.dtype);
      }
      done.fetch_add(1, std::memory_order_relaxed);
    }
    fast_ += stats.fast_values;
    fallback_ += stats.fallback_values;
  }

  void sinusoidal_block(std::int64_t tb, std::int64_t bt) {
    Block blk{tb, bt, {}, {}, {}};
    const int dm = opt_.spec.sinusoidal.d_model;
    for (DType d : plan_.dtypes)
      blk.outs.push_back({d, {}, {}, {}, {}, make_zeros("pe." + std::string(to_string(d)), tensor_dtype(d), {bt, dm})});
    run_block(blk, [&](std::int64_t b, std::int64_t e, std::atomic<std::int64_t>& done) { sinusoidal_tokens(blk, b, e, done); });
    for (std::size_t d = 0; d < blk.outs.size(); ++d)
      files_.group(1 + d).write(0, static_cast<std::uint64_t>(plan_.at_token() + tb) * static_cast<std::uint64_t>(dm) * dtype_size(blk.outs[d].pe.dtype),
                                bytes_of(blk.outs[d].pe));
  }

  void sinusoidal_tokens(Block& blk, std::int64_t b, std::int64_t e, std::atomic<std::int64_t>& done) {
    const std::size_t n = plan_.dtypes.size(), dm = static_cast<std::size_t>(opt_.spec.sinusoidal.d_model);
    std::vector<std::vector<double>> row(n, std::vector<double>(dm));
    std::vector<double*> ptrs(n);
    for (std::size_t d = 0; d < n; ++d) ptrs[d] = row[d].data();
    RoundingStats stats;
    for (std::int64_t t = b; t < e; ++t) {
      sin_engine_->evaluate(plan_.positions[static_cast<std::size_t>(blk.start + t)].t, plan_.dtypes, ptrs, stats);
      for (std::size_t d = 0; d < n; ++d) {
        DtypeOutputs& o = blk.outs[d];
        const std::size_t sz = dtype_size(o.pe.dtype);
        for (std::size_t c = 0; c < dm; ++c)
          store_element(o.pe.data.data() + (static_cast<std::size_t>(t) * dm + c) * sz, row[d][c], o.dtype);
      }
      done.fetch_add(1, std::memory_order_relaxed);
    }
    fast_ += stats.fast_values;
    fallback_ += stats.fallback_values;
  }

  const GoldenOptions& opt_;
  const RunPlan& plan_;
  detail::GoldenFiles& files_;
  const std::size_t hd_;  // RoPE: one token's values of q, H * D
  const std::size_t kw_;  // RoPE: one token's values of k (H * D) or k_pe (rotary_dim)
  std::unique_ptr<const RopeRoundingEngine> rope_engine_;
  std::unique_ptr<const RopeRoundingEngine> key_engine_;  // MLA's k_pe key only
  std::unique_ptr<const SinusoidalRoundingEngine> sin_engine_;
  std::atomic<std::int64_t> fast_{0}, fallback_{0};
  Tensor whole_q_, whole_k_;  // the run's f64 q_rot, k_rot when a store needs them whole (else empty)
};

}  // namespace

ValueCounts write_values(const GoldenOptions& opt, const RunPlan& plan, GoldenFiles& files) {
  write_positions(plan, files);
  ValueWriter values(opt, plan, files);
  values.write_all();
  return {values.fast_values(), values.fallback_values()};
}

}  // namespace ropecheck::golden::detail
