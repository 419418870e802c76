#include "ropecheck/golden/golden_writer.hpp"

#include <mpfr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "ropecheck/golden/atomic_output.hpp"
#include "ropecheck/golden/input_generator.hpp"
#include "ropecheck/golden/memory_budget.hpp"
#include "ropecheck/golden/npy.hpp"
#include "ropecheck/golden/safetensors.hpp"
#include "ropecheck/golden/sha256.hpp"
#include "ropecheck/golden/tensor.hpp"
#include "ropecheck/reference/fast_rounding.hpp"
#include "ropecheck/reference/mpfr_value.hpp"
#include "ropecheck/reference/resolve.hpp"
#include "ropecheck/core/spec_json.hpp"

#ifndef ROPECHECK_VERSION
#define ROPECHECK_VERSION "unknown"
#endif

namespace ropecheck::golden {
namespace {

using Clock = std::chrono::steady_clock;

TensorDType tensor_dtype(DType t) {
  switch (t) {
    case DType::f64: return TensorDType::f64;
    case DType::f32: return TensorDType::f32;
    case DType::f16: return TensorDType::f16;
    case DType::bf16: return TensorDType::bf16;
  }
  return TensorDType::f64;
}

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

std::vector<std::uint8_t> serialize(const std::vector<Tensor>& group, FileFormat f,
                                    const std::map<std::string, std::string>& metadata) {
  return f == FileFormat::safetensors ? serialize_safetensors(group, metadata) : serialize_npz(group);
}

}  // namespace

GoldenSummary write_golden_set(const GoldenOptions& opt) {
  const EncodingSpec& spec = opt.spec;
  const bool rope = spec.family == Family::rope;
  const auto& positions = opt.positions.positions;
  const auto tokens = static_cast<std::int64_t>(positions.size());
  if (tokens == 0) throw SpecError("--positions: no positions");
  if (opt.heads < 1 || opt.heads > 4096) throw SpecError("--heads must be in [1, 4096], got " + std::to_string(opt.heads));
  if (opt.positions.has_triples && (!rope || spec.rope.mrope == MropeMode::none))
    throw SpecError("--positions: T/H/W triples need a multimodal RoPE spec (rope.mrope)");

  std::vector<DType> dtypes = {DType::f64};
  for (DType d : opt.dtypes)
    if (std::find(dtypes.begin(), dtypes.end(), d) == dtypes.end()) dtypes.push_back(d);

  std::int64_t max_pos = 0, min_pos = positions.front().t;
  for (const Position& p : positions)
    for (std::int64_t v : {p.t, p.h, p.w}) {
      max_pos = std::max(max_pos, v);
      min_pos = std::min(min_pos, v);
    }
  if (max_pos > kMaxPosition)  // a grid's rows and columns are added to its start position
    throw SpecError("--positions: position " + std::to_string(max_pos) + " is beyond 2^53 = 9007199254740992");
  // Hugging Face's run-time update resolves dynamic / LongRoPE with max(position_ids) + 1.
  // Capped at 2^53 (the largest accepted): position 2^53 itself is valid (reliability-2 defect 12).
  const std::int64_t seq_len = opt.seq_len.value_or(std::min(max_pos + 1, kMaxPosition));
  const int threads = opt.threads > 0 ? opt.threads : std::max(1u, std::thread::hardware_concurrency());

  {
    // What the run holds at its peak (memory_budget.hpp): inputs (and their copy in the input file's
    // tensors), every output tensor of every dtype, and the largest file serialized in memory.
    // In double: the product of the accepted maxima overflows 64 bits.
    const auto T = static_cast<double>(tokens);
    const std::size_t nd = dtypes.size();
    double out_bytes = 0, largest = 0, inputs = T * 8 * 3;
    std::string what;
    if (rope) {
      const double HD = static_cast<double>(opt.heads) * spec.rope.head_dim;
      const double P = rope_pairs(spec.rope);
      inputs += 4 * T * HD * 4;
      for (DType d : dtypes) {
        const double group = 2 * T * (P + HD) * static_cast<double>(dtype_size(tensor_dtype(d)));
        out_bytes += group;
        largest = std::max(largest, group);
      }
      what = "--positions (" + std::to_string(tokens) + " tokens) x --heads " + std::to_string(opt.heads) +
             " x head_dim " + std::to_string(spec.rope.head_dim) + " x " + std::to_string(nd) + " dtypes";
    } else {
      const double dm = spec.sinusoidal.d_model;
      for (DType d : dtypes) {
        const double group = T * dm * static_cast<double>(dtype_size(tensor_dtype(d)));
        out_bytes += group;
        largest = std::max(largest, group);
      }
      what = "--positions (" + std::to_string(tokens) + " tokens) x d_model " + std::to_string(dm) + " x " +
             std::to_string(nd) + " dtypes";
    }
    largest = std::max(largest, inputs / 2);
    require_memory(static_cast<std::uint64_t>(std::min(inputs + out_bytes + largest, 0x1p63)), opt.max_memory, "golden set of " + what);
  }

  // A temporary sibling folder, moved into place at the end (atomic_output.hpp); made first so that
  // an existing or unwritable destination fails before the computation.
  OutputFolder folder(opt.out, {.overwrite = opt.overwrite, .create_parents = true, .option = "--out", .command = "golden"});

  GoldenSummary summary;
  const auto t0 = Clock::now();
  std::vector<Tensor> inputs;
  std::vector<DtypeOutputs> outs;
  std::atomic<std::int64_t> fast{0}, fallback{0};
  std::string attention_factor;

  if (rope) {
    const RopeSpec& r = spec.rope;
    const int D = r.head_dim, P = rope_pairs(r), H = opt.heads;
    const std::vector<float> q = generate_inputs(opt.seed, InputStream::q, static_cast<std::uint64_t>(tokens * H * D));
    const std::vector<float> k = generate_inputs(opt.seed, InputStream::k, static_cast<std::uint64_t>(tokens * H * D));
    const RopeRoundingEngine engine(r, seq_len, max_pos);
    attention_factor = resolve_spec(spec, seq_len, 40).attention_factor;
    for (DType d : dtypes) {
      const std::string s(to_string(d));
      DtypeOutputs o{d, empty_tensor("cos." + s, tensor_dtype(d), {tokens, P}),
                     empty_tensor("sin." + s, tensor_dtype(d), {tokens, P}),
                     empty_tensor("q_rot." + s, tensor_dtype(d), {tokens, H, D}),
                     empty_tensor("k_rot." + s, tensor_dtype(d), {tokens, H, D}), {}};
      outs.push_back(std::move(o));
    }
    run_parallel(tokens, threads, opt.progress, [&](std::int64_t b, std::int64_t e, std::atomic<std::int64_t>& done) {
      // q and k of a token share one evaluation: heads [0, H) are q, [H, 2H) are k.
      const std::size_t n = dtypes.size(), hd = static_cast<std::size_t>(H * D);
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
        engine.evaluate(positions[static_cast<std::size_t>(t)], x, 2 * H, dtypes, rounded, stats);
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
    // positions: [tokens] or [3, tokens]
    if (r.mrope != MropeMode::none) {
      std::vector<std::int64_t> pv(static_cast<std::size_t>(3 * tokens));
      for (std::int64_t t = 0; t < tokens; ++t) {
        const Position& p = positions[static_cast<std::size_t>(t)];
        pv[static_cast<std::size_t>(t)] = p.t;
        pv[static_cast<std::size_t>(tokens + t)] = p.h;
        pv[static_cast<std::size_t>(2 * tokens + t)] = p.w;
      }
      inputs.push_back(make_i64("positions", {3, tokens}, pv));
    } else {
      std::vector<std::int64_t> pv;
      for (const Position& p : positions) pv.push_back(p.t);
      inputs.push_back(make_i64("positions", {tokens}, pv));
    }
    inputs.push_back(make_f32("q", {tokens, H, D}, q));
    inputs.push_back(make_f32("k", {tokens, H, D}, k));
  } else {
    const SinusoidalSpec& s = spec.sinusoidal;
    const int dm = s.d_model;
    const SinusoidalRoundingEngine engine(s, max_pos);
    for (DType d : dtypes) {
      DtypeOutputs o{d, {}, {}, {}, {}, empty_tensor("pe." + std::string(to_string(d)), tensor_dtype(d), {tokens, dm})};
      outs.push_back(std::move(o));
    }
    run_parallel(tokens, threads, opt.progress, [&](std::int64_t b, std::int64_t e, std::atomic<std::int64_t>& done) {
      const std::size_t n = dtypes.size();
      std::vector<std::vector<double>> row(n, std::vector<double>(static_cast<std::size_t>(dm)));
      std::vector<double*> ptrs(n);
      for (std::size_t d = 0; d < n; ++d) ptrs[d] = row[d].data();
      RoundingStats stats;
      for (std::int64_t t = b; t < e; ++t) {
        engine.evaluate(positions[static_cast<std::size_t>(t)].t, dtypes, ptrs, stats);
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
    std::vector<std::int64_t> pv;
    for (const Position& p : positions) pv.push_back(p.t);
    inputs.push_back(make_i64("positions", {tokens}, pv));
  }
  const auto t1 = Clock::now();
  summary.compute_seconds = std::chrono::duration<double>(t1 - t0).count();
  summary.fast_values = fast.load();
  summary.fallback_values = fallback.load();

  // Files and manifest go to the temporary folder made before the computation.
  const std::string ext = opt.format == FileFormat::safetensors ? ".safetensors" : ".npz";

  const std::map<std::string, std::string> metadata = {{"producer", "ropecheck " ROPECHECK_VERSION},
                                                       {"spec", spec.name}};
  nlohmann::json files = nlohmann::json::array(), tensors = nlohmann::json::array();
  auto emit = [&](const std::string& file, const std::vector<Tensor>& group) {
    const std::vector<std::uint8_t> bytes = serialize(group, opt.format, metadata);
    folder.write(file, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    files.push_back({{"file", file}, {"bytes", bytes.size()}, {"sha256", sha256_hex(bytes)}});
  };
  auto describe = [&](const Tensor& t, const std::string& file, const std::string& role, const std::string& meaning,
                      bool folded) {
    nlohmann::json j = {{"name", t.name},          {"file", file},       {"dtype", std::string(to_string(t.dtype))},
                        {"shape", t.shape},        {"role", role},       {"meaning", meaning},
                        {"attention_factor_folded", folded}};
    if (opt.format == FileFormat::npz && t.dtype == TensorDType::bf16) j["npy_storage"] = "uint16 bit patterns";
    tensors.push_back(j);
  };

  const std::string in_file = "inputs" + ext;
  emit(in_file, inputs);
  for (const Tensor& t : inputs) {
    if (t.name == "positions")
      describe(t, in_file, "input",
               t.shape.size() == 2 ? "position of each token, streams (t, h, w) x tokens" : "position of each token",
               false);
    else
      describe(t, in_file, "input",
               "input " + t.name + " [tokens, heads, head_dim] from " + kGeneratorName + " v" +
                   std::to_string(kGeneratorVersion) + ", exactly representable in bf16",
               false);
  }
  for (DtypeOutputs& o : outs) {
    const std::string file = "outputs_" + std::string(to_string(o.dtype)) + ext;
    std::vector<Tensor> group;
    if (rope) {
      group = {std::move(o.cos), std::move(o.sin), std::move(o.q_rot), std::move(o.k_rot)};
    } else {
      group = {std::move(o.pe)};
    }
    emit(file, group);
    for (const Tensor& t : group) {
      const std::string base = t.name.substr(0, t.name.find('.'));
      const std::string rounding = ", correctly rounded once to " + std::string(to_string(o.dtype));
      if (base == "cos" || base == "sin")
        describe(t, file, "output", base + " of the angle of each pair (frequency order), no attention factor" + rounding,
                 false);
      else if (base == "pe")
        describe(t, file, "output", "sinusoidal encoding row of each token's position" + rounding, false);
      else
        describe(t, file, "output",
                 base.substr(0, 1) + " rotated by RoPE, attention factor folded into the rotated channels, "
                                     "pass-through channels copied" + rounding,
                 true);
    }
  }

  std::vector<std::string> dtype_names;
  for (DType d : dtypes) dtype_names.emplace_back(to_string(d));
  nlohmann::json manifest = {
      {"format", "ropecheck-golden"},
      {"format_version", 1},
      {"ropecheck_version", ROPECHECK_VERSION},
      {"spec", spec_to_json(spec)},
      {"seq_len", rope ? nlohmann::json(seq_len) : nlohmann::json(nullptr)},
      {"attention_factor", rope ? nlohmann::json(attention_factor) : nlohmann::json(nullptr)},
      {"positions",
       {{"argument", opt.positions.argument},
        {"tokens", tokens},
        {"streams", rope && spec.rope.mrope != MropeMode::none ? 3 : 1},
        {"min", min_pos},
        {"max", max_pos}}},
      {"generator",
       {{"name", kGeneratorName}, {"version", kGeneratorVersion}, {"seed", opt.seed}, {"heads", rope ? opt.heads : 0}}},
      {"reference",
       {{"backend", "MPFR via Boost.Multiprecision"},
        {"mpfr_version", mpfr_get_version()},
        {"rounding", "round-to-nearest-even, once, from the exact value"},
        {"method",
         "double-double evaluation with a proven error bound; values whose rounding is in doubt are recomputed "
         "with MPFR at increasing precision (Ziv)"},
        {"fast_path_values", summary.fast_values},
        {"mpfr_fallback_values", summary.fallback_values}}},
      {"dtypes", dtype_names},
      {"files", files},
      {"tensors", tensors}};
  {
    const std::string text = manifest.dump(2) + "\n";
    folder.write("manifest.json", text);
  }
  folder.commit();  // one rename: refuses to replace without --overwrite, one exchange with it

  summary.write_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  summary.manifest = std::move(manifest);
  return summary;
}

}  // namespace ropecheck::golden
