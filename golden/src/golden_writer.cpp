#include "ropecheck/golden/golden_writer.hpp"

#include <mpfr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <span>
#include <thread>

#include "golden_files.hpp"
#include "ropecheck/io/atomic_output.hpp"
#include "ropecheck/golden/golden_shared.hpp"
#include "ropecheck/golden/input_generator.hpp"
#include "ropecheck/io/memory_budget.hpp"
#include "ropecheck/io/npy.hpp"
#include "ropecheck/io/safetensors.hpp"
#include "ropecheck/io/sha256.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/reference/fast_rounding.hpp"
#include "ropecheck/reference/mpfr_value.hpp"
#include "ropecheck/reference/resolve.hpp"
#include "ropecheck/core/spec_json.hpp"

#ifndef ROPECHECK_VERSION
#define ROPECHECK_VERSION "unknown"
#endif

namespace ropecheck::golden {
using namespace ropecheck::io;  // tensors and files are this module's material
namespace {

using Clock = std::chrono::steady_clock;

// Stores an already-rounded value (exactly representable in t) little-endian at dst.
void store(std::uint8_t* dst, double v, DType t) {
  switch (t) {
    case DType::f64: std::memcpy(dst, &v, 8); return;
    case DType::f32: {
      const float f = static_cast<float>(v);
      std::memcpy(dst, &f, 4);
      return;
    }
    default: {
      const auto bits = static_cast<std::uint16_t>(double_to_bits(v, t));
      std::memcpy(dst, &bits, 2);
    }
  }
}

Tensor empty_tensor(std::string name, TensorDType dt, std::vector<std::int64_t> shape) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dt;
  t.shape = std::move(shape);
  t.data.assign(static_cast<std::size_t>(t.numel()) * dtype_size(dt), 0);
  return t;
}

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

}  // namespace

