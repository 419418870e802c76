// The CUDA kernels' test matrix, shared by the GPU tests (test_cuda_kernels.cpp, label gpu: the real
// kernels on a device) and the emulation tests (test_cuda_emulation.cpp, label unit: the kernels'
// code run on the host, kernels/cuda/emulation.hpp). A Candidate runs the CUDA entry points on host
// views; the matrix judges its outputs against the CPU kernels and the exact reference.
//
// For every preset below x both layouts x every recipe x storage dtype (f32, f16, bf16, f64):
//   - rope_apply on q (3 heads) and k (2 heads), in place, contiguous (the kernels' fast 16-byte
//     path where it applies), int64 positions; the same call on the CPU;
//   - the same q out of place from a strided view (stride_dim 2, head-major) with int32 positions
//     (the generic path): must equal the fast path's result bit for bit;
//   - f32 in, bf16 out (mixed dtypes, generic path) against the CPU.
// What "equal" means per recipe (kernels/cuda/README.md):
//   - accurate (f32 / f16 / bf16 storage) is deterministic across devices: bit-identical to the CPU,
//     except for angles past the Cody-Waite range 2^28, where both call a libm (glibc / CUDA);
//   - every other recipe calls a vendor sinf / cosf (CUDA's; __sinf / __cosf for fast-sincos; binary64
//     sin / cos for accurate's f64 path) where the CPU has its own polynomials: the candidate must be
//     within the recipe's accuracy class against the exact reference (accuracy/ERROR_MODEL.md), and within
//     twice the class's angle-independent bound of the CPU result (both evaluate the same angle;
//     fast-sincos: twice the whole bound, since __sinf's error grows with the angle);
//   - known-bad recipes (bf16/f16 inverse frequencies or positions) have no class: CPU comparison only.
// Inputs are k / 64 with |k| <= 256 (exact in every dtype), from std::mt19937_64 seeded with kSeed.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kernels/scalar_recipes.hpp"
#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"
#include "test_scale.hpp"

namespace ropecheck::cuda_matrix {

using namespace ropecheck::kernels;
using accuracy::AccuracyClass;
using accuracy::Quantity;

// The CUDA entry points on host views (the candidate moves the data where it runs).
class Candidate {
 public:
  virtual ~Candidate() = default;
  virtual void apply(const RopePlan& plan, const PositionsView& pos, const TensorView& q_in, const TensorView& q_out,
                     const TensorView& k_in, const TensorView& k_out) = 0;
  virtual void cos_sin_table(const RopePlan& plan, const PositionsView& pos, void* cos_out, void* sin_out,
                             DType dtype) = 0;
  virtual void sinusoidal(const SinusoidalSpec& spec, Recipe recipe, const PositionsView& pos, void* out,
                          DType dtype) = 0;
};

inline constexpr std::uint64_t kSeed = 20261121;
inline constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64};
inline constexpr double kReduceLimit = 0x1p28;  // the accurate recipe's Cody-Waite range (kernels/src/kernel_detail.hpp)

// ---- values in the four storage formats ----------------------------------------------------------

inline std::size_t dsize(DType t) { return t == DType::f64 ? 8 : (t == DType::f32 ? 4 : 2); }

inline std::vector<unsigned char> encode(const std::vector<double>& v, DType t) {
  std::vector<unsigned char> out(v.size() * dsize(t));
  for (std::size_t i = 0; i < v.size(); ++i) {
    unsigned char* p = out.data() + i * dsize(t);
    if (t == DType::f64) {
      std::memcpy(p, &v[i], 8);
    } else if (t == DType::f32) {
      const auto f = static_cast<float>(v[i]);
      std::memcpy(p, &f, 4);
    } else {
      const auto f = static_cast<float>(v[i]);
      const std::uint16_t b = t == DType::bf16 ? f32_to_bf16_bits(f) : f32_to_f16_bits(f);
      std::memcpy(p, &b, 2);
    }
  }
  return out;
}

