// quant_dump: the quantized stores of core/quantized.hpp and their golden values
// (reference/quantized_rounding.hpp) on raw little-endian arrays, for the independent cross-check
// against ml_dtypes, numpy, MLX and gguf-py (tests/python/quant_crosscheck.py).
//
//   quant_dump fp8-decode FMT OUT                     256 f64: every bit pattern's value
//   quant_dump fp8-encode FMT RULE IN OUT             f64 -> u8 (core, one rounding from binary64)
//   quant_dump fp8-exact FMT RULE IN OUT              f64 -> u8 code, u8 margin == 0 (reference, MPFR)
//   quant_dump fp8-given ITEM HEADS HEAD_DIM IN OUT   f64 [T, HEADS, HEAD_DIM] as exact values -> the golden
//                                                     store of --stores ITEM with a given scale
//                                                     (reference store_block): u8 codes, u8 margin == 0
//   quant_dump round-to DTYPE IN OUT                  f64 -> f64 (core round_to)
//   quant_dump q8_0 IN OUT | q4_0 IN OUT              f32 -> blocks (34 / 18 bytes each)
//   quant_dump q8_0-exact IN OUT | q4_0-exact IN OUT  f32 as exact values -> blocks, then one u8 per
//                                                     element and one per block: decided (margin > the
//                                                     budget of ggml's binary32 roundings)
//   quant_dump affine BITS GROUP DTYPE IN OUT         values of DTYPE as f32 -> u32 words, f64 scales,
//                                                     f64 biases, f64 mx.dequantize emulation
//   quant_dump affine-exact BITS GROUP DTYPE IN OUT   the same from exact values (no dequantization),
//                                                     then u8 decided per element and per group
// FMT: e4m3fn | e5m2; RULE: saturate | nonfinite; DTYPE: f32 | f16 | bf16. Exit 2 on a usage error.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "ropecheck/accuracy/quantized_store.hpp"
#include "ropecheck/core/quantized.hpp"
#include "ropecheck/reference/mpfr_value.hpp"
#include "ropecheck/reference/quantized_rounding.hpp"
#include "ropecheck/reference/quantized_stores.hpp"

namespace {

using namespace ropecheck;
using namespace ropecheck::quant;

template <class T>
std::vector<T> read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

struct Out {
  std::ofstream f;
  explicit Out(const std::string& path) : f(path, std::ios::binary) {}
  template <class T>
  void put(const T& v) { f.write(reinterpret_cast<const char*>(&v), sizeof v); }
  template <class T>
  void put_all(const std::vector<T>& v) { f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T))); }
};

// The values as exact MPFR numbers, with the pointer view the golden functions take.
struct Exact {
  std::vector<std::unique_ptr<MpfrValue>> v;
  std::vector<mpfr_srcptr> p;
  explicit Exact(const std::vector<double>& x) {
    for (double xv : x) {
      v.push_back(std::make_unique<MpfrValue>(53));
      mpfr_set_d(v.back()->get(), xv, MPFR_RNDN);
      p.push_back(v.back()->get());
    }
  }
};

double amax_of(const std::vector<float>& x, std::size_t from, std::size_t n) {
  double a = 0;
  for (std::size_t j = from; j < from + n; ++j) a = std::max(a, static_cast<double>(std::fabs(x[j])));
  return a;
}

int ggml(const std::string& cmd, const std::vector<float>& x, Out& out) {
  const bool exact = cmd.size() > 4;
  const std::size_t nb = x.size() / kGgmlBlock;
  std::vector<std::uint8_t> decided;
  const Exact ex(std::vector<double>(x.begin(), x.end()));
  for (std::size_t b = 0; b < nb; ++b) {
    const std::span<const float, kGgmlBlock> fx(x.data() + b * kGgmlBlock, kGgmlBlock);
    const std::span<const mpfr_srcptr, kGgmlBlock> px(ex.p.data() + b * kGgmlBlock, kGgmlBlock);
    const double a = amax_of(x, b * kGgmlBlock, kGgmlBlock);
    if (cmd.starts_with("q8_0")) {
      const Q8_0Exact g = exact ? q8_0_exact(px) : Q8_0Exact{ggml_quantize_q8_0(fx)};
      out.put(to_bytes(g.block));
      const double e = accuracy::group_budget(accuracy::GroupStore::q8_0, 0, a);
      for (double m : g.margin) decided.push_back(m > e);
      decided.push_back(g.scale_margin > e);
    } else {
      const Q4_0Exact g = exact ? q4_0_exact(px) : Q4_0Exact{ggml_quantize_q4_0(fx)};
      out.put(to_bytes(g.block));
      const double e = accuracy::group_budget(accuracy::GroupStore::q4_0, 0, a);
      for (double m : g.margin) decided.push_back(m > e);
      decided.push_back(g.scale_margin > e);
    }
  }
  if (exact) out.put_all(decided);
  return 0;
}

