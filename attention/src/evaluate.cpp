// block() and pairs(): the fast path for every value, the fallback for what it leaves, over worker threads.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "engine_impl.hpp"

namespace ropecheck::attention {
namespace {

using detail::Impl;
using detail::Logit;

// Runs fn(index, worker) for index < count on `threads` threads (0: the hardware's count); the first
// exception stops the others and is rethrown.
template <class F>
void parallel_for(std::size_t count, int threads, F&& fn) {
  int n = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(n), std::max<std::size_t>(count, 1)));
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto body = [&](int worker) {
    MpfrThreadCaches caches;
    try {
      for (std::size_t i = next++; i < count && !stop; i = next++) fn(i, worker);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      stop = true;
    }
  };
  if (n == 1) {
    body(0);
  } else {
    std::vector<std::thread> pool;
    for (int w = 0; w < n; ++w) pool.emplace_back(body, w);
    for (std::thread& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);
}

int worker_count(const Impl& m) {
  return m.options.threads > 0 ? m.options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void check_inputs(const Impl& m, std::span<const Position> positions, std::span<const double> q,
                  std::span<const double> k, std::span<const double> v, std::span<const DType> dtypes,
                  std::span<const AttentionOut> out, bool want_outputs) {
  auto bad = [](const std::string& what) { throw std::invalid_argument("ropecheck: attention: " + what); };
  const std::size_t T = positions.size(), D = static_cast<std::size_t>(m.D), G = static_cast<std::size_t>(m.G);
  if (dtypes.size() > 4 || out.size() != dtypes.size()) bad("one AttentionOut per dtype, at most 4");
  if (q.size() != T * G * D) bad("q needs tokens * group * head_dim values");
  if (k.size() != T * D) bad("k needs tokens * head_dim values");
  if (!v.empty() && v.size() != T * static_cast<std::size_t>(m.Dv)) bad("v needs tokens * value_dim values");
  for (const AttentionOut& o : out)
    if (o.outputs && !(want_outputs && !v.empty())) bad("outputs need a block and v");
  for (const Position& p : positions)
    for (std::int64_t x : {p.t, p.h, p.w})
      if (x > kMaxPosition || x < -kMaxPosition) bad("position " + std::to_string(x) + " is beyond +-2^53");
  for (std::span<const double> s : {q, k, v})
    for (double x : s)
      if (!std::isfinite(x)) bad("inputs must be finite");
}

// Rounds a fast value for every dtype that wants it (want[d]); sets need[d] for those the fast path
// cannot settle (or every inexact one under force_fallback). Returns whether any needs the fallback.
bool settle_fast(const Impl& m, DD v, double err, std::span<const DType> dtypes, const bool* want, double* results,
                 unsigned char* need, RoundingStats& stats) {
  bool any = false;
  for (std::size_t d = 0; d < dtypes.size(); ++d) {
    need[d] = 0;
    if (!want[d]) continue;
    std::optional<double> r;
    if (err < INFINITY && !(m.options.force_fallback && err != 0.0)) r = round_dd(v.hi, v.lo, err, dtypes[d]);
    if (r) {
      results[d] = *r;
      ++stats.fast_values;
    } else {
      need[d] = 1;
      any = true;
    }
  }
  return any;
}

struct Worker {
  RoundingStats stats;
  std::vector<DD> dots;
  std::vector<Logit> logits;
  detail::RowScratch row;
  std::vector<DD> o;
  std::vector<double> o_err, results;
  std::vector<unsigned char> need;
};

// One query head's row of a block: its scores and its outputs.
struct BlockRun {
  const Impl& m;
  std::span<const Position> positions;
  std::span<const double> q, k, v;
  std::span<const DType> dtypes;
  std::span<const AttentionOut> out;
  const detail::RotatedSet& Q;
  const detail::RotatedSet& K;
  const detail::KeyPanel& panel;
  const BlockLayout& layout;
  const std::vector<double>& v_max;

  void logits(std::int64_t i, int h, Worker& w) const;
  void scores(std::int64_t i, int h, Worker& w) const;
  void outputs(std::int64_t i, int h, Worker& w) const;
};

void BlockRun::logits(std::int64_t i, int h, Worker& w) const {
  const KeyRange kr = layout.keys(i);
  const std::size_t n = static_cast<std::size_t>(kr.size());
  w.dots.resize(n);
  w.logits.resize(n);
  detail::dots(Q.h(i, h), Q.l(i, h), panel, kr.first, kr.size(), w.dots.data());
  const std::size_t qi = Q.at(i, h);
  for (std::size_t j = 0; j < n; ++j) {
    const std::size_t kj = K.at(kr.first + static_cast<std::int64_t>(j), 0);
    const double err = detail::rotated_dot_error(m.D, Q.norm_hi[qi], Q.norm_err[qi], K.norm_hi[kj], K.norm_err[kj]);
    w.logits[j] = detail::finish_logit(m, w.dots[j], err);
  }
}

void BlockRun::scores(std::int64_t i, int h, Worker& w) const {
  const std::size_t nd = dtypes.size(), D = static_cast<std::size_t>(m.D);
  bool want[4];
  for (std::size_t d = 0; d < nd; ++d) want[d] = out[d].scores != nullptr;
  const KeyRange kr = layout.keys(i);
  const std::size_t base = static_cast<std::size_t>(h) * static_cast<std::size_t>(layout.total()) +
                           static_cast<std::size_t>(layout.offset(i));
  double results[4];
  unsigned char need[4];
  for (std::size_t j = 0; j < w.logits.size(); ++j) {
    if (settle_fast(m, w.logits[j].v, w.logits[j].err, dtypes, want, results, need, w.stats)) {
      const std::int64_t key = kr.first + static_cast<std::int64_t>(j);
      const double* qh = q.data() + (static_cast<std::size_t>(i) * static_cast<std::size_t>(m.G) + static_cast<std::size_t>(h)) * D;
      for (std::size_t d = 0; d < nd; ++d) w.stats.fallback_values += need[d];
      detail::ziv_logit(m, positions[static_cast<std::size_t>(i)], qh, positions[static_cast<std::size_t>(key)],
                        k.data() + static_cast<std::size_t>(key) * D, dtypes, results, need);
    }
    for (std::size_t d = 0; d < nd; ++d)
      if (want[d]) out[d].scores[base + j] = results[d];
  }
}

void BlockRun::outputs(std::int64_t i, int h, Worker& w) const {
  const std::size_t nd = dtypes.size(), dv = static_cast<std::size_t>(m.Dv), D = static_cast<std::size_t>(m.D);
  bool want[4];
  for (std::size_t d = 0; d < nd; ++d) want[d] = out[d].outputs != nullptr;
  const KeyRange kr = layout.keys(i);
  const double* sink = m.sinks.empty() ? nullptr : &m.sinks[static_cast<std::size_t>(h)];
  w.o.resize(dv);
  w.o_err.resize(dv);
  w.results.assign(dv * nd, 0.0);
  w.need.assign(dv * nd, 0);
  detail::output_row(m, w.logits, sink, v.data(), v_max.data(), kr.first, w.row, w.o.data(), w.o_err.data());
  bool any = false;
  for (std::size_t c = 0; c < dv; ++c)
    any = settle_fast(m, w.o[c], w.o_err[c], dtypes, want, &w.results[c * nd], &w.need[c * nd], w.stats) || any;
  if (any) {
    for (unsigned char f : w.need) w.stats.fallback_values += f;
    const std::size_t first = static_cast<std::size_t>(kr.first);
    const double* qh = q.data() + (static_cast<std::size_t>(i) * static_cast<std::size_t>(m.G) + static_cast<std::size_t>(h)) * D;
    detail::ziv_row(m, positions[static_cast<std::size_t>(i)], qh, positions.subspan(first, static_cast<std::size_t>(kr.size())),
                    k.data() + first * D, v.data() + first * dv, sink, dtypes, w.results.data(), w.need.data());
  }
  const std::size_t o_base = (static_cast<std::size_t>(i) * static_cast<std::size_t>(m.G) + static_cast<std::size_t>(h)) * dv;
  for (std::size_t d = 0; d < nd; ++d)
    if (want[d])
      for (std::size_t c = 0; c < dv; ++c) out[d].outputs[o_base + c] = w.results[c * nd + d];
}

}  // namespace

void AttentionEngine::block(std::span<const Position> positions, std::span<const double> q, std::span<const double> k,
                            std::span<const double> v, std::span<const DType> dtypes, std::span<const AttentionOut> out,
                            RoundingStats& stats) const {
  const Impl& m = *impl_;
  check_inputs(m, positions, q, k, v, dtypes, out, true);
  const std::int64_t T = static_cast<std::int64_t>(positions.size());
  const detail::RotatedSet Q = detail::rotate_tokens(m, positions, q, m.G);
  const detail::RotatedSet K = detail::rotate_tokens(m, positions, k, 1);
  const detail::KeyPanel panel = detail::make_panel(K);
  const BlockLayout layout(m.attn, T);
  std::vector<double> v_max(static_cast<std::size_t>(m.Dv), 0.0);
  for (std::size_t j = 0; j < v.size(); ++j) v_max[j % v_max.size()] = std::max(v_max[j % v_max.size()], std::fabs(v[j]));
  bool want_scores = false, want_outputs = false;
  for (const AttentionOut& o : out) {
    want_scores = want_scores || o.scores;
    want_outputs = want_outputs || o.outputs;
  }
  // Rows by decreasing length, so that the threads finish together.
  std::vector<std::int64_t> order(static_cast<std::size_t>(T * m.G));
  for (std::size_t t = 0; t < order.size(); ++t) order[t] = static_cast<std::int64_t>(t);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return layout.keys(a / m.G).size() > layout.keys(b / m.G).size();
  });
  const BlockRun run{m, positions, q, k, v, dtypes, out, Q, K, panel, layout, v_max};
  std::vector<Worker> workers(static_cast<std::size_t>(worker_count(m)));
  parallel_for(order.size(), m.options.threads, [&](std::size_t t, int wi) {
    Worker& w = workers[static_cast<std::size_t>(wi)];
    const std::int64_t i = order[t] / m.G;
    const int h = static_cast<int>(order[t] % m.G);
    run.logits(i, h, w);
    if (want_scores) run.scores(i, h, w);
    if (want_outputs) run.outputs(i, h, w);
  });
  for (const Worker& w : workers) stats += w.stats;
}

