// One run of the golden writer: what it computes (RunPlan, settled by golden_writer.cpp from the
// options) and the computation itself, positions, inputs and correctly rounded outputs written block by
// block at their place in the set's files (golden_values.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "golden_files.hpp"
#include "ropecheck/attention/pairs.hpp"
#include "ropecheck/core/shard.hpp"
#include "ropecheck/reference/quantized_stores.hpp"

namespace ropecheck::golden::detail {

// What one run computes: its tokens of the set, and the sizes everything else derives from. A shard
// computes tokens [first, first + tokens); what depends on the whole set (the largest position, the
// default seq_len and with it the frequencies) is taken from all of them.
struct RunPlan {
  bool rope = false;
  bool shared = false;  // --shared-out: the tokens go straight into the whole set's files
  Shard shard;
  std::int64_t set_tokens = 0, first = 0, tokens = 0;
  std::span<const Position> positions;  // this run's tokens
  std::vector<DType> dtypes;            // f64 first
  std::int64_t max_pos = 0;             // over the whole set
  std::int64_t part_min = 0, part_max = 0;  // over this run's tokens
  std::int64_t seq_len = 0;
  int threads = 1;
  std::int64_t H = 0, D = 0, P = 0;  // RoPE: heads, head_dim, pairs (0 for sinusoidal)
  std::int64_t KW = 0;               // RoPE: one token's key values, H * D, or rotary_dim for a k_pe key
  int streams = 1;                   // position streams: 3 for multimodal RoPE
  std::int64_t block = 1;            // tokens computed and written at a time
  std::optional<attention::PairSet> scores;  // --scores: the pairs whose scores the run also writes
  std::optional<attention::Block> attention;  // --attention: the block whose outputs it writes
  std::vector<quant::StoreSpec> stores;       // --stores: written per block into the last attached file
  std::size_t stores_group = 0;               // that file's group in GoldenFiles
  // A shared file holds the whole set: this run's tokens start at token at_token() of its files.
  std::int64_t file_tokens() const { return shared ? set_tokens : tokens; }
  std::int64_t at_token() const { return shared ? first : 0; }
};

struct ValueCounts {
  std::int64_t fast_values = 0, fallback_values = 0;  // values rounded by the fast path / the MPFR fallback
};

// Writes the run's positions, then computes its values block by block on plan.threads threads and
// writes them (the inputs q, k for RoPE, every dtype's outputs); calls opt.progress now and then.
ValueCounts write_values(const GoldenOptions& opt, const RunPlan& plan, GoldenFiles& files);

// --scores, --attention (golden_attached.cpp): the most scores per dtype (pairs x group) and tokens of
// a block a set holds; the options checked and parsed into the plan (SpecError naming the option); the
// attached files computed (attention/set_files.hpp).
inline constexpr std::int64_t kMaxScores = std::int64_t{1} << 22;
inline constexpr std::int64_t kMaxBlockTokens = std::int64_t{1} << 16;
void plan_attached(const GoldenOptions& opt, RunPlan& plan);
// --kv-cache: the positions are the batch's, the set whole and RoPE (SpecError otherwise).
void plan_kv_cache(const GoldenOptions& opt, const RunPlan& plan);
std::vector<io::DescribedFile> compute_attached(const GoldenOptions& opt, const RunPlan& plan);

// --stores (golden_stores.cpp): the option checked and parsed into the plan; the stores file's layout
// (tensors with shapes, no data); one block of tokens' stores, from its f64 q_rot and k_rot, written
// into group `g` at the block's tokens.
void plan_stores(const GoldenOptions& opt, RunPlan& plan);
io::DescribedFile stores_layout(const RunPlan& plan);
// merge (golden_merge.cpp): the merged set's stores file, laid out from the first shard's manifest record
// ([tokens, heads, head_dim] of its q), and the names of its tensors without a token axis (a given
// scale: every shard holds the same copy, the merged set one). nullopt for shards without stores.
struct MergedStores {
  io::DescribedFile layout;
  std::vector<std::string> per_set;
};
std::optional<MergedStores> merged_stores(const nlohmann::json& manifest, std::int64_t tokens, std::int64_t H,
                                          std::int64_t D);
// whole = false: the stores of a block of tokens; whole = true: the whole-tensor stores (per-tensor and
// per-head data-derived FP8 scales, quant::StoreSpec::whole_tensor_scale()) of the run's whole q_rot and
// k_rot, first_token 0, written once after every block (their scales and margins carry no token axis).
inline constexpr std::int64_t kMaxWholeTensorValues = std::int64_t{1} << 24;  // 128 MiB of f64 a tensor
bool has_whole_tensor_store(const RunPlan& plan);
void write_store_block(const RunPlan& plan, GoldenFiles& files, std::size_t g, std::int64_t first_token,
                       const io::Tensor& q_rot_f64, const io::Tensor& k_rot_f64, bool whole = false);

}  // namespace ropecheck::golden::detail
