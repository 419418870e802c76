// store_check::diagnose_store (store_diagnosis.hpp): each store mistake of reference/store_mistakes.hpp
// recomputed from the set's exact values rounded to binary32 (what a correct rotation hands the
// quantizer, within an ulp or two), compared with the candidate's store: a failing code is explained
// when the mistaken store has the same code, a failing scale group when it has the same scale (and
// bias) up to four binary32 ulps (a data-derived f32 scale moves by as much with the rotation's last
// bits; f16 / bf16 scales are compared bit for bit, being far coarser). Ranked by the failing codes and
// groups explained, then by the agreement over the whole store.
#include <algorithm>
#include <cstring>

#include "../store_diagnosis.hpp"
#include "../check_internal.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/store_mistakes.hpp"

namespace ropecheck::checker::store_check {
namespace {

using quant::StoreBytes;
using quant::StoreKind;

constexpr double kMatchShare = 0.9;  // a match reproduces at least this share of the failing codes and groups

// Every element's code of a store's bytes.
std::vector<int> codes_of(const quant::StoreSpec& s, const StoreBytes& b, std::size_t n) {
  std::vector<int> c(n);
  constexpr std::size_t B = quant::kGgmlBlock;
  for (std::size_t i = 0; i < n; ++i) {
    if (s.kind == StoreKind::fp8) c[i] = b.codes[i];
    if (s.kind == StoreKind::q8_0) c[i] = static_cast<std::int8_t>(b.codes[i / B * 34 + 2 + i % B]);
    if (s.kind == StoreKind::q4_0) {
      const std::uint8_t byte = b.codes[i / B * 18 + 2 + i % 16];
      c[i] = i % B < 16 ? byte & 0x0F : byte >> 4;
    }
  }
  if (s.kind == StoreKind::affine) {
    std::vector<std::uint32_t> w(b.codes.size() / 4);
    std::memcpy(w.data(), b.codes.data(), w.size() * 4);
    const std::vector<std::uint8_t> u = quant::affine_unpack(w, s.affine.bits, n);
    c.assign(u.begin(), u.end());
  }
  return c;
}

// Every scale group's scale (and bias) of a store's bytes.
std::vector<std::pair<double, double>> scales_of(const quant::StoreSpec& s, const StoreBytes& b, std::size_t n) {
  std::vector<std::pair<double, double>> g;
  if (s.kind == StoreKind::fp8)
    for (std::size_t k = 0; k * 4 < b.scales.size(); ++k) g.push_back({load_element(b.scales.data() + k * 4, DType::f32), 0});
  if (s.kind == StoreKind::q8_0 || s.kind == StoreKind::q4_0) {
    const std::size_t bytes = s.kind == StoreKind::q8_0 ? 34 : 18;
    for (std::size_t k = 0; k * bytes < b.codes.size(); ++k) g.push_back({load_element(b.codes.data() + k * bytes, DType::f16), 0});
  }
  if (s.kind == StoreKind::affine) {
    const std::size_t sz = format_info(s.affine.scale_dtype).storage_bits / 8;
    for (std::size_t k = 0; k < n / static_cast<std::size_t>(s.affine.group_size); ++k)
      g.push_back({load_element(b.scales.data() + k * sz, s.affine.scale_dtype),
                   load_element(b.biases.data() + k * sz, s.affine.scale_dtype)});
  }
  return g;
}

bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b || std::fabs(a - b) <= 4 * 0x1p-24 * std::fabs(b);
}
bool same(const std::pair<double, double>& a, const std::pair<double, double>& b) {
  return same(a.first, b.first) && same(a.second, b.second);
}

// The correct store's input when the kernel quantized its input first: y + R(x_q - x), x_q the stored
// input's values, R the spec's rotation in binary64 (linear, so the exact values need no re-rotation).
std::vector<float> rotated_dequantized(const StoreFailures& f, const std::vector<float>& in) {
  const RopeSpec& r = f.g.spec().rope;
  const RopeFrequencies<double> fr = rope_frequencies<double>(r, f.g.seq_len());
  const std::vector<float> xq = quant::store_dequantized(in, f.T, f.H, f.D, f.spec);
  std::vector<float> out(f.y.size());
  std::vector<double> delta(static_cast<std::size_t>(f.D));
  for (std::int64_t t = 0; t < f.T; ++t)
    for (std::int64_t h = 0; h < f.H; ++h) {
      const std::size_t at = static_cast<std::size_t>((t * f.H + h) * f.D);
      for (std::size_t d = 0; d < delta.size(); ++d) delta[d] = double(xq[at + d]) - double(in[at + d]);
      const std::vector<double> rd = rope_apply<double>(r, fr, f.g.positions()[static_cast<std::size_t>(t)], delta);
      for (std::size_t d = 0; d < delta.size(); ++d) out[at + d] = static_cast<float>(f.y[at + d] + rd[d]);
    }
  return out;
}

}  // namespace