inline double decode_one(const unsigned char* p, DType t) {
  if (t == DType::f64) {
    double d;
    std::memcpy(&d, p, 8);
    return d;
  }
  if (t == DType::f32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  std::uint16_t b;
  std::memcpy(&b, p, 2);
  return t == DType::bf16 ? bf16_bits_to_f32(b) : f16_bits_to_f32(b);
}

inline std::vector<double> decode(const std::vector<unsigned char>& bytes, DType t) {
  std::vector<double> v(bytes.size() / dsize(t));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = decode_one(bytes.data() + i * dsize(t), t);
  return v;
}

// Same value, or both NaN (payloads differ between libms and are not part of the contract).
inline bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  std::uint64_t ua, ub;
  std::memcpy(&ua, &a, 8);
  std::memcpy(&ub, &b, 8);
  return ua == ub;
}

inline std::vector<double> random_values(std::size_t n, std::mt19937_64& rng) {
  std::vector<double> v(n);
  for (double& x : v) x = (static_cast<double>(rng() % 513) - 256.0) / 64.0;  // 8 significant bits at most
  return v;
}

// ---- what each recipe promises -------------------------------------------------------------------

struct Expectation {
  bool bitwise = false;                    // identical to the CPU (angles within the reduction range)
  std::optional<AccuracyClass> cls;        // class against the exact reference; none for known-bad ones
  AccuracyClass arithmetic = AccuracyClass::fp32_angle;  // whose angle-independent bound bounds |GPU - CPU|
  bool angle_dependent_trig = false;       // fast-sincos: __sinf's error grows with the angle
};

inline Expectation expectation(Recipe r, DType out) {
  Expectation e;
  switch (r) {
    case Recipe::accurate:
      if (out == DType::f64) {
        e.cls = e.arithmetic = AccuracyClass::fp64_angle;
      } else {
        e.bitwise = true;
        e.cls = e.arithmetic = out == DType::f32 ? AccuracyClass::f32_reduced : AccuracyClass::fp64_angle;
      }
      break;
    case Recipe::hf:
      e.cls = e.arithmetic = out == DType::bf16 ? AccuracyClass::bf16_table
                             : out == DType::f16 ? AccuracyClass::f16_table
                                                 : AccuracyClass::fp32_angle;
      break;
    case Recipe::bf16_table: e.cls = e.arithmetic = AccuracyClass::bf16_table; break;
    case Recipe::f16_table: e.cls = e.arithmetic = AccuracyClass::f16_table; break;
    case Recipe::meta:
    case Recipe::ggml: e.cls = AccuracyClass::fp32_angle; break;
    case Recipe::fast_sincos:
      e.cls = AccuracyClass::fp32_angle;
      e.angle_dependent_trig = true;
      break;
    case Recipe::bf16_inv_freq:
    case Recipe::f16_inv_freq:
    case Recipe::bf16_positions:
    case Recipe::f16_positions: break;  // known bad: no class; same f32 angle on both devices
  }
  return e;
}

// ---- statistics of one (recipe, dtype) over every case, printed as a table --------------------------

struct Stats {
  double worst_exact = 0;     // max |gpu - exact| / allowed (class)
  double worst_cpu = 0;       // max |gpu - cpu| / allowed (same-angle bound)
  double worst_cpu_u32 = 0;   // max |gpu - cpu| / (u32 M): for reading, not asserted
  std::int64_t elements = 0, bit_differences = 0, failures = 0;
  std::string first_failure;
  void fail(const std::string& what) {
    if (failures++ == 0) first_failure = what;
  }
};

inline std::map<std::string, Stats>& stats_table() {
  static std::map<std::string, Stats> t;
  return t;
}

inline void print_stats(const char* title) {
  std::printf("%s (seed %llu)\n%-34s %10s %10s %12s %12s %10s\n", title, static_cast<unsigned long long>(kSeed),
              "recipe / dtype", "elements", "bit diffs", "exact/bound", "|g-c|/bound", "|g-c|/u32M");
  for (const auto& [k, s] : stats_table())
    std::printf("%-34s %10lld %10lld %12.4g %12.4g %10.4g\n", k.c_str(), static_cast<long long>(s.elements),
                static_cast<long long>(s.bit_differences), s.worst_exact, s.worst_cpu, s.worst_cpu_u32);
  stats_table().clear();
}

