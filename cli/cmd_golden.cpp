// `ropecheck golden`: writes a golden set (golden/GOLDEN_FORMAT.md).
#include <unistd.h>

#include <optional>
#include <sstream>

#include <fmt/core.h>

#include "commands.hpp"
#include "numeric_options.hpp"
#include "ropecheck/core/spec_json.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "memory_option.hpp"
#include "spec_source.hpp"

namespace ropecheck::cli {
namespace {

struct GoldenCliOptions {
  SpecSource source;
  std::string positions;
  std::string out;
  std::string dtypes = "f32,f16,bf16";
  int heads = 1;
  std::uint64_t seed = 0;
  std::string format = "safetensors";
  std::int64_t seq_len = 0;
  int threads = 0;
  bool overwrite = false;
  bool quiet = false;
  std::string max_memory;
  std::string shard;
  std::string shared_out;
  std::string scores;
  std::string attention;
  std::string kv_cache;
  std::string stores;
  std::optional<double> softcap;
  bool sinks = false;
};

std::vector<DType> parse_dtypes(const std::string& list) {
  std::vector<DType> out;
  std::istringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    const std::optional<DType> d = parse_dtype(item);
    if (!d) throw SpecError("--dtypes: unknown dtype '" + item + "' (known: f64, f32, f16, bf16)");
    out.push_back(*d);
  }
  if (out.empty()) throw SpecError("--dtypes: empty list");
  return out;
}

}  // namespace