StoreDiagnosis diagnose_store(const StoreFailures& f) {
  StoreDiagnosis out;
  const std::size_t n = f.y.size();
  std::vector<float> x(n), in(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(f.y[i]);
  const io::Tensor& input = f.g.tensor(check_detail::input_of(f.base));  // f32
  std::memcpy(in.data(), input.data.data(), n * 4);
  const StoreBytes cb{f.cand.codes, f.cand.scales, f.cand.biases};
  const std::vector<int> cc = codes_of(f.spec, cb, n);
  const auto cs = scales_of(f.spec, cb, n);
  const StoreBytes right = quant::mistaken_store("none", x, in, f.T, f.H, f.D, f.spec);
  out.failing = static_cast<std::int64_t>(f.failed_elements.size() + f.failed_groups.size());
  for (const quant::StoreMistakeInfo& m : quant::store_mistake_catalogue()) {
    if (!quant::store_mistake_applies(m.id, f.spec)) continue;
    // Quantizing the input first: the norm stage (ERROR_MODEL.md section 17) would sit between; not modelled.
    if (m.id == "quantize-before-rotate" && has_qk_norm(f.g.spec().rope)) continue;
    const StoreBytes b = m.id == "quantize-before-rotate"
                             ? quant::mistaken_store("none", rotated_dequantized(f, in), in, f.T, f.H, f.D, f.spec)
                             : quant::mistaken_store(m.id, x, in, f.T, f.H, f.D, f.spec);
    if (b.codes == right.codes && b.scales == right.scales && b.biases == right.biases) {
      out.unchanged.push_back(m.id);
      continue;
    }
    const std::vector<int> hc = codes_of(f.spec, b, n);
    const auto hs = scales_of(f.spec, b, n);
    StoreHypothesis h{m.id, m.title, m.source};
    h.failing = out.failing;
    for (std::int64_t i : f.failed_elements) h.failing_explained += hc[static_cast<std::size_t>(i)] == cc[static_cast<std::size_t>(i)];
    for (std::int64_t k : f.failed_groups) h.failing_explained += same(cs[static_cast<std::size_t>(k)], hs[static_cast<std::size_t>(k)]);
    h.compared = static_cast<std::int64_t>(n + cs.size());
    for (std::size_t i = 0; i < n; ++i) h.agreeing += hc[i] == cc[i];
    for (std::size_t k = 0; k < cs.size(); ++k) h.agreeing += same(cs[k], hs[k]);
    h.matches = static_cast<double>(h.failing_explained) >= kMatchShare * static_cast<double>(h.failing) && h.failing_explained > 0;
    out.ranked.push_back(std::move(h));
  }
  std::stable_sort(out.ranked.begin(), out.ranked.end(), [](const StoreHypothesis& a, const StoreHypothesis& b) {
    return a.failing_explained != b.failing_explained ? a.failing_explained > b.failing_explained : a.agreeing > b.agreeing;
  });
  if (!out.ranked.empty() && out.ranked[0].matches) {
    const StoreHypothesis& h = out.ranked[0];
    out.match = h.id;
    out.conclusion = fmt::format("matches the store written with {} ({}): {} of {} failing codes and scale groups reproduced, "
                                 "{} of {} codes and groups equal",
                                 h.id, h.title, h.failing_explained, h.failing, h.agreeing, h.compared);
  } else {
    out.conclusion = "no known store mistake explains this";
    if (!out.ranked.empty() && 2 * out.ranked[0].failing_explained > out.failing)
      out.conclusion += fmt::format(" (closest: {}, {} of {} failing codes and scale groups)", out.ranked[0].id,
                                    out.ranked[0].failing_explained, out.failing);
  }
  return out;
}

}  // namespace ropecheck::checker::store_check