// ---- one element's verdict ------------------------------------------------------------------------

struct Element {
  double gpu, cpu;
  long double exact;   // NaN when there is no exact value to compare with
  double M;            // magnitude (ERROR_MODEL.md section 1)
  Quantity q;
  accuracy::PairAngle angle;
  double abs_theta_computed;  // |angle| as the recipe formed it (accurate's reduction range)
};

inline void judge(const Expectation& e, DType dt, const Element& x, Stats& st, const std::string& where) {
  ++st.elements;
  const bool bits_equal = same(x.gpu, x.cpu);
  if (!bits_equal) ++st.bit_differences;
  if (std::isnan(x.gpu) || std::isnan(x.cpu)) {
    if (!bits_equal) st.fail(where + ": NaN on one device only (gpu " + std::to_string(x.gpu) + ", cpu " + std::to_string(x.cpu) + ")");
    return;
  }
  const double diff = std::fabs(x.gpu - x.cpu);
  st.worst_cpu_u32 = std::max(st.worst_cpu_u32, x.M > 0 ? diff / (0x1p-24 * x.M) : 0.0);
  if (e.bitwise && !bits_equal && x.abs_theta_computed <= kReduceLimit) {
    std::ostringstream m;
    m.precision(17);
    m << where << ": not bit-identical to the CPU (gpu " << x.gpu << ", cpu " << x.cpu << ")";
    st.fail(m.str());
  }
  // |gpu - cpu|: both are within the class's angle-independent bound of the value at the same
  // computed angle; fast-sincos within the whole class bound of the exact value.
  const accuracy::ClassBound cb = accuracy::class_bound(e.arithmetic, dt, x.q);
  const double allowed_cpu = e.angle_dependent_trig ? 2 * cb.allowed(x.angle, x.M) : 2 * (cb.k_const * x.M + cb.floor);
  if (diff > 0) {
    const double r = diff / allowed_cpu;
    st.worst_cpu = std::max(st.worst_cpu, r);
    if (r > 1) {
      std::ostringstream m;
      m.precision(17);
      m << where << ": |gpu - cpu| = " << diff << " > " << allowed_cpu << " (gpu " << x.gpu << ", cpu " << x.cpu << ")";
      st.fail(m.str());
    }
  }
  if (e.cls && !std::isnan(static_cast<double>(x.exact))) {
    const double err = static_cast<double>(std::fabs(static_cast<long double>(x.gpu) - x.exact));
    const double allowed = accuracy::class_bound(*e.cls, dt, x.q).allowed(x.angle, x.M);
    const double r = err / allowed;
    st.worst_exact = std::max(st.worst_exact, r);
    if (r > 1) {
      std::ostringstream m;
      m.precision(17);
      m << where << ": outside " << accuracy::to_string(*e.cls) << ": |gpu - exact| = " << err << " > " << allowed
        << " (gpu " << x.gpu << ", exact " << static_cast<double>(x.exact) << ")";
      st.fail(m.str());
    }
  }
}

// ---- positions and the exact cos / sin ----------------------------------------------------------------

// Small, powers of two and their neighbours, f16's overflow at 65520, f32's 2^24, past the Cody-Waite
// range (2^28), negative ones.
inline const std::vector<std::int64_t>& base_positions() {
  static const std::vector<std::int64_t> p = {0,        1,         2,        3,        5,         13,       100,
                                              255,      256,       257,      2047,     2049,      4096,     8191,
                                              32767,    65519,     65520,    65536,    131071,    131072,   1000003,
                                              1048575,  16777215,  16777217, 16777259, 300000007, -3,       -70000};
  return p;
}

inline std::vector<Position> positions_for(const RopeSpec& r) {
  std::vector<Position> out;
  for (std::int64_t p : base_positions()) {
    if (r.mrope == MropeMode::none)
      out.push_back(Position::uniform(p));
    else  // three distinct streams
      out.push_back({p, p / 2 + 3, (p * 7) % 1000});
  }
  return out;
}