int affine(const std::string& cmd, int bits, int group, DType dt, const std::vector<float>& x, Out& out) {
  const AffineSpec spec{bits, group, dt};
  if (cmd == "affine") {
    const AffineQuantized q = mlx_affine_quantize(x, spec);
    out.put_all(affine_pack(q.codes, bits));
    for (const AffineGroup& g : q.groups) out.put(g.scale);
    for (const AffineGroup& g : q.groups) out.put(g.bias);
    for (std::size_t i = 0; i < x.size(); ++i)
      out.put(mlx_affine_dequantize(q.codes[i], q.groups[i / static_cast<std::size_t>(group)], dt));
    return 0;
  }
  const Exact ex(std::vector<double>(x.begin(), x.end()));
  const AffineExact g = mlx_affine_exact(ex.p, spec);
  out.put_all(affine_pack(g.q.codes, bits));
  for (const AffineGroup& gr : g.q.groups) out.put(gr.scale);
  for (const AffineGroup& gr : g.q.groups) out.put(gr.bias);
  std::vector<std::uint8_t> decided;
  const auto gs = static_cast<std::size_t>(group);
  for (std::size_t i = 0; i < x.size(); ++i)
    decided.push_back(g.margin[i] > accuracy::group_budget(accuracy::GroupStore::affine, 0, amax_of(x, i / gs * gs, gs)));
  for (std::size_t k = 0; k < g.q.groups.size(); ++k)
    decided.push_back(g.scale_margin[k] > accuracy::group_budget(accuracy::GroupStore::affine, 0, amax_of(x, k * gs, gs)));
  out.put_all(decided);
  return 0;
}

int usage() {
  std::fprintf(stderr, "quant_dump: see the comment at the top of tests/tools/quant_dump.cpp\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> a(argv + 1, argv + argc);
  if (a.empty()) return usage();
  const std::string& cmd = a[0];
  const auto fmt = [&](std::size_t i) { return parse_fp8(a.at(i)).value(); };
  const auto rule = [&](std::size_t i) { return parse_fp8_overflow(a.at(i)).value(); };
  try {
    if (cmd == "fp8-decode" && a.size() == 3) {
      Out out(a[2]);
      for (int b = 0; b < 256; ++b) out.put(fp8_decode(static_cast<std::uint8_t>(b), fmt(1)));
      return 0;
    }
    if ((cmd == "fp8-encode" || cmd == "fp8-exact") && a.size() == 5) {
      Out out(a[4]);
      const std::vector<double> x = read<double>(a[3]);
      std::vector<std::uint8_t> zero_margin;
      for (double v : x) {
        if (cmd == "fp8-encode") {
          out.put(fp8_encode(v, fmt(1), rule(2)));
          continue;
        }
        MpfrValue m(53);
        mpfr_set_d(m.get(), v, MPFR_RNDN);
        const ExactCode c = fp8_exact(m.get(), 1.0, fmt(1), rule(2));
        out.put(static_cast<std::uint8_t>(c.code));
        zero_margin.push_back(c.margin == 0);
      }
      out.put_all(zero_margin);
      return 0;
    }
    if (cmd == "fp8-given" && a.size() == 6) {
      Out out(a[5]);
      std::string why;
      const auto spec = parse_store(a[1], why);
      if (!spec || !spec->given_scale()) throw std::invalid_argument("not a given-scale FP8 store: " + a[1] + " " + why);
      const std::vector<double> x = read<double>(a[4]);
      const std::int64_t H = std::stoll(a[2]), D = std::stoll(a[3]);
      const StoreBlock b = store_block(*spec, x, static_cast<std::int64_t>(x.size()) / (H * D), H, D);
      std::vector<std::uint8_t> zero_margin;
      for (float m : b.margin) zero_margin.push_back(m == 0);
      out.put_all(b.bytes);
      out.put_all(zero_margin);
      return 0;
    }
    if (cmd == "round-to" && a.size() == 4) {
      Out out(a[3]);
      const DType t = parse_dtype(a[1]).value();
      for (double v : read<double>(a[2])) out.put(round_to(v, t));
      return 0;
    }
    if ((cmd == "q8_0" || cmd == "q4_0" || cmd == "q8_0-exact" || cmd == "q4_0-exact") && a.size() == 3) {
      Out out(a[2]);
      return ggml(cmd, read<float>(a[1]), out);
    }
    if ((cmd == "affine" || cmd == "affine-exact") && a.size() == 6) {
      Out out(a[5]);
      return affine(cmd, std::stoi(a[1]), std::stoi(a[2]), parse_dtype(a[3]).value(), read<float>(a[4]), out);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quant_dump: %s\n", e.what());
    return 2;
  }
  return usage();
}
