// A drift sweep: every kernel (recipe or plugin) measured against the exact reference at the
// positions of a sampling plan, summarised per bin, with the first sampled position where each
// accuracy class's bound is exceeded (the breakdown position) and, over all positions 0 .. N-1,
// the uniqueness of the encodings (drift/DRIFT.md says what every number means).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ropecheck/plugin/client.hpp"
#include "ropecheck/plugin/kernel_name.hpp"
#include "ropecheck/drift/metrics.hpp"
#include "ropecheck/drift/sampling.hpp"
#include "ropecheck/drift/uniqueness.hpp"
#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/shard.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/core/verdict.hpp"

namespace ropecheck::drift {

struct DriftOptions {
  SamplingOptions sampling;
  DType storage = DType::bf16;           // the dtype rotated values and tables are stored in
  std::optional<std::int64_t> seq_len;   // dynamic / LongRoPE resolution; default N (the swept length)
  int heads = 4;                         // random head vectors per position, 1 .. 64
  std::uint64_t seed = 0;                // of the input generator (golden/input_generator.hpp)
  std::vector<std::int64_t> shifts = {1, 16, 1024};  // relative-shift violation: 1 .. 8 shifts in [1, 2^24]
  std::int64_t key_distance = 16;        // the key sits key_distance positions before the query (>= 0)
  bool uniqueness = true;                // the exact pass over all positions 0 .. N-1
  int threads = 0;                       // 0: all cores
  // --compare: the class whose bound decides whether A and B agree (|A - B| <= 2 E, E the class's
  // per-element bound for the storage dtype: both could be in the class).
  accuracy::AccuracyClass compare_class = accuracy::AccuracyClass::fp32_angle;
  plugin::PluginClientOptions plugin;    // how plugin: kernels run (isolated, timeout)
  std::uint64_t max_memory = 0;          // refuse runs estimated to need more (bytes); 0: the machine's memory
  // Part of a sweep split over processes (drift/part.hpp): the sampled positions are split in N
  // contiguous ranges, and kernel k's uniqueness pass runs in shard (k mod N) + 1.
  Shard shard;
  // Told one line per finished step ("hf: sweep 0.41 s"); may be empty.
  std::function<void(const std::string&)> progress;
};

// The first sampled position where a kernel exceeds a class's bound, with the worst element
// there (largest error / allowed).
struct Breakdown {
  accuracy::AccuracyClass cls = accuracy::AccuracyClass::exact;
  std::optional<std::int64_t> position;  // nullopt: within the bound at every sampled position
  std::string quantity;                  // "rotated" or "table"
  int head = -1;                         // rotated: the head; table: -1
  int pair = -1;
  int channel = -1;                      // rotated: the channel; table: 0 = cos, 1 = sin
  double error = 0;                      // |kernel - exact| (absolute; infinity for non-finite)
  double allowed = 0;                    // the class's allowance for that element
  // The first sampled position where the class's bound on a rotated value is saturated for some
  // pair (ClassBound::saturated: an all-zero output would pass; from there "never" proves nothing
  // for that pair); nullopt: never saturated. Depends on the spec and class only.
  std::optional<std::int64_t> saturated_from;