struct ExactTable {
  std::vector<long double> c, s;  // [token][pair]
  std::vector<double> w;          // binary64 inverse frequency per pair
  long double att = 1;
};

inline ExactTable exact_cos_sin(const RopeSpec& r, const std::vector<Position>& pos) {
  ScopedPrecision guard(256);  // angles below 2^30: far more than enough bits
  const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
  const RopeFrequencies<double> fd = rope_frequencies<double>(r);
  const int P = rope_pairs(r);
  ExactTable t;
  t.w = fd.inv_freq;
  t.att = static_cast<long double>(f.attention_factor);
  for (const Position& p : pos)
    for (int j = 0; j < P; ++j) {
      const Real a = rope_angle(r, f, p, j);
      t.c.push_back(static_cast<long double>(cos(a)));
      t.s.push_back(static_cast<long double>(sin(a)));
    }
  return t;
}

// ---- rope_apply ------------------------------------------------------------------------------------

// At the tiny test scale (test_scale.hpp; the sanitized tests) three presets that take the kernels' paths:
// half-split with partial rotary, interleaved mrope sections, the interleaved layout with an attention
// factor (the presets left out differ in their frequencies, which the plan computes on the host, and in
// combinations of those paths).
inline std::vector<std::string> apply_presets() {
  if (ropecheck::test::tiny_scale()) return {"gpt-neox-20b", "qwen3-vl-8b", "deepseek-v3"};
  return {"llama-3.1-8b", "gpt-j-6b",          "gpt-neox-20b", "qwen2.5-7b-yarn", "phi-3.5-mini",
          "qwen2-vl-7b",  "qwen3-vl-8b",       "gemma-3-4b-global", "deepseek-v3"};
}

inline std::string where_of(const std::string& ctx, std::int64_t token, std::int64_t pos, std::int64_t head, int ch) {
  return ctx + " token " + std::to_string(token) + " (position " + std::to_string(pos) + ") head " +
         std::to_string(head) + " channel " + std::to_string(ch);
}


