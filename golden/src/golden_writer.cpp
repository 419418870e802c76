// The golden writer (golden_writer.hpp) as a table of contents: plan the run from the options, open
// the destination, compute and write the values (golden_values.cpp), finish the files and the manifest.
#include "ropecheck/golden/golden_writer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <span>
#include <thread>

#include "golden_files.hpp"
#include "golden_values.hpp"
#include "ropecheck/golden/golden_shared.hpp"
#include "ropecheck/golden/input_generator.hpp"
#include "ropecheck/io/atomic_output.hpp"
#include "ropecheck/io/memory_budget.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/reference/resolve.hpp"

namespace ropecheck::golden {
using namespace ropecheck::io;  // tensors and files are this module's material
namespace {

using Clock = std::chrono::steady_clock;
using detail::RunPlan;

// The largest position of the set, and the range of this run's.
void measure_positions(const std::vector<Position>& all, RunPlan& plan) {
  plan.part_min = plan.positions.front().t;
  for (std::int64_t i = 0; i < plan.set_tokens; ++i) {
    const Position& p = all[static_cast<std::size_t>(i)];
    for (std::int64_t v : {p.t, p.h, p.w}) {
      plan.max_pos = std::max(plan.max_pos, v);
      if (i >= plan.first && i < plan.first + plan.tokens) {
        plan.part_max = std::max(plan.part_max, v);
        plan.part_min = std::min(plan.part_min, v);
      }
    }
  }
  if (plan.max_pos > kMaxPosition)  // a grid's rows and columns are added to its start position
    throw SpecError("--positions: position " + std::to_string(plan.max_pos) + " is beyond 2^53 = 9007199254740992");
}

// Validates the options and settles which tokens this run computes, and with what.
RunPlan plan_tokens(const GoldenOptions& opt) {
  const EncodingSpec& spec = opt.spec;
  RunPlan plan;
  plan.rope = spec.family == Family::rope;
  const std::vector<Position>& all_positions = opt.positions.positions;
  plan.set_tokens = static_cast<std::int64_t>(all_positions.size());
  if (plan.set_tokens == 0) throw SpecError("--positions: no positions");
  plan.shard = opt.shard.value_or(Shard{});
  plan.shared = opt.shared_out;
  if (plan.shared && !opt.shard) throw SpecError("--shared-out: needs --shard I/N (the shard this process writes)");
  const auto [first, last] = shard_range(plan.set_tokens, plan.shard, "tokens");
  plan.first = first;
  plan.tokens = last - first;
  plan.positions = std::span<const Position>(all_positions.data() + first, static_cast<std::size_t>(last - first));
  if (opt.heads < 1 || opt.heads > 4096) throw SpecError("--heads must be in [1, 4096], got " + std::to_string(opt.heads));
  if (opt.positions.has_triples && (!plan.rope || spec.rope.mrope == MropeMode::none))
    throw SpecError("--positions: T/H/W triples need a multimodal RoPE spec (rope.mrope)");

  plan.dtypes = {DType::f64};
  for (DType d : opt.dtypes)
    if (std::find(plan.dtypes.begin(), plan.dtypes.end(), d) == plan.dtypes.end()) plan.dtypes.push_back(d);
  measure_positions(all_positions, plan);
  // Hugging Face's run-time update resolves dynamic / LongRoPE with max(position_ids) + 1.
  // Capped at 2^53 (the largest accepted): position 2^53 itself is valid (reliability-2 defect 12).
  plan.seq_len = opt.seq_len.value_or(std::min(plan.max_pos + 1, kMaxPosition));
  plan.threads = opt.threads > 0 ? opt.threads : std::max(1u, std::thread::hardware_concurrency());
  plan.H = plan.rope ? opt.heads : 0;
  plan.D = plan.rope ? spec.rope.head_dim : 0;
  plan.P = plan.rope ? rope_pairs(spec.rope) : 0;
  plan.KW = !plan.rope ? 0 : spec.rope.key_layout == KeyLayout::k_pe ? spec.rope.rotary_dim : plan.H * plan.D;
  plan.streams = plan.rope && spec.rope.mrope != MropeMode::none ? 3 : 1;
  detail::plan_attached(opt, plan);
  detail::plan_kv_cache(opt, plan);
  detail::plan_stores(opt, plan);
  return plan;
}

// Outputs are computed and written in blocks of tokens (golden_values.hpp): the run holds its
// positions and one block, whatever the size of the set. What it writes must fit on the disk.
void plan_blocks(const GoldenOptions& opt, RunPlan& plan) {
  const EncodingSpec& spec = opt.spec;
  const bool rope = plan.rope;
  const std::int64_t H = plan.H, D = plan.D, P = plan.P, tokens = plan.tokens;
  const double qk = static_cast<double>(H * D + plan.KW);  // q, k (or k_pe)
  double token_bytes = rope ? qk * 4 : 0;
  for (DType d : plan.dtypes) {
    const double sz = static_cast<double>(dtype_size(tensor_dtype(d)));
    token_bytes += rope ? (2 * static_cast<double>(P) + qk) * sz : static_cast<double>(spec.sinusoidal.d_model) * sz;
  }
  std::string what;
  if (rope)
    what = "--positions (" + std::to_string(tokens) + " tokens) x --heads " + std::to_string(opt.heads) + " x head_dim " +
           std::to_string(D) + " x " + std::to_string(plan.dtypes.size()) + " dtypes";
  else
    what = "--positions (" + std::to_string(tokens) + " tokens) x d_model " + std::to_string(spec.sinusoidal.d_model) +
           " x " + std::to_string(plan.dtypes.size()) + " dtypes";
  constexpr double kBlockBytes = 32.0 * (1 << 20);
  plan.block =
      opt.block_tokens > 0
          ? std::min(opt.block_tokens, tokens)
          : static_cast<std::int64_t>(std::clamp(std::floor(kBlockBytes / std::max(token_bytes, 1.0)), 1.0, static_cast<double>(tokens)));
  // In double: the product of the accepted maxima overflows 64 bits.
  const double T = static_cast<double>(tokens), B = static_cast<double>(plan.block);
  const double need = T * 8 * plan.streams + B * token_bytes * 1.5 + (rope ? 2 * B * static_cast<double>(H * D) * 8 : 0);
  require_memory(static_cast<std::uint64_t>(std::min(need, 0x1p63)), opt.max_memory, "golden set of " + what);
  require_disk(static_cast<std::uint64_t>(std::min(T * (token_bytes + 8.0 * plan.streams), 0x1p63)), opt.out,
               "golden set of " + what);
}

// What the manifest records besides the files, as far as it is known before the computation.
detail::GoldenMeta start_meta(const GoldenOptions& opt, const RunPlan& plan) {
  detail::GoldenMeta meta;
  meta.positions_argument = opt.positions.argument;
  meta.seq_len = plan.seq_len;
  if (plan.rope) meta.attention_factor = resolve_spec(opt.spec, plan.seq_len, 40).attention_factor;
  meta.seed = opt.seed;
  return meta;
}

// Where the files go, made first so that an existing or unwritable destination, or a shared set of
// another run, fails before the computation: a temporary sibling folder moved into place at the end
// (atomic_output.hpp), or the shared set's files, written at the tokens' final offsets.
struct Destination {
  std::optional<OutputFolder> folder;  // empty with --shared-out
  std::filesystem::path dir;
  std::string context;             // starts error messages
  nlohmann::json shared_identity;  // --shared-out: the run the shared set belongs to

