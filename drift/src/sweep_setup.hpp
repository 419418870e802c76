// What run_drift and run_compare share: the validated options, the sampling plan, the exact
// cos / sin at every sampled position, the inputs and the token layout of a chunk of samples.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "ropecheck/drift/swept_kernel.hpp"
#include "ropecheck/drift/exact.hpp"
#include "ropecheck/drift/sweep.hpp"

namespace ropecheck::drift::detail {

// Counts and indices are int64 in the options and size_t in the containers.
inline std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }

// Tokens per sample: the query at p, the key at n = max(p - key_distance, 0), then for every
// shift s the query at p + s and the key at n + s.
struct Setup {
  EncodingSpec spec;
  DriftOptions opt;
  SamplingPlan plan;
  std::int64_t seq_len = 0;
  std::unique_ptr<ExactRope> exact;
  DD att;
  double att_f64 = 1;
  int P = 0, D = 0, heads = 0, S = 0, K = 0, threads = 1;
  std::vector<std::pair<int, int>> channels;  // per pair
  std::vector<double> w, abs_log_w;           // per pair: w_j (binary64) and |ln w_j| (0 for w = 0)
  std::vector<DD> ecos, esin;                 // [sample][pair] exact cos / sin at the sampled positions
  std::vector<std::int64_t> edges;            // every bin's hi (uniqueness counts below them)

  std::int64_t samples() const { return static_cast<std::int64_t>(plan.positions.size()); }
  std::int64_t key_position(std::int64_t p) const { return p > opt.key_distance ? p - opt.key_distance : 0; }
};

// Validates the spec (RoPE only) and the options, refuses a run of `kernels` kernels estimated
// beyond options.max_memory (require_memory), builds the plan and the exact rows (threads).
Setup make_setup(const EncodingSpec& spec, const DriftOptions& options, std::size_t kernels);

// One chunk of samples [begin, end): positions of its tokens, their inputs (q tokens carry the
// sample's q vectors, k tokens its k vectors) and the kernel's outputs.
struct Chunk {
  std::int64_t begin = 0, end = 0;
  std::vector<std::int64_t> token_positions;  // (end - begin) * K
  std::vector<float> x;                       // [token][head][D]
  std::vector<std::int64_t> table_positions;  // the sampled positions themselves
};
Chunk make_chunk(const Setup& s, std::int64_t begin, std::int64_t end);

struct ChunkOutput {
  std::vector<double> rot;         // [token][head][D]
  std::vector<double> tcos, tsin;  // [sample][pair] when has_table
  bool has_table = false;
};
void run_chunk(SweptKernel& c, const Setup& s, const Chunk& chunk, ChunkOutput& out);

// Samples per chunk: bounds the memory of one chunk's outputs.
inline constexpr std::int64_t kSamplesPerChunk = 512;

}  // namespace ropecheck::drift::detail