inline std::string test_name(const ::testing::TestParamInfo<std::string>& i) {
  std::string n = i.param;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

// ---- rope_apply ----------------------------------------------------------------------------------------

inline void run_apply_matrix(Candidate& cand, const std::string& preset) {
  const EncodingSpec e = load_preset(preset);
  ASSERT_EQ(e.family, Family::rope);
  for (RopeLayout layout : {RopeLayout::half_split, RopeLayout::interleaved}) {
    RopeSpec r = e.rope;
    r.layout = layout;
    const std::vector<Position> pos = positions_for(r);
    const ExactTable ex = exact_cos_sin(r, pos);
    const auto T = static_cast<std::int64_t>(pos.size());
    const std::int64_t Hq = 3, Hk = 2, D = r.head_dim;
    const int P = rope_pairs(r);
    std::mt19937_64 rng(kSeed);
    const std::vector<double> q = random_values(static_cast<std::size_t>(T * Hq * D), rng);
    const std::vector<double> k = random_values(static_cast<std::size_t>(T * Hk * D), rng);

    // Positions: int64 [T] or [3, T] (t row, h row, w row), and the same as int32.
    std::vector<std::int64_t> p64;
    for (int s = 0; s < (r.mrope == MropeMode::none ? 1 : 3); ++s)
      for (const Position& p : pos) p64.push_back(s == 0 ? p.t : (s == 1 ? p.h : p.w));
    const std::vector<std::int32_t> p32(p64.begin(), p64.end());
    const PositionsView pos64 = r.mrope == MropeMode::none ? PositionsView::of(std::span<const std::int64_t>(p64))
                                                           : PositionsView::three_streams(p64, T);
    PositionsView pos32 = pos64;
    pos32.data = p32.data();
    pos32.is_int64 = false;

    for (const RecipeInfo& info : recipes()) {
      const RopePlan plan = make_rope_plan(r, info.recipe);
      for (DType dt : kDtypes) {
        const std::string ctx = preset + " " + std::string(to_string(layout)) + " " + std::string(info.name) + " " +
                                std::string(to_string(dt));
        SCOPED_TRACE(ctx + " (seed " + std::to_string(kSeed) + ")");
        const Expectation expect = expectation(info.recipe, dt);
        Stats& st = stats_table()[std::string(info.name) + " / " + std::string(to_string(dt))];

        // CPU and candidate, in place, q and k, contiguous, int64 positions.
        std::vector<unsigned char> cq = encode(q, dt), ck = encode(k, dt), gq = cq, gk = ck;
        rope_apply(plan, pos64, TensorView::contiguous(cq.data(), dt, T, Hq, D),
                   TensorView::contiguous(cq.data(), dt, T, Hq, D), TensorView::contiguous(ck.data(), dt, T, Hk, D),
                   TensorView::contiguous(ck.data(), dt, T, Hk, D));
        cand.apply(plan, pos64, TensorView::contiguous(gq.data(), dt, T, Hq, D),
                   TensorView::contiguous(gq.data(), dt, T, Hq, D), TensorView::contiguous(gk.data(), dt, T, Hk, D),
                   TensorView::contiguous(gk.data(), dt, T, Hk, D));
        const std::vector<double> cq_v = decode(cq, dt), ck_v = decode(ck, dt);
        const std::vector<double> gq_v = decode(gq, dt), gk_v = decode(gk, dt);

        {  // The generic path: q from a head-major view with stride_dim 2, out of place, int32 positions.
          std::vector<double> strided(static_cast<std::size_t>(Hq * T * D * 2), 0.0);
          for (std::int64_t t = 0; t < T; ++t)
            for (std::int64_t h = 0; h < Hq; ++h)
              for (std::int64_t c = 0; c < D; ++c)
                strided[static_cast<std::size_t>((h * T + t) * D * 2 + 2 * c)] =
                    q[static_cast<std::size_t>((t * Hq + h) * D + c)];
          std::vector<unsigned char> sin_ = encode(strided, dt), sout(cq.size());
          TensorView vin;
          vin.data = sin_.data();
          vin.dtype = dt;
          vin.tokens = T;
          vin.heads = Hq;
          vin.head_dim = D;
          vin.stride_dim = 2;
          vin.stride_token = 2 * D;
          vin.stride_head = 2 * D * T;
          cand.apply(plan, pos32, vin, TensorView::contiguous(sout.data(), dt, T, Hq, D), {}, {});
          const std::vector<double> go = decode(sout, dt);
          std::int64_t diffs = 0;
          for (std::size_t i = 0; i < go.size(); ++i) diffs += same(go[i], gq_v[i]) ? 0 : 1;
          EXPECT_EQ(diffs, 0) << ctx << ": the generic path (strided view, int32 positions) differs from the fast path";
        }

        // Element by element against the CPU and the exact reference.
        auto check_tensor = [&](const std::vector<double>& x, const std::vector<double>& g,
                                const std::vector<double>& cpu, std::int64_t H, const char* name) {
          for (std::int64_t t = 0; t < T; ++t)
            for (std::int64_t h = 0; h < H; ++h) {
              const auto base = static_cast<std::size_t>((t * H + h) * D);
              for (int j = 0; j < P; ++j) {
                const auto [ia, ib] = pair_channels(r, j);
                const long double a = x[base + static_cast<std::size_t>(ia)], b = x[base + static_cast<std::size_t>(ib)];
                const auto ti = static_cast<std::size_t>(t * P + j);
                const long double c = ex.c[ti], s = ex.s[ti];
                const std::int64_t p = stream_position(r, pos[static_cast<std::size_t>(t)], j);
                const double w = ex.w[static_cast<std::size_t>(j)];
                const auto M = static_cast<double>(ex.att * (std::fabs(a) + std::fabs(b)));
                const accuracy::PairAngle ang = accuracy::pair_angle(static_cast<double>(p), w);
                const double theta = std::fabs(static_cast<double>(p) * w);
                const long double ya = ex.att * (a * c - b * s), yb = ex.att * (b * c + a * s);
                for (int side = 0; side < 2; ++side) {
                  const int ch = side == 0 ? ia : ib;
                  const std::size_t i = base + static_cast<std::size_t>(ch);
                  judge(expect, dt, {g[i], cpu[i], side == 0 ? ya : yb, M, Quantity::rotated, ang, theta}, st,
                        where_of(ctx + " " + name, t, p, h, ch));
                }
              }
              for (std::int64_t ch = 2 * P; ch < D; ++ch) {  // pass-through channels: copies
                const std::size_t i = base + static_cast<std::size_t>(ch);
                judge(expect, dt,
                      {g[i], cpu[i], static_cast<long double>(x[i]), std::fabs(x[i]), Quantity::passthrough, {}, 0}, st,
                      where_of(ctx + " " + name, t, pos[static_cast<std::size_t>(t)].t, h, static_cast<int>(ch)));
              }
            }
        };
        check_tensor(q, gq_v, cq_v, Hq, "q");
        check_tensor(k, gk_v, ck_v, Hk, "k");
        EXPECT_EQ(st.failures, 0) << st.first_failure;
        if (st.failures) return;  // one report per (recipe, dtype) is enough to reproduce
      }

      // Mixed dtypes: f32 in, bf16 out (generic path), against the CPU.
      const std::vector<unsigned char> in32 = encode(q, DType::f32);
      std::vector<unsigned char> cpu_out(static_cast<std::size_t>(T * Hq * D) * 2), g_out(cpu_out.size());
      auto in_view = TensorView::contiguous(const_cast<unsigned char*>(in32.data()), DType::f32, T, Hq, D);
      rope_apply(plan, pos64, in_view, TensorView::contiguous(cpu_out.data(), DType::bf16, T, Hq, D));
      cand.apply(plan, pos64, in_view, TensorView::contiguous(g_out.data(), DType::bf16, T, Hq, D), {}, {});
      const std::vector<double> g = decode(g_out, DType::bf16), c = decode(cpu_out, DType::bf16);
      Expectation mixed = expectation(info.recipe, DType::bf16);
      mixed.cls.reset();  // the class checks run in the matrix above; here the candidate against the CPU
      Stats& st = stats_table()[std::string(info.name) + " / f32->bf16"];
      const std::string ctx =
          preset + " " + std::string(to_string(layout)) + " " + std::string(info.name) + " f32->bf16 q";
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t h = 0; h < Hq; ++h)
          for (int j = 0; j < P; ++j) {
            const auto [ia, ib] = pair_channels(r, j);
            const auto base = static_cast<std::size_t>((t * Hq + h) * D);
            const double a = q[base + static_cast<std::size_t>(ia)], b = q[base + static_cast<std::size_t>(ib)];
            const std::int64_t p = stream_position(r, pos[static_cast<std::size_t>(t)], j);
            const double w = ex.w[static_cast<std::size_t>(j)];
            const double M = static_cast<double>(ex.att) * (std::fabs(a) + std::fabs(b));
            for (int ch : {ia, ib}) {
              const std::size_t i = base + static_cast<std::size_t>(ch);
              judge(mixed, DType::bf16,
                    {g[i], c[i], std::numeric_limits<long double>::quiet_NaN(), M, Quantity::rotated,
                     accuracy::pair_angle(static_cast<double>(p), w), std::fabs(static_cast<double>(p) * w)},
                    st, where_of(ctx, t, p, h, ch));
            }
          }
      EXPECT_EQ(st.failures, 0) << st.first_failure;

      // q in f64 and k in bf16 in one call: table dtypes that differ (hf, accurate) take one launch each.
      std::vector<unsigned char> cq64 = encode(q, DType::f64), ckb = encode(k, DType::bf16), gq64 = cq64, gkb = ckb;
      const TensorView cqv = TensorView::contiguous(cq64.data(), DType::f64, T, Hq, D),
                       ckv = TensorView::contiguous(ckb.data(), DType::bf16, T, Hk, D),
                       gqv = TensorView::contiguous(gq64.data(), DType::f64, T, Hq, D),
                       gkv = TensorView::contiguous(gkb.data(), DType::bf16, T, Hk, D);
      rope_apply(plan, pos64, cqv, cqv, ckv, ckv);
      cand.apply(plan, pos64, gqv, gqv, gkv, gkv);
      Stats& st2 = stats_table()[std::string(info.name) + " / q f64 + k bf16"];
      for (const auto& [cpu_b, got_b, H, dt2] :
           {std::tuple{&cq64, &gq64, Hq, DType::f64}, std::tuple{&ckb, &gkb, Hk, DType::bf16}}) {
        const std::vector<double> cv = decode(*cpu_b, dt2), gv = decode(*got_b, dt2);
        const std::vector<double>& x = H == Hq ? q : k;
        Expectation e2 = expectation(info.recipe, dt2);
        e2.cls.reset();
        for (std::int64_t t = 0; t < T; ++t)
          for (std::int64_t h = 0; h < H; ++h)
            for (int j = 0; j < P; ++j) {
              const auto [ia, ib] = pair_channels(r, j);
              const auto base = static_cast<std::size_t>((t * H + h) * D);
              const double M = static_cast<double>(ex.att) * (std::fabs(x[base + static_cast<std::size_t>(ia)]) +
                                                              std::fabs(x[base + static_cast<std::size_t>(ib)]));
              const std::int64_t p = stream_position(r, pos[static_cast<std::size_t>(t)], j);
              const double w = ex.w[static_cast<std::size_t>(j)];
              for (int ch : {ia, ib}) {
                const std::size_t i = base + static_cast<std::size_t>(ch);
                judge(e2, dt2,
                      {gv[i], cv[i], std::numeric_limits<long double>::quiet_NaN(), M, Quantity::rotated,
                       accuracy::pair_angle(static_cast<double>(p), w), std::fabs(static_cast<double>(p) * w)},
                      st2, where_of(ctx + " (q f64 + k bf16)", t, p, h, ch));
              }
            }
      }
      EXPECT_EQ(st2.failures, 0) << st2.first_failure;
    }
  }
}