  Destination(const GoldenOptions& opt, const RunPlan& plan, const detail::GoldenMeta& meta) {
    if (plan.shared) {
      const detail::GoldenFiles whole({}, {}, opt.spec, plan.set_tokens, static_cast<int>(plan.H), plan.dtypes, opt.format,
                                      detail::FilesMode::caller_writes);
      shared_identity = detail::run_identity(whole.manifest(meta, nlohmann::json::array()), plan.shard.count,
                                             opt.format == FileFormat::npz ? "npz" : "safetensors");
      dir = join_shared_staging(opt.out, shared_identity, plan.shard, opt.overwrite);
      context = "--shared-out " + opt.out.string();
    } else {
      folder.emplace(opt.out, OutputFolder::Options{.overwrite = opt.overwrite, .create_parents = true, .option = "--out",
                                                    .command = "golden"});
      dir = folder->tmp();
      context = folder->out().string();
    }
  }
};

// --shared-out: this shard's bytes synced, then its completion record written, what `merge
// --shared` needs from it besides the files.
nlohmann::json finish_shared_shard(const GoldenOptions& opt, const RunPlan& plan, detail::GoldenFiles& files,
                                   const detail::GoldenMeta& meta, const nlohmann::json& identity) {
  nlohmann::json record = {
      {"run", identity},
      {"shard", {{"index", plan.shard.index}, {"count", plan.shard.count}, {"first_token", plan.first}, {"tokens", plan.tokens},
                 {"set_tokens", plan.set_tokens}}},
      {"positions", {{"min", plan.part_min}, {"max", plan.part_max}}},
      {"reference", {{"fast_path_values", meta.fast_values}, {"mpfr_fallback_values", meta.fallback_values}}}};
  nlohmann::json crcs = nlohmann::json::object();
  for (std::size_t g = 0; g < files.groups(); ++g) {
    files.group(g).sync();
    if (opt.format != FileFormat::npz) continue;
    const std::vector<std::vector<detail::CrcRange>> c = files.group(g).written_crcs();
    nlohmann::json& file = crcs[files.file_name(g)];
    for (std::size_t j = 0; j < c.size(); ++j) {
      nlohmann::json ranges = nlohmann::json::array();
      for (const detail::CrcRange& r : c[j]) ranges.push_back({r.offset, r.bytes, r.crc});
      file[files.layout(g)[j].name] = ranges;
    }
  }
  if (opt.format == FileFormat::npz) record["crc32"] = crcs;
  write_shard_record(opt.out, plan.shard, record);
  return record;
}

// A whole set or a shard folder: the files completed, the manifest written, the folder moved into place.
nlohmann::json finish_folder(const GoldenOptions& opt, const RunPlan& plan, detail::GoldenFiles& files,
                             detail::GoldenMeta& meta, OutputFolder& folder) {
  if (opt.shard)  // also 1/1: a one-shard matrix still goes through `merge`
    meta.shard = {{"index", plan.shard.index}, {"count", plan.shard.count}, {"first_token", plan.first},
                  {"set_tokens", plan.set_tokens}};
  nlohmann::json manifest = files.finish(meta);
  folder.write("manifest.json", manifest.dump(2) + "\n");
  folder.commit();  // one rename: refuses to replace without --overwrite, one exchange with it
  return manifest;
}

}  // namespace

GoldenSummary write_golden_set(const GoldenOptions& options) {
  // The norm stage's weights are golden inputs: generated from the seed unless the spec gives them, and
  // recorded in the set's spec (manifest.json), which every later reader takes them from.
  GoldenOptions opt = options;
  fill_norm_weights(opt.spec, opt.seed);
  RunPlan plan = plan_tokens(opt);
  plan_blocks(opt, plan);
  detail::GoldenMeta meta = start_meta(opt, plan);
  Destination dest(opt, plan, meta);
  GoldenSummary summary;
  const auto t0 = Clock::now();
  std::vector<DescribedFile> attached = detail::compute_attached(opt, plan);
  const std::size_t computed = attached.size();  // then the stores, written block by block
  plan.stores_group = 1 + plan.dtypes.size() + computed;
  if (!plan.stores.empty()) attached.push_back(detail::stores_layout(plan));
  detail::GoldenFiles files(dest.dir, dest.context, opt.spec, plan.file_tokens(), static_cast<int>(plan.H), plan.dtypes,
                            opt.format, plan.shared ? detail::FilesMode::shared_write : detail::FilesMode::create, attached);
  const detail::ValueCounts counts = detail::write_values(opt, plan, files);
  files.write_attached(std::span<const DescribedFile>(attached).first(computed));
  for (std::size_t f = 0; f < attached.size(); ++f) {
    meta.attached[attached[f].stem] = attached[f].record;
    meta.attached[attached[f].stem]["file"] = files.file_name(1 + plan.dtypes.size() + f);
  }
  if (opt.progress) opt.progress(plan.tokens, plan.tokens);
  const auto t1 = Clock::now();
  summary.compute_seconds = std::chrono::duration<double>(t1 - t0).count();
  summary.fast_values = counts.fast_values;
  summary.fallback_values = counts.fallback_values;

  meta.min_pos = plan.part_min;
  meta.max_pos = plan.part_max;
  meta.fast_values = summary.fast_values;
  meta.fallback_values = summary.fallback_values;
  summary.manifest = plan.shared ? finish_shared_shard(opt, plan, files, meta, dest.shared_identity)
                                 : finish_folder(opt, plan, files, meta, *dest.folder);
  summary.write_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return summary;
}

}  // namespace ropecheck::golden
