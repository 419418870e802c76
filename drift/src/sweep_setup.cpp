#include "sweep_setup.hpp"

#include <cmath>
#include <string>

#include "parallel.hpp"
#include "ropecheck/golden/input_generator.hpp"
#include "ropecheck/io/memory_budget.hpp"
#include "ropecheck/formulas/rope.hpp"

namespace ropecheck::drift::detail {

namespace {
}  // namespace

Setup make_setup(const EncodingSpec& spec, const DriftOptions& options, std::size_t kernels) {
  if (spec.family != Family::rope)
    throw SpecError("drift measures RoPE only; '" + spec.name + "' is a sinusoidal spec");
  validate(spec);
  const DriftOptions& o = options;
  if (o.heads < 1 || o.heads > 64) throw SpecError("--heads must be in [1, 64], got " + std::to_string(o.heads));
  if (o.shifts.empty() || o.shifts.size() > 8)
    throw SpecError("--shifts needs 1 to 8 values, got " + std::to_string(o.shifts.size()));
  for (std::int64_t v : o.shifts)
    if (v < 1 || v > kMaxSweepPositions)
      throw SpecError("--shifts: each shift must be in [1, 2^24], got " + std::to_string(v));
  if (o.key_distance < 0 || o.key_distance > kMaxSweepPositions)
    throw SpecError("--key-distance must be in [0, 2^24], got " + std::to_string(o.key_distance));
  if (o.seq_len && (*o.seq_len < 1 || *o.seq_len > kMaxPosition))
    throw SpecError("--seq-len must be >= 1, got " + std::to_string(*o.seq_len));

  drift::require_memory(spec, o, kernels);

  Setup s;
  s.spec = spec;
  s.opt = options;
  s.opt.progress = nullptr;
  s.plan = make_sampling_plan(o.sampling);
  s.seq_len = o.seq_len.value_or(o.sampling.max_pos);
  s.exact = std::make_unique<ExactRope>(spec.rope, s.seq_len);
  s.att = s.exact->attention_factor();
  s.att_f64 = s.exact->attention_factor_f64();
  s.P = s.exact->pairs();
  s.D = spec.rope.head_dim;
  s.heads = o.heads;
  s.S = static_cast<int>(o.shifts.size());
  s.K = 2 + 2 * s.S;
  s.threads = resolve_threads(o.threads);
  for (int j = 0; j < s.P; ++j) {
    s.channels.push_back(pair_channels(spec.rope, j));
    const double w = s.exact->inv_freq(j);
    s.w.push_back(w);
    s.abs_log_w.push_back(w == 0 ? 0.0 : std::fabs(std::log(std::fabs(w))));
  }
  for (const Bin& b : s.plan.bins) s.edges.push_back(b.hi);

  const std::int64_t n = s.samples();
  s.ecos.resize(sz(n * s.P));
  s.esin.resize(sz(n * s.P));
  parallel_for(n, s.threads, [&](std::int64_t b, std::int64_t e, int) {
    for (std::int64_t i = b; i < e; ++i)
      s.exact->cos_sin_row(Position::uniform(s.plan.positions[sz(i)]),
                           std::span<DD>(s.ecos.data() + i * s.P, sz(s.P)), std::span<DD>(s.esin.data() + i * s.P, sz(s.P)));
  });
  return s;
}

Chunk make_chunk(const Setup& s, std::int64_t begin, std::int64_t end) {
  Chunk c;
  c.begin = begin;
  c.end = end;
  const std::int64_t HD = s.heads * s.D;
  c.token_positions.reserve(sz((end - begin) * s.K));
  c.x.resize(sz((end - begin) * s.K * HD));
  for (std::int64_t i = begin; i < end; ++i) {
    const std::int64_t p = s.plan.positions[sz(i)], n = s.key_position(p);
    c.table_positions.push_back(p);
    c.token_positions.push_back(p);
    c.token_positions.push_back(n);
    for (std::int64_t sh : s.opt.shifts) {
      c.token_positions.push_back(p + sh);
      c.token_positions.push_back(n + sh);
    }
    // The sample's q and k vectors (index by the global sample index: any chunking gives the same).
    float* base = c.x.data() + (i - begin) * s.K * HD;
    for (std::int64_t e = 0; e < HD; ++e) {
      const auto idx = static_cast<std::uint64_t>(i * HD + e);
      const float q = golden::generate_input(s.opt.seed, golden::InputStream::q, idx);
      const float k = golden::generate_input(s.opt.seed, golden::InputStream::k, idx);
      for (int t = 0; t < s.K; ++t) base[t * HD + e] = (t % 2 == 0) ? q : k;
    }
  }
  return c;
}

void run_chunk(SweptKernel& c, const Setup& s, const Chunk& chunk, ChunkOutput& out) {
  out.rot.assign(chunk.x.size(), 0.0);
  c.rotate(chunk.token_positions, s.heads, chunk.x, out.rot);
  out.has_table = c.has_table();
  if (out.has_table) {
    const std::size_t n = chunk.table_positions.size() * sz(s.P);
    out.tcos.assign(n, 0.0);
    out.tsin.assign(n, 0.0);
    out.has_table = c.table(chunk.table_positions, out.tcos, out.tsin);
  }
}

}  // namespace ropecheck::drift::detail

namespace ropecheck::drift {

std::uint64_t estimate_memory_bytes(const EncodingSpec& spec, const DriftOptions& o, std::size_t kernels) {
  // In double: head_dim and the sample count can be far beyond what fits, and the estimate must say so.
  const auto n = static_cast<double>(make_sampling_plan(o.sampling).positions.size());
  const auto N = static_cast<double>(o.sampling.max_pos);
  const double P = rope_pairs(spec.rope), D = spec.rope.head_dim, H = o.heads;
  const auto S = static_cast<double>(o.shifts.size());
  const double K = 2 + 2 * S, C = static_cast<double>(std::max<std::size_t>(kernels, 2));
  const double chunk = std::min<double>(n, static_cast<double>(detail::kSamplesPerChunk));
  constexpr double kUniqueChunk = 16384, kF = sizeof(float), kD = sizeof(double);
  double b = n * P * 2 * sizeof(DD);                              // exact cos / sin rows
  b += C * n * (sizeof(Metrics) + S * sizeof(Stat) + 8);          // per-sample metrics of every kernel
  b += chunk * K * (H * D * (kF + 2 * kD) + 8);                   // a chunk's inputs and two kernels' outputs
  b += chunk * P * 4 * kD;                                        // two kernels' cos / sin tables
  if (o.uniqueness) b += N * sizeof(RowHash) + kUniqueChunk * D * (kF + 2 * kD);
  b *= 2;  // a plugin's shared arena holds a call's inputs and outputs again; allocator slack
  b += 64.0 * (1 << 20);  // the program itself
  return static_cast<std::uint64_t>(std::min(b, 0x1p63));
}

void require_memory(const EncodingSpec& spec, const DriftOptions& o, std::size_t kernels) {
  io::require_memory(estimate_memory_bytes(spec, o, kernels), o.max_memory,
                         "drift over " + std::to_string(make_sampling_plan(o.sampling).positions.size()) +
                             " sampled positions (--max-pos " + std::to_string(o.sampling.max_pos) + ", --window " +
                             std::to_string(o.sampling.window) + ", --per-octave " + std::to_string(o.sampling.per_octave) +
                             ") x --heads " + std::to_string(o.heads) + " x head_dim " +
                             std::to_string(spec.rope.head_dim) + " x " + std::to_string(kernels) + " candidates");
}

}  // namespace ropecheck::drift