// ---- cos / sin tables ------------------------------------------------------------------------------------

inline void run_cos_sin_table_matrix(Candidate& cand) {
  for (const std::string& name : {std::string("llama-3.1-8b"), std::string("qwen2-vl-7b"), std::string("phi-3.5-mini")}) {
    const RopeSpec r = load_preset(name).rope;
    const std::vector<Position> pos = positions_for(r);
    const ExactTable ex = exact_cos_sin(r, pos);
    const auto T = static_cast<std::int64_t>(pos.size());
    const int P = rope_pairs(r);
    std::vector<std::int64_t> p64;
    for (int s = 0; s < (r.mrope == MropeMode::none ? 1 : 3); ++s)
      for (const Position& p : pos) p64.push_back(s == 0 ? p.t : (s == 1 ? p.h : p.w));
    const PositionsView host_pos = r.mrope == MropeMode::none ? PositionsView::of(std::span<const std::int64_t>(p64))
                                                              : PositionsView::three_streams(p64, T);
    for (const RecipeInfo& info : recipes()) {
      const RopePlan plan = make_rope_plan(r, info.recipe);
      for (DType dt : kDtypes) {
        const std::string ctx = name + " " + std::string(info.name) + " " + std::string(to_string(dt)) + " table";
        const std::size_t bytes = static_cast<std::size_t>(T * P) * dsize(dt);
        std::vector<unsigned char> cc(bytes), cs(bytes), gc(bytes), gs(bytes);
        rope_cos_sin_table(plan, host_pos, cc.data(), cs.data(), dt);
        cand.cos_sin_table(plan, host_pos, gc.data(), gs.data(), dt);
        const std::vector<double> gcv = decode(gc, dt), gsv = decode(gs, dt), ccv = decode(cc, dt), csv = decode(cs, dt);
        const Expectation expect = expectation(info.recipe, dt);  // hf's table dtype follows the output's
        Stats& st = stats_table()[std::string(info.name) + " / " + std::string(to_string(dt)) + " table"];
        for (std::int64_t t = 0; t < T; ++t)
          for (int j = 0; j < P; ++j) {
            const auto i = static_cast<std::size_t>(t * P + j);
            const std::int64_t p = stream_position(r, pos[static_cast<std::size_t>(t)], j);
            const double w = ex.w[static_cast<std::size_t>(j)];
            const accuracy::PairAngle ang = accuracy::pair_angle(static_cast<double>(p), w);
            const double theta = std::fabs(static_cast<double>(p) * w);
            judge(expect, dt, {gcv[i], ccv[i], ex.c[i], 1.0, Quantity::table, ang, theta}, st,
                  ctx + " cos token " + std::to_string(t) + " pair " + std::to_string(j));
            judge(expect, dt, {gsv[i], csv[i], ex.s[i], 1.0, Quantity::table, ang, theta}, st,
                  ctx + " sin token " + std::to_string(t) + " pair " + std::to_string(j));
          }
        EXPECT_EQ(st.failures, 0) << st.first_failure;
      }
    }
  }
}

