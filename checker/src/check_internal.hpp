// What the checker's units share (private to golden/): name helpers, the number format of the
// text report and the one-tensor check that check_candidate runs per matched output.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <atomic>
#include <cstdint>
#include <thread>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ropecheck/checker/check_part.hpp"
#include "ropecheck/checker/candidate_source.hpp"
#include "ropecheck/checker/checker.hpp"
#include <memory>

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

// What check_candidate_part matched (check_match.cpp): golden outputs checked (golden order) with the
// candidate tensor answering each, and the report's lists. InputError for unusable names or shapes
// (checker.hpp). A shape mismatch reads the candidate tensor whole (when it fits in half of
// options.max_memory) to name a known slip (shape_slip).
// What was asked for (CheckOptions::only), given which golden outputs a candidate tensor answers (the
// f64 truth copy counts only when matched or named); InputError for an --only item the set lacks.
std::set<std::string> asked_outputs(const GoldenSet& golden, const CheckOptions& options,
                                    const std::map<std::string, std::size_t>& match);
// A part's header: the set, the criterion and the shard's tokens.
CheckPart part_header(const GoldenSet& golden, const CheckOptions& options, const Shard& shard);

// The golden tensors a candidate tensor can answer: the outputs (manifest order), then the attention
// scores (scores.hpp, score_outputs), the attention outputs (attention_outputs.hpp), then the quantized stores
// (stores.hpp, store_outputs).
std::vector<std::string> judged_names(const GoldenSet& golden);

struct Matched {
  std::vector<std::pair<std::string, std::size_t>> checked;
  std::optional<std::pair<std::string, std::size_t>> scores;  // the scores tensor answered (at most one dtype)
  std::vector<std::pair<std::string, std::size_t>> attention;  // the attention outputs answered, one per dtype
  std::vector<std::pair<std::string, std::size_t>> stores;    // the quantized stores answered (stores.hpp)
  std::vector<std::string> ignored, unchecked, not_tested;
};
Matched match_candidate(const GoldenSet& golden, CandidateSource& source, const CheckOptions& options);

// shape_slip (diagnose.hpp) of tensor i of `source` against `golden_shape`: a cos / sin table is read
// whole for it when it fits in max_bytes (else no slip is named).
std::string shape_slip_of(CandidateSource& source, std::size_t i, const std::string& base,
                          const std::vector<std::int64_t>& golden_shape, std::uint64_t max_bytes);

// The check of shard `shard` of the golden set's tokens with the candidate read from `source` a block
// of tokens at a time (check_stream.cpp): prepares the source, matches its tensors, hashes the golden
// files this part verifies (files_hashed_by) while it reads them, and waits for those hashes before it
// returns (InputError "manifest hash mismatch for FILE").
CheckPart stream_check_part(const GoldenSet& golden, CandidateSource& source, const CheckOptions& options, const Shard& shard);

// What a budget keeps back from --max-memory for the process itself (code, heap, the workers' statistics).
inline constexpr std::uint64_t kProcessReserve = std::uint64_t{64} << 20;

// Tokens per block for a check of `golden` under options.max_memory (or options.block_tokens), counting
// every output's truth, golden and candidate values and the inputs; SpecError when not even one token
// fits (io::require_memory's message).
std::int64_t block_tokens(const GoldenSet& golden, const CheckOptions& options);

// The files of `read` (manifest names, manifest order) whose hashes shard `shard` verifies: each file
// is hashed by one shard of the N, the largest first to the shard with the fewest bytes so far, so that
// the parts together verify every file the run reads once. Shard 1/1 hashes them all.
std::vector<std::string> files_hashed_by(const GoldenSet& golden, const std::vector<std::string>& read, const Shard& shard);

// A block of tokens [t0, t1) of one output as the check reads it: element 0 of each view is the block's
// first element (the candidate and the golden values of its dtype in that dtype, the truth in f64, the
// input q / k of a rotated output in f32); positions[t - t0] is token t's.
struct BlockViews {
  std::int64_t t0 = 0, t1 = 0;
  const void* cand = nullptr;
  const void* truth = nullptr;
  const void* same = nullptr;
  const void* in = nullptr;
  const Position* positions = nullptr;
};

// One candidate tensor checked against the golden output `golden_name`, fed a block of tokens at a time
// by any number of workers (check_accumulate.cpp): each worker accumulates its own statistics, merged by
// finish() exactly, so the result depends neither on the workers nor on how the tokens are split.
class TensorCheck {
 public:
  TensorCheck(const GoldenSet& g, const std::string& golden_name, const CandidateTensor& cand, const CheckOptions& opt,
              int workers);
  ~TensorCheck();
  TensorCheck(TensorCheck&&) noexcept;
  std::int64_t per_token() const;  // elements per token
  bool rotated() const;            // q_rot / k_rot: reads its input
  // Tokens [ta, tb) of the block `b`, accumulated by worker `worker` (one thread per worker at a time).
  void run(const BlockViews& b, std::int64_t ta, std::int64_t tb, int worker);
  TensorStats finish();  // once, after every token

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// The verdict of elements judged one by one (attention scores, attention outputs): any failure fails;
// otherwise a saturated element leaves the whole not tested, never passed. `what` names the elements
// ("scores"), `saturated` says what saturation means for them.
template <class Report>
void set_element_verdict(Report& r, const Criterion& cr, std::string_view what, std::string_view saturated) {
  if (r.failed > 0) {
    r.verdict = ropecheck::Verdict::fail;
    r.reason = fmt::format("{} of {} {} violate {}", r.failed, r.elements, what, cr.to_string());
  } else if (r.not_tested > 0) {
    r.verdict = ropecheck::Verdict::not_tested;
    r.reason = fmt::format("{} of {} {} not discriminated by {} (saturated: {}); {}", r.not_tested, r.elements, what,
                           cr.to_string(), saturated, ropecheck::kSaturationAdvice);
  }
}

}  // namespace ropecheck::checker::check_detail
