// Accuracy classes for quantized stores (accuracy/quantized_store.hpp; ERROR_MODEL.md, "Quantized
// stores") with a small RoPE kernel of this test's own: Hugging Face's fp32 recipe (f32 inverse
// frequencies from powf, f32 angle, sinf / cosf, f32 rotation: class fp32-angle), then each store's
// owner's quantizer (core/quantized.hpp). The exact rotated values come from MPFR (192 bits), their
// golden codes and margins from reference/quantized_rounding.hpp.
//
// For every store the correct kernel never fails in fp32-angle, f16-table or bf16-table, and at least
// five injected mistakes fail in fp32-angle; the table printed shows which ones the looser classes
// still catch. Mistakes that differ from the owner only at exact ties cannot be caught: they are
// counted as not tested, never as passed. Seed fixed and printed.
#include <gtest/gtest.h>

#include <mpfr.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ropecheck/accuracy/quantized_store.hpp"
#include "ropecheck/core/quantized.hpp"
#include "ropecheck/reference/mpfr_value.hpp"
#include "ropecheck/reference/quantized_rounding.hpp"
#include "ropecheck/reference/rounding.hpp"

namespace ropecheck {
namespace {

using namespace quant;
using accuracy::AccuracyClass;
using accuracy::StoreVerdict;

constexpr int kHeads = 2, kDim = 64, kTokens = 64;
constexpr std::array<AccuracyClass, 3> kClasses = {AccuracyClass::fp32_angle, AccuracyClass::f16_table,
                                                   AccuracyClass::bf16_table};

// ---- the problem: inputs, exact outputs, each element's class error --------------------------------

struct Problem {
  std::vector<std::int64_t> pos;
  std::vector<float> x;  // [token][head][channel], bf16-exact values; pairs (2j, 2j + 1)
  std::vector<std::unique_ptr<MpfrValue>> exact;
  std::vector<mpfr_srcptr> ptr;
  std::vector<double> y;                        // the f64 copy of each exact value
  std::array<std::vector<double>, 3> err;       // per class of kClasses: E of the kernel's f32 value
  static std::size_t at(int t, int h, int c) { return static_cast<std::size_t>((t * kHeads + h) * kDim + c); }
};

const Problem& problem() {
  static const Problem pr = [] {
    Problem p;
    const unsigned seed = 31337;
    std::printf("seed %u\n", seed);
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> nd(0.0, 1.0);
    for (int t = 0; t < kTokens; ++t)  // 0..39, then 24 positions up to 2^17 (long-context angles)
      p.pos.push_back(t < 40 ? t : std::llround(40 * std::pow(131072.0 / 40, (t - 40) / 23.0)));
    p.x.resize(static_cast<std::size_t>(kTokens * kHeads * kDim));
    for (float& v : p.x) v = static_cast<float>(round_to(nd(rng), DType::bf16));
    p.y.resize(p.x.size());
    for (auto& e : p.err) e.resize(p.x.size());
    for (std::size_t i = 0; i < p.x.size(); ++i) p.exact.push_back(std::make_unique<MpfrValue>(192));
    MpfrValue w(256), theta(256), c(256), s(256), tmp(256);
    for (int j = 0; j < kDim / 2; ++j) {
      mpfr_set_ui(w.get(), 10000, MPFR_RNDN);
      mpfr_set_si_2exp(tmp.get(), -j, -5, MPFR_RNDN);  // -2j / 64, exact
      mpfr_pow(w.get(), w.get(), tmp.get(), MPFR_RNDN);
      const double wd = mpfr_get_d(w.get(), MPFR_RNDN);
      for (int t = 0; t < kTokens; ++t) {
        mpfr_mul_si(theta.get(), w.get(), static_cast<long>(p.pos[static_cast<std::size_t>(t)]), MPFR_RNDN);
        mpfr_sin_cos(s.get(), c.get(), theta.get(), MPFR_RNDN);
        const accuracy::PairAngle angle = accuracy::pair_angle(static_cast<double>(p.pos[static_cast<std::size_t>(t)]), wd);
        for (int h = 0; h < kHeads; ++h) {
          const std::size_t ia = Problem::at(t, h, 2 * j), ib = ia + 1;
          const double a = p.x[ia], b = p.x[ib];
          mpfr_ptr ya = p.exact[ia]->get(), yb = p.exact[ib]->get();
          mpfr_mul_d(ya, c.get(), a, MPFR_RNDN);  // y_a = a cos - b sin
          mpfr_mul_d(tmp.get(), s.get(), b, MPFR_RNDN);
          mpfr_sub(ya, ya, tmp.get(), MPFR_RNDN);
          mpfr_mul_d(yb, c.get(), b, MPFR_RNDN);  // y_b = b cos + a sin
          mpfr_mul_d(tmp.get(), s.get(), a, MPFR_RNDN);
          mpfr_add(yb, yb, tmp.get(), MPFR_RNDN);
          for (std::size_t i : {ia, ib}) {
            p.y[i] = mpfr_get_d(p.exact[i]->get(), MPFR_RNDN);
            for (std::size_t k = 0; k < kClasses.size(); ++k)
              p.err[k][i] = accuracy::quantizer_input_error(kClasses[k], accuracy::Quantity::rotated, angle,
                                                            std::fabs(a) + std::fabs(b), p.y[i]);
          }
        }
      }
    }
    for (const auto& e : p.exact) p.ptr.push_back(e->get());
    return p;
  }();
  return pr;
}

// The kernel: Hugging Face's fp32 recipe on the inputs x (the problem's, or quantized ones).
std::vector<float> rope_f32(const std::vector<float>& x) {
  const Problem& p = problem();
  std::vector<float> y(x.size());
  for (int j = 0; j < kDim / 2; ++j) {
    const float inv = 1.0f / std::pow(10000.0f, static_cast<float>(2 * j) / static_cast<float>(kDim));
    for (int t = 0; t < kTokens; ++t) {
      const float theta = static_cast<float>(p.pos[static_cast<std::size_t>(t)]) * inv;
      const float c = std::cos(theta), s = std::sin(theta);
      for (int h = 0; h < kHeads; ++h) {
        const std::size_t ia = Problem::at(t, h, 2 * j), ib = ia + 1;
        const float ac = x[ia] * c, bs = x[ib] * s, bc = x[ib] * c, as = x[ia] * s;
        y[ia] = ac - bs;
        y[ib] = bc + as;
      }
    }
  }
  return y;
}

// ---- tallies and the report ------------------------------------------------------------------------

struct Tally {
  long pass = 0, not_tested = 0, fail = 0;
  void add(StoreVerdict v) { (v == StoreVerdict::pass ? pass : v == StoreVerdict::fail ? fail : not_tested)++; }
};
using ClassTallies = std::array<Tally, kClasses.size()>;

// What a mistake is expected to do: fail in fp32-angle, or (a correct variant, or a difference only at
// exact ties) never fail.
enum class Expect { fails, never_fails };
struct Candidate {
  std::string name;
  Expect expect;
};

void report_and_check(const std::string& store, const Candidate& cand, const ClassTallies& t) {
  std::printf("%-22s %-26s", store.c_str(), cand.name.c_str());
  for (const Tally& x : t) std::printf("  %6ld fail %6ld n/t %6ld pass", x.fail, x.not_tested, x.pass);
  std::printf("\n");
  if (cand.expect == Expect::never_fails) {
    for (const Tally& x : t) EXPECT_EQ(x.fail, 0) << store << " " << cand.name;
  } else {
    EXPECT_GT(t[0].fail, 0) << store << " " << cand.name << " is not caught by fp32-angle";
  }
  // Looser classes never fail more (they nest: a larger budget decides less and tolerates more).
  for (std::size_t k = 1; k < t.size(); ++k) EXPECT_LE(t[k].fail, t[k - 1].fail) << store << " " << cand.name;
}

// Inputs quantized and dequantized the way a store would, then rotated: the "quantize before
// rotating" mistake. `roundtrip` maps one scale group of inputs to its dequantized values.
std::vector<float> rotate_quantized_inputs(std::size_t group, const std::function<std::vector<double>(std::span<const float>)>& roundtrip) {
  const std::vector<float>& x = problem().x;
  std::vector<float> xq(x.size());
  for (std::size_t g0 = 0; g0 < x.size(); g0 += group) {
    const std::vector<double> v = roundtrip(std::span<const float>(x).subspan(g0, group));
    for (std::size_t j = 0; j < group; ++j) xq[g0 + j] = static_cast<float>(v[j]);
  }
  return rope_f32(xq);
}

float f32_div(float a, float b) { return a / b; }

// ---- FP8 against a given scale per head ----------------------------------------------------------------

// Each head's scale, a golden input: amax over the head / target, in f32, so that the largest values
// overflow the format (target beyond max_finite) and the overflow rule matters.
std::vector<double> head_scales(double target) {
  const Problem& p = problem();
  std::vector<double> s(kHeads, 0.0);
  for (std::size_t i = 0; i < p.y.size(); ++i) {
    const auto h = (i / kDim) % kHeads;
    s[h] = std::max(s[h], std::fabs(p.y[i]));
  }
  for (double& v : s) v = static_cast<float>(v / target);
  return s;
}

// The code of t rounded toward zero (a kernel truncating instead of rounding to nearest).
std::uint8_t fp8_truncate(float t, Fp8 f, Fp8Overflow o) {
  std::uint8_t c = fp8_encode(t, f, o);
  const double v = fp8_decode(c, f);
  if (std::isfinite(v) && std::fabs(v) > std::fabs(t) && (c & 0x7F) != 0) c = static_cast<std::uint8_t>(c - 1);
  return c;
}

void run_fp8_given(Fp8 f, Fp8Overflow o, double target) {
  const Problem& p = problem();
  const std::vector<double> s = head_scales(target);
  const auto scale_of = [&](std::size_t i) { return s[(i / kDim) % kHeads]; };
  std::vector<ExactCode> golden;
  for (std::size_t i = 0; i < p.y.size(); ++i) golden.push_back(fp8_exact(p.ptr[i], scale_of(i), f, o));
  const Fp8 other = f == Fp8::e4m3fn ? Fp8::e5m2 : Fp8::e4m3fn;
  const Fp8Overflow other_rule = o == Fp8Overflow::saturate ? Fp8Overflow::nonfinite : Fp8Overflow::saturate;
  const std::vector<float> yk = rope_f32(p.x);
  // Inputs quantized per head with their own amax / max_finite scale, then rotated.
  const std::vector<float> yq = rotate_quantized_inputs(kDim, [&](std::span<const float> g) {
    const float sx = fp8_dynamic_scale(g, f);
    std::vector<double> v;
    for (float xv : g) v.push_back(fp8_dequantize(fp8_encode(f32_div(xv, sx), f, o), sx, f));
    return v;
  });
  // Differs from nearest-even only where t is exactly halfway: ties away from zero.
  const auto ties_away = [&](float t) {
    const std::uint8_t c = fp8_encode(t, f, o);
    const std::uint8_t up = static_cast<std::uint8_t>(c + 1);
    const double v = fp8_decode(c, f), vu = fp8_decode(up, f);
    return std::isfinite(vu) && std::fabs(t) - std::fabs(v) == (std::fabs(vu) - std::fabs(v)) / 2 ? up : c;
  };
  const std::vector<std::pair<Candidate, std::function<std::uint8_t(std::size_t)>>> cands = {
      {{"correct: t = y / s", Expect::never_fails}, [&](std::size_t i) { return fp8_encode(f32_div(yk[i], static_cast<float>(scale_of(i))), f, o); }},
      {{"correct: y * (1 / s)", Expect::never_fails},
       [&](std::size_t i) { return fp8_encode(yk[i] * (1.0f / static_cast<float>(scale_of(i))), f, o); }},
      {{"ties away from zero", Expect::never_fails}, [&](std::size_t i) { return ties_away(f32_div(yk[i], static_cast<float>(scale_of(i)))); }},
      {{"quantize, then rotate", Expect::fails}, [&](std::size_t i) { return fp8_encode(f32_div(yq[i], static_cast<float>(scale_of(i))), f, o); }},
      {{"scale applied twice", Expect::fails},
       [&](std::size_t i) { const auto sf = static_cast<float>(scale_of(i)); return fp8_encode(f32_div(f32_div(yk[i], sf), sf), f, o); }},
      {{"scale inverted", Expect::fails}, [&](std::size_t i) { return fp8_encode(yk[i] * static_cast<float>(scale_of(i)), f, o); }},
      {{std::string("stored as ") + fp8_info(other).name, Expect::fails},
       [&](std::size_t i) { return fp8_encode(f32_div(yk[i], static_cast<float>(scale_of(i))), other, o); }},
      {{std::string("overflow rule ") + std::string(to_string(other_rule)), Expect::fails},
       [&](std::size_t i) { return fp8_encode(f32_div(yk[i], static_cast<float>(scale_of(i))), f, other_rule); }},
      {{"truncated, not rounded", Expect::fails}, [&](std::size_t i) { return fp8_truncate(f32_div(yk[i], static_cast<float>(scale_of(i))), f, o); }},
  };
  const std::string store = std::string(fp8_info(f).name) + " " + std::string(to_string(o)) + " per-head";
  for (const auto& [cand, code] : cands) {
    ClassTallies t;
    for (std::size_t i = 0; i < p.y.size(); ++i) {
      const std::uint8_t c = code(i);
      for (std::size_t k = 0; k < kClasses.size(); ++k) {
        const double budget = accuracy::given_scale_budget(p.err[k][i], p.y[i], scale_of(i));
        t[k].add(accuracy::judge_fp8(static_cast<std::uint8_t>(golden[i].code), golden[i].margin, p.y[i], c, scale_of(i), f, o, budget));
      }
    }
    report_and_check(store, cand, t);
  }
}

TEST(quantized_store, Fp8E4m3SaturatingPerHeadScale) { run_fp8_given(Fp8::e4m3fn, Fp8Overflow::saturate, 600); }
TEST(quantized_store, Fp8E5m2NonfinitePerHeadScale) { run_fp8_given(Fp8::e5m2, Fp8Overflow::nonfinite, 80000); }

// ---- GGML blocks ------------------------------------------------------------------------------------

// ggml's quantize_row_q8_0_ref / q4_0_ref in binary32 (core/quantized.hpp) with one step changed.
enum class GgmlVariant { owner, ties_even, codes_truncated, d_over_128, d_truncated, d_inverted, codes_from_f16_d,
                         scale_sign_flipped, nibbles_adjacent };

std::uint16_t f16_bits(double v) { return static_cast<std::uint16_t>(double_to_bits(round_to(v, DType::f16), DType::f16)); }
// f16 of d rounded toward zero instead of to nearest.
std::uint16_t f16_truncated(float d) {
  std::uint16_t b = f16_bits(d);
  if (std::fabs(bits_to_double(b, DType::f16)) > std::fabs(d)) --b;
  return b;
}

BlockQ8_0 q8_0_variant(std::span<const float, kGgmlBlock> x, GgmlVariant v) {
  if (v == GgmlVariant::owner) return ggml_quantize_q8_0(x);
  float amax = 0;
  for (float xv : x) amax = std::max(amax, std::fabs(xv));
  const float d = amax / (v == GgmlVariant::d_over_128 ? 128.0f : 127.0f);
  BlockQ8_0 b;
  b.d = v == GgmlVariant::d_truncated ? f16_truncated(d) : v == GgmlVariant::d_inverted ? f16_bits(1.0f / d) : f16_bits(d);
  const float dd = v == GgmlVariant::codes_from_f16_d ? static_cast<float>(bits_to_double(b.d, DType::f16)) : d;
  const float id = dd != 0 ? 1.0f / dd : 0.0f;
  for (std::size_t j = 0; j < kGgmlBlock; ++j) {
    const float t = x[j] * id;
    const float q = v == GgmlVariant::ties_even ? std::nearbyint(t) : v == GgmlVariant::codes_truncated ? std::trunc(t) : std::round(t);
    b.qs[j] = static_cast<std::int8_t>(q);
  }
  return b;
}

BlockQ4_0 q4_0_variant(std::span<const float, kGgmlBlock> x, GgmlVariant v) {
  if (v == GgmlVariant::owner) return ggml_quantize_q4_0(x);
  float amax = 0, max = 0;
  for (float xv : x)
    if (amax < std::fabs(xv)) {
      amax = std::fabs(xv);
      max = xv;
    }
  const float d = max / (v == GgmlVariant::scale_sign_flipped ? 8.0f : -8.0f);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  BlockQ4_0 b;
  b.d = v == GgmlVariant::d_truncated ? f16_truncated(d) : f16_bits(d);
  std::array<int, kGgmlBlock> c{};
  for (std::size_t j = 0; j < kGgmlBlock; ++j) {
    const float t = x[j] * id + (v == GgmlVariant::codes_truncated ? 8.0f : 8.5f);
    c[j] = std::min(15, static_cast<int>(std::trunc(t)));
  }
  for (std::size_t j = 0; j < kGgmlBlock / 2; ++j) {  // ggml: j and j + 16; adjacent: 2j and 2j + 1
    const bool adj = v == GgmlVariant::nibbles_adjacent;
    b.qs[j] = static_cast<std::uint8_t>((c[adj ? 2 * j : j] & 15) | ((c[adj ? 2 * j + 1 : j + 16] & 15) << 4));
  }
  return b;
}

struct GgmlCandidate {
  Candidate c;
  GgmlVariant v;
  bool rotate_quantized = false;
};

template <class Block, class Golden, class Quantize, class Judge>
void run_ggml(const std::string& store, accuracy::GroupStore kind, Golden golden_of, Quantize quantize, Judge judge,
              const std::vector<GgmlCandidate>& cands) {
  const Problem& p = problem();
  const std::size_t nb = p.y.size() / kGgmlBlock;
  std::vector<decltype(golden_of(std::size_t{0}))> golden;
  for (std::size_t b = 0; b < nb; ++b) golden.push_back(golden_of(b));
  const std::vector<float> yk = rope_f32(p.x);
  const std::vector<float> yq = rotate_quantized_inputs(kGgmlBlock, [&](std::span<const float> g) {
    const Block blk = quantize(std::span<const float, kGgmlBlock>(g.data(), kGgmlBlock), GgmlVariant::owner);
    std::vector<double> v;
    for (int j = 0; j < kGgmlBlock; ++j) v.push_back(ggml_value(blk, j));
    return v;
  });
  for (const GgmlCandidate& cand : cands) {
    ClassTallies t;
    for (std::size_t b = 0; b < nb; ++b) {
      const std::vector<float>& src = cand.rotate_quantized ? yq : yk;
      const Block blk = quantize(std::span<const float, kGgmlBlock>(src.data() + b * kGgmlBlock, kGgmlBlock), cand.v);
      const std::span<const double, kGgmlBlock> y(p.y.data() + b * kGgmlBlock, kGgmlBlock);
      double amax = 0;
      for (double v : y) amax = std::max(amax, std::fabs(v));
      for (std::size_t k = 0; k < kClasses.size(); ++k) {
        double e = 0;
        for (std::size_t j = 0; j < kGgmlBlock; ++j) e = std::max(e, p.err[k][b * kGgmlBlock + j]);
        const auto verdicts = judge(golden[b], y, blk, accuracy::group_budget(kind, e, amax));
        t[k].add(verdicts.scale);
        for (StoreVerdict v : verdicts.elements) t[k].add(v);
      }
    }
    report_and_check(store, cand.c, t);
  }
}

TEST(quantized_store, GgmlQ8_0) {
  const Problem& p = problem();
  run_ggml<BlockQ8_0>(
      "q8_0", accuracy::GroupStore::q8_0,
      [&](std::size_t b) { return q8_0_exact(std::span<const mpfr_srcptr, kGgmlBlock>(p.ptr.data() + b * kGgmlBlock, kGgmlBlock)); },
      q8_0_variant,
      [](const Q8_0Exact& g, std::span<const double, kGgmlBlock> y, const BlockQ8_0& c, double budget) {
        return accuracy::judge_q8_0(g.block, g.scale_margin, g.margin, y, c, budget);
      },
      {{{"correct (ggml's reference)", Expect::never_fails}, GgmlVariant::owner},
       {{"codes rint, not roundf", Expect::never_fails}, GgmlVariant::ties_even},
       {{"quantize, then rotate", Expect::fails}, GgmlVariant::owner, true},
       {{"codes truncated", Expect::fails}, GgmlVariant::codes_truncated},
       {{"d = amax / 128", Expect::fails}, GgmlVariant::d_over_128},
       {{"d rounded toward 0 in f16", Expect::fails}, GgmlVariant::d_truncated},
       {{"1 / d stored", Expect::fails}, GgmlVariant::d_inverted},
       {{"codes from the f16 d", Expect::fails}, GgmlVariant::codes_from_f16_d}});
}

TEST(quantized_store, GgmlQ4_0) {
  const Problem& p = problem();
  run_ggml<BlockQ4_0>(
      "q4_0", accuracy::GroupStore::q4_0,
      [&](std::size_t b) { return q4_0_exact(std::span<const mpfr_srcptr, kGgmlBlock>(p.ptr.data() + b * kGgmlBlock, kGgmlBlock)); },
      q4_0_variant,
      [](const Q4_0Exact& g, std::span<const double, kGgmlBlock> y, const BlockQ4_0& c, double budget) {
        return accuracy::judge_q4_0(g.block, g.scale_margin, g.margin, y, c, budget);
      },
      {{{"correct (ggml's reference)", Expect::never_fails}, GgmlVariant::owner},
       {{"quantize, then rotate", Expect::fails}, GgmlVariant::owner, true},
       {{"nibbles (2j, 2j+1)", Expect::fails}, GgmlVariant::nibbles_adjacent},
       {{"codes floor(t + 8)", Expect::fails}, GgmlVariant::codes_truncated},
       {{"d rounded toward 0 in f16", Expect::fails}, GgmlVariant::d_truncated},
       {{"d = max / +8", Expect::fails}, GgmlVariant::scale_sign_flipped}});
}

// ---- MLX group-affine, a group per head vector --------------------------------------------------------

enum class AffineVariant { owner, ties_away, codes_truncated, no_clamp, scale_bf16, bias_dropped, scale_inverted,
                           packing_reversed };

// The codes as the candidate packs them, read back in MLX's order (low bits first).
std::vector<std::uint8_t> through_packing(const std::vector<std::uint8_t>& codes, int bits, bool reversed) {
  if (!reversed) return affine_unpack(affine_pack(codes, bits), bits, codes.size());
  const std::size_t per = static_cast<std::size_t>(32 / bits);
  std::vector<std::uint32_t> words(codes.size() / per, 0);
  for (std::size_t i = 0; i < codes.size(); ++i)
    words[i / per] |= static_cast<std::uint32_t>(codes[i]) << (bits * static_cast<int>(per - 1 - i % per));
  return affine_unpack(words, bits, codes.size());
}

AffineQuantized affine_variant(std::span<const float> w, int bits, AffineVariant v) {
  AffineQuantized q = mlx_affine_quantize(w, {bits, kDim, v == AffineVariant::scale_bf16 ? DType::bf16 : DType::f32});
  const float n = static_cast<float>((1 << bits) - 1);
  for (std::size_t g = 0; g < q.groups.size(); ++g) {
    AffineGroup& gr = q.groups[g];
    if (v == AffineVariant::ties_away || v == AffineVariant::codes_truncated || v == AffineVariant::no_clamp) {
      const auto sc = static_cast<float>(gr.scale), bi = static_cast<float>(gr.bias);  // f32: as MLX computed them
      for (std::size_t j = 0; j < static_cast<std::size_t>(kDim); ++j) {
        const float t = (w[g * kDim + j] - bi) / sc;
        float c = v == AffineVariant::ties_away ? std::round(t) : v == AffineVariant::codes_truncated ? std::trunc(t) : std::nearbyint(t);
        c = std::max(c, 0.0f);
        if (v != AffineVariant::no_clamp) c = std::min(c, n);
        q.codes[g * kDim + j] = static_cast<std::uint8_t>(static_cast<int>(c) & ((1 << bits) - 1));  // no clamp: wraps
      }
    }
    if (v == AffineVariant::bias_dropped) gr.bias = 0;
    if (v == AffineVariant::scale_inverted) gr.scale = static_cast<float>(1.0 / gr.scale);
  }
  q.codes = through_packing(q.codes, bits, v == AffineVariant::packing_reversed);
  return q;
}

void run_affine(int bits) {
  const Problem& p = problem();
  const std::size_t ng = p.y.size() / kDim;
  const AffineSpec spec{bits, kDim, DType::f32};
  std::vector<AffineExact> golden;
  for (std::size_t g = 0; g < ng; ++g) golden.push_back(mlx_affine_exact(std::span<const mpfr_srcptr>(p.ptr).subspan(g * kDim, kDim), spec));
  const std::vector<float> yk = rope_f32(p.x);
  const std::vector<float> yq = rotate_quantized_inputs(kDim, [&](std::span<const float> g) {
    const AffineQuantized q = mlx_affine_quantize(g, spec);
    std::vector<double> v;
    for (std::uint8_t c : q.codes) v.push_back(affine_value(c, q.groups[0]));
    return v;
  });
  const std::vector<std::tuple<Candidate, AffineVariant, bool>> cands = {
      {{"correct (mx.quantize's CPU)", Expect::never_fails}, AffineVariant::owner, false},
      {{"codes roundf, not rint", Expect::never_fails}, AffineVariant::ties_away, false},
      {{"quantize, then rotate", Expect::fails}, AffineVariant::owner, true},
      {{"codes truncated", Expect::fails}, AffineVariant::codes_truncated, false},
      {{"codes not clamped", Expect::fails}, AffineVariant::no_clamp, false},
      {{"scale stored as bf16", Expect::fails}, AffineVariant::scale_bf16, false},
      {{"bias dropped", Expect::fails}, AffineVariant::bias_dropped, false},
      {{"1 / scale stored", Expect::fails}, AffineVariant::scale_inverted, false},
      {{"packed high bits first", Expect::fails}, AffineVariant::packing_reversed, false},
  };
  for (const auto& [cand, variant, quantized_inputs] : cands) {
    const AffineQuantized q = affine_variant(quantized_inputs ? yq : yk, bits, variant);
    ClassTallies t;
    for (std::size_t g = 0; g < ng; ++g) {
      const std::span<const double> y = std::span<const double>(p.y).subspan(g * kDim, kDim);
      double amax = 0;
      for (double v : y) amax = std::max(amax, std::fabs(v));
      const AffineExact& gd = golden[g];
      for (std::size_t k = 0; k < kClasses.size(); ++k) {
        double e = 0;
        for (std::size_t j = 0; j < static_cast<std::size_t>(kDim); ++j) e = std::max(e, p.err[k][g * kDim + j]);
        const auto v = accuracy::judge_affine_group(gd.q.codes, gd.q.groups[0], gd.scale_margin[0], gd.decision_margin[0],
                                                    gd.margin, y, std::span<const std::uint8_t>(q.codes).subspan(g * kDim, kDim),
                                                    q.groups[g], spec, accuracy::group_budget(accuracy::GroupStore::affine, e, amax));
        t[k].add(v.scale);
        for (StoreVerdict x : v.elements) t[k].add(x);
      }
    }
    report_and_check("affine int" + std::to_string(bits) + " g64", cand, t);
  }
}

TEST(quantized_store, MlxAffineInt4) { run_affine(4); }
TEST(quantized_store, MlxAffineInt8) { run_affine(8); }

// ---- FP8 with vLLM's dynamic per-token scale ----------------------------------------------------------

TEST(quantized_store, Fp8DynamicPerToken) {
  const Problem& p = problem();
  const Fp8 f = Fp8::e4m3fn;
  const Fp8Overflow o = Fp8Overflow::saturate;
  constexpr std::size_t kGroup = kHeads * kDim;  // one token
  const std::size_t ng = p.y.size() / kGroup;
  std::vector<Fp8GroupExact> golden;
  for (std::size_t g = 0; g < ng; ++g) golden.push_back(fp8_dynamic_exact(std::span<const mpfr_srcptr>(p.ptr).subspan(g * kGroup, kGroup), f, o));
  const std::vector<float> yk = rope_f32(p.x);
  const auto dyn = [&](std::span<const float> g, double fmax) {
    float amax = 0;
    for (float v : g) amax = std::max(amax, std::fabs(v));
    return std::max(static_cast<float>(amax / fmax), static_cast<float>(1.0 / (448.0 * 512.0)));
  };
  const std::vector<float> yq = rotate_quantized_inputs(kGroup, [&](std::span<const float> g) {
    const float s = fp8_dynamic_scale(g, f);
    std::vector<double> v;
    for (float x : g) v.push_back(fp8_dequantize(fp8_encode(x / s, f, o), s, f));
    return v;
  });
  struct Cand {
    Candidate c;
    std::function<float(std::span<const float>)> scale;          // the scale the codes use
    std::function<std::uint8_t(float, float)> code;               // (value, scale) -> code
    std::function<float(float)> stored = [](float s) { return s; };  // the scale stored
    bool quantized_inputs = false;
  };
  const auto nearest = [&](float y, float s) { return fp8_encode(y / s, f, o); };
  const std::vector<Cand> cands = {
      {{"correct (vLLM's dynamic)", Expect::never_fails}, [&](auto g) { return fp8_dynamic_scale(g, f); }, nearest},
      {{"correct: y * (1 / s)", Expect::never_fails}, [&](auto g) { return fp8_dynamic_scale(g, f); },
       [&](float y, float s) { return fp8_encode(y * (1.0f / s), f, o); }},
      {{"quantize, then rotate", Expect::fails}, [&](auto g) { return fp8_dynamic_scale(g, f); }, nearest, [](float s) { return s; }, true},
      {{"scale from e5m2's max", Expect::fails}, [&](auto g) { return dyn(g, 57344.0); }, nearest},
      {{"1 / s stored", Expect::fails}, [&](auto g) { return fp8_dynamic_scale(g, f); }, nearest, [](float s) { return 1.0f / s; }},
      {{"scale applied twice", Expect::fails}, [&](auto g) { return fp8_dynamic_scale(g, f); },
       [&](float y, float s) { return fp8_encode(y / s / s, f, o); }},
      {{"truncated, not rounded", Expect::fails}, [&](auto g) { return fp8_dynamic_scale(g, f); },
       [&](float y, float s) { return fp8_truncate(y / s, f, o); }},
  };
  for (const Cand& cand : cands) {
    ClassTallies t;
    const std::vector<float>& src = cand.quantized_inputs ? yq : yk;
    for (std::size_t g = 0; g < ng; ++g) {
      const std::span<const float> yg = std::span<const float>(src).subspan(g * kGroup, kGroup);
      const float s = cand.scale(yg);
      std::vector<std::uint8_t> codes, gcodes;
      std::vector<double> margins;
      for (float v : yg) codes.push_back(cand.code(v, s));
      for (const ExactCode& c : golden[g].codes) {
        gcodes.push_back(static_cast<std::uint8_t>(c.code));
        margins.push_back(c.margin);
      }
      const std::span<const double> y = std::span<const double>(p.y).subspan(g * kGroup, kGroup);
      double amax = 0;
      for (double v : y) amax = std::max(amax, std::fabs(v));
      for (std::size_t k = 0; k < kClasses.size(); ++k) {
        double e = 0;
        for (std::size_t j = 0; j < kGroup; ++j) e = std::max(e, p.err[k][g * kGroup + j]);
        const auto v = accuracy::judge_fp8_group(static_cast<float>(golden[g].scale), golden[g].scale_margin, gcodes, margins, y,
                                                 cand.stored(s), codes, f, o,
                                                 accuracy::group_budget(accuracy::GroupStore::fp8_dynamic, e, amax));
        t[k].add(v.scale);
        for (StoreVerdict x : v.elements) t[k].add(x);
      }
    }
    report_and_check("e4m3fn dynamic/token", cand.c, t);
  }
}

// ---- ties: undecidable, counted as not tested -----------------------------------------------------------

TEST(quantized_store, TiesAreNotTestedNeverPassed) {
  // y / s = 1.0625 exactly: halfway between e4m3fn's 1 (even, the golden code) and 1.125.
  MpfrValue y(64);
  mpfr_set_d(y.get(), 1.0625 * 3, MPFR_RNDN);
  const ExactCode g = fp8_exact(y.get(), 3.0, Fp8::e4m3fn, Fp8Overflow::saturate);
  ASSERT_EQ(g.code, 0x38);
  ASSERT_EQ(g.margin, 0.0);
  const double budget = accuracy::given_scale_budget(1e-9, 3.1875, 3.0);  // any budget: the margin is 0
  const auto judge = [&](std::uint8_t c) {
    return accuracy::judge_fp8(0x38, g.margin, 3.1875, c, 3.0, Fp8::e4m3fn, Fp8Overflow::saturate, budget);
  };
  EXPECT_EQ(judge(0x38), StoreVerdict::not_tested);  // even the golden code itself: nothing was tested
  EXPECT_EQ(judge(0x39), StoreVerdict::not_tested);  // ties away from zero: one quantum off, undecidable
  EXPECT_EQ(judge(0x3A), StoreVerdict::fail);        // two quanta off
  EXPECT_EQ(judge(0x37), StoreVerdict::fail);
  // q8_0: 127 and 2.5 in a block, t = 2.5: roundf gives 3, rint 2; both not tested, 4 fails.
  std::vector<std::unique_ptr<MpfrValue>> vals;
  std::vector<mpfr_srcptr> ptr;
  std::array<double, kGgmlBlock> yv{};
  for (int j = 0; j < kGgmlBlock; ++j) {
    vals.push_back(std::make_unique<MpfrValue>(64));
    yv[static_cast<std::size_t>(j)] = j == 0 ? 127 : j == 1 ? 2.5 : (j - 16) * 0.8;  // no other tie
    mpfr_set_d(vals.back()->get(), yv[static_cast<std::size_t>(j)], MPFR_RNDN);
    ptr.push_back(vals.back()->get());
  }
  const Q8_0Exact q = q8_0_exact(std::span<const mpfr_srcptr, kGgmlBlock>(ptr.data(), kGgmlBlock));
  ASSERT_EQ(q.block.qs[1], 3);
  for (int code : {3, 2, 4}) {
    BlockQ8_0 c = q.block;
    c.qs[1] = static_cast<std::int8_t>(code);
    const auto v = accuracy::judge_q8_0(q.block, q.scale_margin, q.margin, yv, c, accuracy::group_budget(accuracy::GroupStore::q8_0, 1e-9, 127));
    EXPECT_EQ(v.elements[1], code == 4 ? StoreVerdict::fail : StoreVerdict::not_tested) << code;
    EXPECT_EQ(v.elements[2], StoreVerdict::pass);
    EXPECT_EQ(v.scale, StoreVerdict::pass);
  }
}

}  // namespace
}  // namespace ropecheck