// ---- sinusoidal tables -------------------------------------------------------------------------------------

inline void run_sinusoidal_matrix(Candidate& cand) {
  for (const std::string& name : {std::string("transformer-base"), std::string("fairseq-transformer")}) {
    const SinusoidalSpec s = load_preset(name).sinusoidal;
    std::vector<std::int64_t> p64;
    for (std::int64_t p : base_positions())
      if (p >= 0 && p < (std::int64_t{1} << 24)) p64.push_back(p);
    const auto T = static_cast<std::int64_t>(p64.size());
    const int d = s.d_model;
    std::vector<long double> exact;
    const std::vector<double> wd = sinusoidal_frequencies<double>(s);
    {
      ScopedPrecision guard(256);
      const std::vector<Real> w = sinusoidal_frequencies<Real>(s);
      for (std::int64_t p : p64)
        for (const Real& v : sinusoidal_row<Real>(s, w, p)) exact.push_back(static_cast<long double>(v));
    }
    const PositionsView pos = PositionsView::of(std::span<const std::int64_t>(p64));
    for (const RecipeInfo& info : recipes()) {
      for (DType dt : kDtypes) {
        const std::string ctx = name + " " + std::string(info.name) + " " + std::string(to_string(dt)) + " sinusoidal";
        const std::size_t bytes = static_cast<std::size_t>(T * d) * dsize(dt);
        std::vector<unsigned char> cpu(bytes), got(bytes);
        sinusoidal_table(s, info.recipe, p64, cpu.data(), dt);
        cand.sinusoidal(s, info.recipe, pos, got.data(), dt);
        const std::vector<double> gv = decode(got, dt), cv = decode(cpu, dt);
        const Expectation expect = expectation(info.recipe, dt);
        Stats& st = stats_table()[std::string(info.name) + " / " + std::string(to_string(dt)) + " sinusoidal"];
        for (std::int64_t t = 0; t < T; ++t)
          for (int c = 0; c < d; ++c) {
            const auto i = static_cast<std::size_t>(t * d + c);
            const SinusoidalColumn col = sinusoidal_column(s, c);
            const double w = col.kind == SinusoidalKind::zero ? 0.0 : wd[static_cast<std::size_t>(col.frequency)];
            const auto p = static_cast<double>(p64[static_cast<std::size_t>(t)] + s.position_offset);
            judge(expect, dt,
                  {gv[i], cv[i], exact[i], 1.0, Quantity::table, accuracy::pair_angle(p, w), std::fabs(p * w)}, st,
                  ctx + " position " + std::to_string(p64[static_cast<std::size_t>(t)]) + " column " + std::to_string(c));
          }
        EXPECT_EQ(st.failures, 0) << st.first_failure;
      }
    }
  }
}

}  // namespace ropecheck::cuda_matrix