GoldenSummary write_golden_set(const GoldenOptions& opt) {
  const EncodingSpec& spec = opt.spec;
  const bool rope = spec.family == Family::rope;
  const std::vector<Position>& all_positions = opt.positions.positions;
  const auto set_tokens = static_cast<std::int64_t>(all_positions.size());
  if (set_tokens == 0) throw SpecError("--positions: no positions");
  // A shard computes tokens [first, last) of the set; everything that depends on the whole set (the
  // largest position, the default seq_len and with it the frequencies) is taken from all of them.
  const Shard shard = opt.shard.value_or(Shard{});
  const bool shared = opt.shared_out;
  if (shared && !opt.shard) throw SpecError("--shared-out: needs --shard I/N (the shard this process writes)");
  const auto [first, last] = shard_range(set_tokens, shard, "tokens");
  const std::span<const Position> positions(all_positions.data() + first, static_cast<std::size_t>(last - first));
  const std::int64_t tokens = last - first;
  if (opt.heads < 1 || opt.heads > 4096) throw SpecError("--heads must be in [1, 4096], got " + std::to_string(opt.heads));
  if (opt.positions.has_triples && (!rope || spec.rope.mrope == MropeMode::none))
    throw SpecError("--positions: T/H/W triples need a multimodal RoPE spec (rope.mrope)");

  std::vector<DType> dtypes = {DType::f64};
  for (DType d : opt.dtypes)
    if (std::find(dtypes.begin(), dtypes.end(), d) == dtypes.end()) dtypes.push_back(d);

  std::int64_t max_pos = 0, part_min = positions.front().t, part_max = 0;
  for (std::int64_t i = 0; i < set_tokens; ++i) {
    const Position& p = all_positions[static_cast<std::size_t>(i)];
    for (std::int64_t v : {p.t, p.h, p.w}) {
      max_pos = std::max(max_pos, v);
      if (i >= first && i < last) {
        part_max = std::max(part_max, v);
        part_min = std::min(part_min, v);
      }
    }
  }
  if (max_pos > kMaxPosition)  // a grid's rows and columns are added to its start position
    throw SpecError("--positions: position " + std::to_string(max_pos) + " is beyond 2^53 = 9007199254740992");
  // Hugging Face's run-time update resolves dynamic / LongRoPE with max(position_ids) + 1.
  // Capped at 2^53 (the largest accepted): position 2^53 itself is valid (reliability-2 defect 12).
  const std::int64_t seq_len = opt.seq_len.value_or(std::min(max_pos + 1, kMaxPosition));
  const int threads = opt.threads > 0 ? opt.threads : std::max(1u, std::thread::hardware_concurrency());

  // Outputs are computed and written in blocks of tokens (golden_content.hpp): the run holds its
  // positions and one block, whatever the size of the set. What it writes must fit on the disk.
  const std::int64_t H = rope ? opt.heads : 0;
  const std::int64_t D = rope ? spec.rope.head_dim : 0, P = rope ? rope_pairs(spec.rope) : 0;
  const int streams = rope && spec.rope.mrope != MropeMode::none ? 3 : 1;
  double token_bytes = rope ? 2.0 * static_cast<double>(H * D) * 4 : 0;  // q, k
  for (DType d : dtypes) {
    const double sz = static_cast<double>(dtype_size(tensor_dtype(d)));
    token_bytes += rope ? 2 * static_cast<double>(P + H * D) * sz : static_cast<double>(spec.sinusoidal.d_model) * sz;
  }
  std::string what;
  if (rope)
    what = "--positions (" + std::to_string(tokens) + " tokens) x --heads " + std::to_string(opt.heads) + " x head_dim " +
           std::to_string(D) + " x " + std::to_string(dtypes.size()) + " dtypes";
  else
    what = "--positions (" + std::to_string(tokens) + " tokens) x d_model " + std::to_string(spec.sinusoidal.d_model) +
           " x " + std::to_string(dtypes.size()) + " dtypes";
  constexpr double kBlockBytes = 32.0 * (1 << 20);
  const std::int64_t block =
      opt.block_tokens > 0
          ? std::min(opt.block_tokens, tokens)
          : static_cast<std::int64_t>(std::clamp(std::floor(kBlockBytes / std::max(token_bytes, 1.0)), 1.0, static_cast<double>(tokens)));
  {
    // In double: the product of the accepted maxima overflows 64 bits.
    const double T = static_cast<double>(tokens), B = static_cast<double>(block);
    const double need = T * 8 * streams + B * token_bytes * 1.5 + (rope ? 2 * B * static_cast<double>(H * D) * 8 : 0);
    require_memory(static_cast<std::uint64_t>(std::min(need, 0x1p63)), opt.max_memory, "golden set of " + what);
    require_disk(static_cast<std::uint64_t>(std::min(T * (token_bytes + 8.0 * streams), 0x1p63)), opt.out, "golden set of " + what);
  }

  std::string attention_factor;
  if (rope) attention_factor = resolve_spec(spec, seq_len, 40).attention_factor;
  detail::GoldenMeta meta;
  meta.positions_argument = opt.positions.argument;
  meta.seq_len = seq_len;
  meta.attention_factor = attention_factor;
  meta.seed = opt.seed;

  // Where the files go, made first so that an existing or unwritable destination, or a shared set of
  // another run, fails before the computation: a temporary sibling folder moved into place at the end
  // (atomic_output.hpp), or the shared set's files, written at the tokens' final offsets.
  std::optional<OutputFolder> folder;
  std::filesystem::path dir;
  std::string context;
  nlohmann::json shared_identity;
  if (shared) {
    const detail::GoldenFiles whole({}, {}, spec, set_tokens, static_cast<int>(H), dtypes, opt.format,
                                    detail::FilesMode::caller_writes);
    shared_identity = detail::run_identity(whole.manifest(meta, nlohmann::json::array()), shard.count,
                                           opt.format == FileFormat::npz ? "npz" : "safetensors");
    dir = join_shared_staging(opt.out, shared_identity, shard, opt.overwrite);
    context = "--shared-out " + opt.out.string();
  } else {
    folder.emplace(opt.out,
                   OutputFolder::Options{.overwrite = opt.overwrite, .create_parents = true, .option = "--out", .command = "golden"});
    dir = folder->tmp();
    context = folder->out().string();
  }
  // A shared file holds the whole set: this shard's tokens start at token `at_token`.
  const std::int64_t file_tokens = shared ? set_tokens : tokens, at_token = shared ? first : 0;
  detail::GoldenFiles files(dir, context, spec, file_tokens, static_cast<int>(H), dtypes, opt.format,
                            shared ? detail::FilesMode::shared_write : detail::FilesMode::create);

  GoldenSummary summary;
  const auto t0 = Clock::now();
  std::atomic<std::int64_t> fast{0}, fallback{0};
  {
    // positions: [tokens] or [3, tokens], one stream at a time
    std::vector<std::int64_t> pv(static_cast<std::size_t>(tokens));
    for (int s = 0; s < streams; ++s) {
      for (std::int64_t t = 0; t < tokens; ++t) {
        const Position& p = positions[static_cast<std::size_t>(t)];
        pv[static_cast<std::size_t>(t)] = s == 0 ? p.t : s == 1 ? p.h : p.w;
      }
      files.group(0).write(0, static_cast<std::uint64_t>(s * file_tokens + at_token) * 8,
                           {reinterpret_cast<const std::uint8_t*>(pv.data()), pv.size() * 8});
    }
  }
  const std::size_t n = dtypes.size();
  std::unique_ptr<const RopeRoundingEngine> rope_engine;
  std::unique_ptr<const SinusoidalRoundingEngine> sin_engine;
  if (rope) {
    rope_engine = std::make_unique<const RopeRoundingEngine>(spec.rope, seq_len, max_pos);
  } else {
    sin_engine = std::make_unique<const SinusoidalRoundingEngine>(spec.sinusoidal, max_pos);
  }
  const auto hd = static_cast<std::size_t>(H * D);
  for (std::int64_t tb = 0; tb < tokens; tb += block) {
    const std::int64_t bt = std::min(block, tokens - tb);
    std::function<void(std::int64_t, std::int64_t)> progress;
    if (opt.progress) progress = [&](std::int64_t done, std::int64_t) { opt.progress(tb + done, tokens); };
    std::vector<DtypeOutputs> outs;
    if (rope) {
      const std::vector<float> q = generate_inputs(opt.seed, InputStream::q, static_cast<std::uint64_t>(bt) * hd,
                                                   static_cast<std::uint64_t>(first + tb) * hd);
      const std::vector<float> k = generate_inputs(opt.seed, InputStream::k, static_cast<std::uint64_t>(bt) * hd,
                                                   static_cast<std::uint64_t>(first + tb) * hd);
      for (DType d : dtypes) {
        const std::string s(to_string(d));
        outs.push_back({d, empty_tensor("cos." + s, tensor_dtype(d), {bt, P}), empty_tensor("sin." + s, tensor_dtype(d), {bt, P}),
                        empty_tensor("q_rot." + s, tensor_dtype(d), {bt, H, D}),
                        empty_tensor("k_rot." + s, tensor_dtype(d), {bt, H, D}), {}});
      }
      run_parallel(bt, threads, progress, [&](std::int64_t b, std::int64_t e, std::atomic<std::int64_t>& done) {
        // q and k of a token share one evaluation: heads [0, H) are q, [H, 2H) are k.
        std::vector<std::vector<double>> c(n, std::vector<double>(static_cast<std::size_t>(P))), s = c;
        std::vector<std::vector<double>> rot(n, std::vector<double>(2 * hd));
        std::vector<double> x(2 * hd);
        std::vector<RoundedOut> rounded(n);
        for (std::size_t d = 0; d < n; ++d) rounded[d] = {c[d].data(), s[d].data(), rot[d].data()};
        RoundingStats stats;
        for (std::int64_t t = b; t < e; ++t) {
          const std::size_t base = static_cast<std::size_t>(t) * hd;
          for (std::size_t i = 0; i < hd; ++i) {
            x[i] = q[base + i];
            x[hd + i] = k[base + i];
          }
          rope_engine->evaluate(positions[static_cast<std::size_t>(tb + t)], x, static_cast<int>(2 * H), dtypes, rounded, stats);
          for (std::size_t d = 0; d < n; ++d) {
            DtypeOutputs& o = outs[d];
            const std::size_t sz = dtype_size(o.cos.dtype);
            const std::size_t row = static_cast<std::size_t>(t) * static_cast<std::size_t>(P) * sz;
            for (std::size_t j = 0; j < static_cast<std::size_t>(P); ++j) {
              store(o.cos.data.data() + row + j * sz, c[d][j], o.dtype);
              store(o.sin.data.data() + row + j * sz, s[d][j], o.dtype);
            }
            for (std::size_t i = 0; i < hd; ++i) {
              store(o.q_rot.data.data() + (base + i) * sz, rot[d][i], o.dtype);
              store(o.k_rot.data.data() + (base + i) * sz, rot[d][hd + i], o.dtype);
            }
          }
          done.fetch_add(1, std::memory_order_relaxed);
        }
        fast += stats.fast_values;
        fallback += stats.fallback_values;
      });
      const std::uint64_t in_at = static_cast<std::uint64_t>(at_token + tb) * hd * 4;
      files.group(0).write(1, in_at, {reinterpret_cast<const std::uint8_t*>(q.data()), q.size() * 4});
      files.group(0).write(2, in_at, {reinterpret_cast<const std::uint8_t*>(k.data()), k.size() * 4});
      for (std::size_t d = 0; d < n; ++d) {
        const DtypeOutputs& o = outs[d];
        const std::uint64_t sz = dtype_size(o.cos.dtype), t0b = static_cast<std::uint64_t>(at_token + tb);
        files.group(1 + d).write(0, t0b * static_cast<std::uint64_t>(P) * sz, bytes_of(o.cos));
        files.group(1 + d).write(1, t0b * static_cast<std::uint64_t>(P) * sz, bytes_of(o.sin));
        files.group(1 + d).write(2, t0b * hd * sz, bytes_of(o.q_rot));
        files.group(1 + d).write(3, t0b * hd * sz, bytes_of(o.k_rot));
      }
    } else {
      const int dm = spec.sinusoidal.d_model;
      for (DType d : dtypes)
        outs.push_back({d, {}, {}, {}, {}, empty_tensor("pe." + std::string(to_string(d)), tensor_dtype(d), {bt, dm})});
      run_parallel(bt, threads, progress, [&](std::int64_t b, std::int64_t e, std::atomic<std::int64_t>& done) {
        std::vector<std::vector<double>> row(n, std::vector<double>(static_cast<std::size_t>(dm)));
        std::vector<double*> ptrs(n);
        for (std::size_t d = 0; d < n; ++d) ptrs[d] = row[d].data();
        RoundingStats stats;
        for (std::int64_t t = b; t < e; ++t) {
          sin_engine->evaluate(positions[static_cast<std::size_t>(tb + t)].t, dtypes, ptrs, stats);
          for (std::size_t d = 0; d < n; ++d) {
            const std::size_t sz = dtype_size(outs[d].pe.dtype);
            for (int c = 0; c < dm; ++c)
              store(outs[d].pe.data.data() + (static_cast<std::size_t>(t) * static_cast<std::size_t>(dm) + static_cast<std::size_t>(c)) * sz,
                    row[d][static_cast<std::size_t>(c)], outs[d].dtype);
          }
          done.fetch_add(1, std::memory_order_relaxed);
        }
        fast += stats.fast_values;
        fallback += stats.fallback_values;
      });
      for (std::size_t d = 0; d < n; ++d)
        files.group(1 + d).write(0, static_cast<std::uint64_t>(at_token + tb) * static_cast<std::uint64_t>(dm) * dtype_size(outs[d].pe.dtype),
                                 bytes_of(outs[d].pe));
    }
  }
  if (opt.progress) opt.progress(tokens, tokens);
  const auto t1 = Clock::now();
  summary.compute_seconds = std::chrono::duration<double>(t1 - t0).count();
  summary.fast_values = fast.load();
  summary.fallback_values = fallback.load();

  meta.min_pos = part_min;
  meta.max_pos = part_max;
  meta.fast_values = summary.fast_values;
  meta.fallback_values = summary.fallback_values;
  if (shared) {
    // The completion record, written only once this shard's bytes are on the disk: what `merge
    // --shared` needs from it besides the files.
    nlohmann::json record = {
        {"run", shared_identity},
        {"shard", {{"index", shard.index}, {"count", shard.count}, {"first_token", first}, {"tokens", tokens}, {"set_tokens", set_tokens}}},
        {"positions", {{"min", part_min}, {"max", part_max}}},
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
    write_shard_record(opt.out, shard, record);
    summary.manifest = record;
  } else {
    if (opt.shard)  // also 1/1: a one-shard matrix still goes through `merge`
      meta.shard = {{"index", shard.index}, {"count", shard.count}, {"first_token", first}, {"set_tokens", set_tokens}};
    summary.manifest = files.finish(meta);
    folder->write("manifest.json", summary.manifest.dump(2) + "\n");
    folder->commit();  // one rename: refuses to replace without --overwrite, one exchange with it
  }
  summary.write_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return summary;
}

}  // namespace ropecheck::golden