void AttentionEngine::pairs(std::span<const Position> positions, std::span<const double> q, std::span<const double> k,
                            std::span<const std::int64_t> query_token, std::span<const std::int64_t> key_token,
                            std::span<const DType> dtypes, std::span<const AttentionOut> out, RoundingStats& stats) const {
  const Impl& m = *impl_;
  check_inputs(m, positions, q, k, {}, dtypes, out, false);
  const std::int64_t T = static_cast<std::int64_t>(positions.size());
  if (query_token.size() != key_token.size()) throw std::invalid_argument("ropecheck: attention: one key per query");
  for (std::span<const std::int64_t> s : {query_token, key_token})
    for (std::int64_t t : s)
      if (t < 0 || t >= T) throw std::invalid_argument("ropecheck: attention: token index out of range");
  const detail::RotatedSet Q = detail::rotate_tokens(m, positions, q, m.G);
  const detail::RotatedSet K = detail::rotate_tokens(m, positions, k, 1);
  const std::size_t n = query_token.size(), nd = dtypes.size(), D = static_cast<std::size_t>(m.D);
  bool want[4];
  for (std::size_t d = 0; d < nd; ++d) want[d] = out[d].scores != nullptr;
  std::vector<Worker> workers(static_cast<std::size_t>(worker_count(m)));
  constexpr std::size_t kChunk = 256;
  parallel_for((n + kChunk - 1) / kChunk, m.options.threads, [&](std::size_t chunk, int wi) {
    Worker& w = workers[static_cast<std::size_t>(wi)];
    double results[4];
    unsigned char need[4];
    for (std::size_t p = chunk * kChunk; p < std::min(n, (chunk + 1) * kChunk); ++p) {
      const std::int64_t qi = query_token[p], kj = key_token[p];
      for (int h = 0; h < m.G; ++h) {
        const std::size_t a = Q.at(qi, h), b = K.at(kj, 0);
        const DD dot = detail::dot_one(Q.h(qi, h), Q.l(qi, h), K.h(kj, 0), K.l(kj, 0), m.D);
        const double err = detail::rotated_dot_error(m.D, Q.norm_hi[a], Q.norm_err[a], K.norm_hi[b], K.norm_err[b]);
        const Logit l = detail::finish_logit(m, dot, err);
        if (settle_fast(m, l.v, l.err, dtypes, want, results, need, w.stats)) {
          for (std::size_t d = 0; d < nd; ++d) w.stats.fallback_values += need[d];
          detail::ziv_logit(m, positions[static_cast<std::size_t>(qi)], q.data() + a * D,
                            positions[static_cast<std::size_t>(kj)], k.data() + static_cast<std::size_t>(kj) * D,
                            dtypes, results, need);
        }
        for (std::size_t d = 0; d < nd; ++d)
          if (want[d]) out[d].scores[static_cast<std::size_t>(h) * n + p] = results[d];
      }
    }
  });
  for (const Worker& w : workers) stats += w.stats;
}

}  // namespace ropecheck::attention