  // "breakdown" (the class is exceeded at `position`: a violation, wherever it is), "not-tested" (no
  // breakdown, but the bound saturates from `saturated_from`: "never" cannot be claimed past it) or
  // "never" (within the bound at every sampled position, none saturated).
  std::string_view state() const { return position ? "breakdown" : (saturated_from ? "not-tested" : "never"); }
};

struct KernelResult {
  std::string name, description;
  bool known_bad = false;
  bool is_recipe = false;
  std::optional<DType> table_dtype;  // recipes
  bool has_rows = false;             // angles and f32 cos / sin measured
  bool has_table = false;
  std::vector<Metrics> positions;    // per sampled position (plan.positions order; a shard's only in its range)
  std::vector<Metrics> bins;         // per bin (plan.bins order)
  Metrics total;
  std::vector<Breakdown> breakdown;  // one per accuracy::kAccuracyClasses entry, same order
  std::optional<Uniqueness> uniqueness;  // edges: every bin's hi
  double seconds = 0;                    // sweep + uniqueness
};

struct DriftResult {
  EncodingSpec spec;
  DriftOptions options;  // progress cleared
  SamplingPlan plan;
  std::int64_t seq_len = 0;
  double attention_factor = 1;
  std::vector<KernelResult> kernels;
  std::vector<std::string> kernel_failures;  // per plugin with failed calls: "N of M calls lost: FIRST"
  double seconds = 0;
  std::int64_t first_sample = 0, last_sample = 0;  // the sampled positions measured: plan indices [first, last)
};

// A kernel's bins and total from its per-position metrics, folded in plan order (what one run and
// a merge of parts both do).
void summarize_positions(KernelResult& c, const SamplingPlan& plan, std::size_t shifts);

// Throws SpecError for a sinusoidal spec (drift is RoPE-only), an unknown recipe or bad options;
// InputError for a plugin that does not load or fails; std::invalid_argument for a bad
// sampling plan.
DriftResult run_drift(const EncodingSpec& spec, std::span<const plugin::KernelName> kernels, const DriftOptions& options);

// What a run of `kernels` kernels holds at its peak, in bytes (an upper estimate): the exact rows
// and every kernel's per-sample metrics over the plan's samples, one chunk of inputs and outputs,
// the uniqueness pass's hash per position. run_drift and run_compare refuse (SpecError, one line naming
// the options and the estimate: golden/memory_budget.hpp) a run over options.max_memory before they
// allocate; options must be valid (make_sampling_plan accepts them).
std::uint64_t estimate_memory_bytes(const EncodingSpec& spec, const DriftOptions& options, std::size_t kernels);
// Throws that SpecError when the estimate exceeds options.max_memory (0: the machine's memory).
void require_memory(const EncodingSpec& spec, const DriftOptions& options, std::size_t kernels);

// ---- --compare A,B ----------------------------------------------------------------------------------

// Differences between two kernels on the same inputs at the same positions.
struct CompareMetrics {
  std::int64_t samples = 0;
  Stat diff_ulp;    // |A - B| / ulp(max(|A|, |B|)) in the storage dtype, rotated channels
  Stat diff_rel;    // |A - B| / M
  std::int64_t differing = 0, elements = 0;  // rotated elements that differ / compared
  Stat angle_diff;  // |wrapped angle A - angle B| (both recipes)
  Stat trig_diff;   // |f32 cos / sin A - B| (both recipes)
  Stat table_diff;  // |table A - table B| (both have tables)
  Stat err_a_ulp, err_b_ulp;  // each side against the exact reference (as Metrics::rot_ulp)
  Stat err_a_rel, err_b_rel;  // ... relative to M (as Metrics::rot_rel)
  std::int64_t nonfinite_a = 0, nonfinite_b = 0;
  // Rotated elements where |A - B| > 2 E (or one side is not finite): A and B cannot both be in the
  // class; and, of the others, those whose bound is saturated (E >= M: not tested).
  std::int64_t violations = 0, saturated = 0;
  void merge(const CompareMetrics& o);
};

struct FirstDifference {
  std::optional<std::int64_t> position;  // nullopt: identical everywhere examined
  int head = -1, pair = -1, channel = -1;
  double a = 0, b = 0;    // the two values there (the element with the largest difference)
  double diff_ulp = 0;    // |a - b| in ulps of the storage dtype
};

struct CompareResult {
  EncodingSpec spec;
  DriftOptions options;
  SamplingPlan plan;
  std::int64_t seq_len = 0;
  double attention_factor = 1;
  std::string a, b, a_description, b_description;
  std::vector<CompareMetrics> positions, bins;
  CompareMetrics total;
  FirstDifference first_sampled;  // rotated random vectors at the sampled positions
  FirstDifference first_all;      // rotated unit pair vectors at every position 0 .. N-1 (options.uniqueness)
  std::int64_t positions_differing_all = 0;  // positions of 0 .. N-1 whose unit rotations differ
  // The compared pair's verdict under options.compare_class: fail (some violation), not-tested (no
  // violation, some saturated bounds), pass; reason one line (empty for pass); the first sampled
  // position with a violation / a saturated bound.
  ropecheck::Verdict verdict = ropecheck::Verdict::pass;
  std::string reason;
  std::optional<std::int64_t> first_violation, first_saturated;
  std::vector<std::string> kernel_failures;  // per plugin with failed calls: "N of M calls lost: FIRST"
  double seconds = 0;
  // A kernel declined the spec or dtype (KernelDeclined): its reason. Nothing was measured; the verdict
  // is not-tested, as `check` and `props` judge a spec the kernel declines.
  std::string declined;
};

// Both kernels over the sweep (a kernel that declines: CompareResult::declined, not an exception).
CompareResult run_compare(const EncodingSpec& spec, const plugin::KernelName& a, const plugin::KernelName& b,
                          const DriftOptions& options);

}  // namespace ropecheck::drift