Command add_golden_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("golden", "write golden tensors: inputs and correctly rounded outputs, with a manifest");
  auto o = std::make_shared<GoldenCliOptions>();
  o->source.add_options(*cmd);
  cmd->add_option("--positions", o->positions,
                  "positions: P, A:B, A:B:STEP, log:MAX:K (K per octave), T/H/W, grid:S:H:W; comma-separated "
                  "(or --kv-cache)");
  auto* out = cmd->add_option("--out", o->out, "output folder (must not exist unless --overwrite)");
  cmd->add_option("--dtypes", o->dtypes, "output dtypes besides f64, comma-separated (f64,f32,f16,bf16)")
      ->capture_default_str();
  cmd->add_option("--heads", o->heads, "heads per token in q and k")->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--seed", o->seed, "seed of the input generator")->capture_default_str()->check(unsigned_64());
  cmd->add_option("--format", o->format, "safetensors or npy (.npz files)")
      ->capture_default_str()
      ->check(CLI::IsMember({"safetensors", "npy"}));
  cmd->add_option("--seq-len", o->seq_len, "sequence length for dynamic/longrope (default: max position + 1)")
      ->check(CLI::Range(std::int64_t{1}, kMaxPosition));
  cmd->add_option("--threads", o->threads, "worker threads (default: all cores; output is identical for any count)")
      ->check(CLI::Range(0, 1024));
  cmd->add_flag("--overwrite", o->overwrite, "replace an existing output folder");
  cmd->add_option("--shard", o->shard,
                  "I/N: write only shard I of N (tokens split in N contiguous ranges); `ropecheck merge` joins the N "
                  "shard folders into the set one run writes, byte for byte");
  cmd->add_option("--shared-out", o->shared_out,
                  "DIR, with --shard I/N: write the shard's tokens straight into the set's files in DIR.staging/, "
                  "shared with the other shards (one filesystem); `ropecheck merge --shared DIR` finishes the set "
                  "once every shard has")
      ->excludes(out);
  cmd->add_option("--scores", o->scores,
                  "PAIRS: also write the correctly rounded attention scores of these (query, key) position pairs for "
                  "one head group (the query heads of token 0's q, head 0 of its k): causal:S:N[:W], full:S:N, "
                  "dist:MAX:K[:Q], tail:L:N[:S], pair:M:N; comma-separated");
  cmd->add_option("--attention", o->attention,
                  "BLOCK: also write the correctly rounded attention outputs softmax(scores + mask) V of this block of "
                  "tokens for the same head group (values from the generator): causal:S:N, causal:S:N:W (sliding "
                  "window), full:S:N");
  cmd->add_option("--kv-cache", o->kv_cache,
                  "FILE: a KV-cache write (JSON: sequences with cached / appended tokens, cache paged or slots, layout "
                  "NHD / HND, page_size, pages, page_table): the set's tokens are the appended ones, at positions "
                  "cached + i, and a file kv_cache carries the cache's metadata and the values v (instead of --positions)");
  cmd->add_option("--softcap", o->softcap, "CAP: with --scores / --attention, Gemma 2's logit soft-cap");
  cmd->add_flag("--sinks", o->sinks, "with --attention: one sink logit per query head, from the generator (gpt-oss)");
  cmd->add_option("--stores", o->stores,
                  "LIST: also write these quantized stores of q_rot and k_rot, comma-separated: e4m3fn or e5m2 "
                  "[:saturate|:nonfinite][:per-token|:per-token-head|:per-tensor|:per-head] (a data-derived scale; per-tensor "
                  "and per-head over every token, not with --shard) or [:scale=V] (a given scale "
                  "per tensor, V rounded once to binary32) or [:scale=V1/V2/...] (one per head), q8_0, q4_0, int4gG or "
                  "int8gG [:f32|:f16|:bf16] (MLX affine, G = 32, 64, 128); whole sets only");
  add_max_memory_option(*cmd, o->max_memory);
  cmd->add_flag("--quiet", o->quiet, "no progress display");
  return {cmd, [o] {
            if (o->out.empty() == o->shared_out.empty())
              throw SpecError(o->out.empty() ? "golden: give --out DIR (or --shard I/N --shared-out DIR)"
                                             : "golden: give --out or --shared-out, not both");
            if (!o->shared_out.empty() && o->shard.empty())
              throw SpecError("--shared-out: needs --shard I/N (the shard this process writes)");
            golden::GoldenOptions g;
            g.spec = o->source.load();
            if (o->positions.empty() == o->kv_cache.empty())
              throw SpecError(o->positions.empty() ? "golden: give --positions or --kv-cache"
                                                   : "--kv-cache: not with --positions (the batch gives the positions)");
            if (!o->kv_cache.empty()) {
              g.kv_cache = kv::parse_cache_spec(read_json_file(o->kv_cache), o->seed);
              g.positions.argument = "kv-cache";
              for (std::int64_t p : kv::positions(*g.kv_cache)) g.positions.positions.push_back(Position::uniform(p));
            } else {
              g.positions = parse_positions(o->positions);
            }
            g.out = o->shared_out.empty() ? o->out : o->shared_out;
            g.shared_out = !o->shared_out.empty();
            g.scores = o->scores;
            g.attention = o->attention;
            g.stores = o->stores;
            g.softcap = o->softcap;
            g.sinks = o->sinks;
            g.dtypes = parse_dtypes(o->dtypes);
            g.heads = o->heads;
            g.seed = o->seed;
            g.format = o->format == "npy" ? io::FileFormat::npz : io::FileFormat::safetensors;
            if (o->seq_len > 0) g.seq_len = o->seq_len;
            g.threads = o->threads;
            g.overwrite = o->overwrite;
            g.max_memory = max_memory_bytes(o->max_memory);
            if (!o->shard.empty()) g.shard = parse_shard(o->shard);
            const bool tty = !o->quiet && ::isatty(STDERR_FILENO);
            if (tty)
              g.progress = [](std::int64_t done, std::int64_t total) {
                fmt::print(stderr, "\rropecheck golden: {:3d}% ({}/{} tokens)", done * 100 / std::max<std::int64_t>(total, 1),
                           done, total);
                if (done == total) fmt::print(stderr, "\n");
              };
            const golden::GoldenSummary s = golden::write_golden_set(g);
            const auto& m = s.manifest;
            if (g.shared_out)
              fmt::print("wrote shard {} ({} tokens) into {}.staging; `ropecheck merge --shared {}` finishes the set once "
                         "all {} shards have\n",
                         g.shard->text(), m["shard"]["tokens"].get<std::int64_t>(), o->shared_out, o->shared_out,
                         g.shard->count);
            else
              fmt::print("wrote {}{}: {} tokens, dtypes {}, {} files\n", o->out,
                       m.contains("shard") ? " (shard " + g.shard->text() + ", merge with `ropecheck merge`)" : "",
                       m["positions"]["tokens"].get<std::int64_t>(), m["dtypes"].dump(), m["files"].size());
            if (m.contains("scores"))
              fmt::print("scores: {} pairs x group {} in {}\n", m["scores"]["pairs"].get<std::int64_t>(),
                         m["scores"]["group"].get<std::int64_t>(), m["scores"]["file"].get<std::string>());
            if (m.contains("attention"))
              fmt::print("attention: a block of {} tokens x group {} in {}\n", m["attention"]["tokens"].get<std::int64_t>(),
                         m["attention"]["group"].get<std::int64_t>(), m["attention"]["file"].get<std::string>());
            fmt::print("correct rounding: {} values on the fast path, {} recomputed with MPFR; compute {:.2f} s, write {:.2f} s\n",
                       s.fast_values, s.fallback_values, s.compute_seconds, s.write_seconds);
            return 0;
          }};
}

}  // namespace ropecheck::cli
