// check_stores (stores.hpp): a candidate's quantized stores judged per scale group with the store classes
// of accuracy/quantized_store.hpp. The budget of a group is the class bound of the binary32 values the
// kernel quantizes (quantizer_input_error, per element, the largest of the group) plus the quantizer's
// own roundings (group_budget): ERROR_MODEL.md section 15.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "check_internal.hpp"
#include "output_geometry.hpp"
#include "store_diagnosis.hpp"
#include "ropecheck/accuracy/quantized_store.hpp"
#include "ropecheck/checker/stores.hpp"
#include "ropecheck/reference/quantized_stores.hpp"

namespace ropecheck::checker {

namespace store_check {

using accuracy::StoreVerdict;
using quant::StoreKind;
using quant::StoreSpec;

// The --stores item of a store named in the manifest's "stores" record ("e4m3fn:saturate:per-token").
std::string store_item(const golden::GoldenSet& g, const std::string& store) {
  const nlohmann::json& m = g.manifest();
  if (m.contains("stores") && m["stores"].contains("stores"))
    for (const nlohmann::json& r : m["stores"]["stores"]) {
      if (r.value("name", "") != store) continue;
      if (r.contains("item")) return r["item"].get<std::string>();  // a given scale: its values
      const std::string f = r.value("format", "");
      if (f == "fp8") return store + ":" + r.value("overflow", "") + ":" + r.value("scale", "");
      if (f == "mlx-affine") return store + ":" + r.value("scale_dtype", "");
      return store;
    }
  throw InputError("the golden set's manifest has no record of store " + quote_name(store));
}

StoreSpec spec_of(const golden::GoldenSet& g, const std::string& golden_name) {
  const std::string item = store_item(g, golden_name.substr(golden_name.find('.') + 1));
  std::string why;
  const auto s = quant::parse_store(item, why);
  if (!s) throw InputError("the golden set's store record " + quote_name(item) + ": " + why);
  return *s;
}

std::vector<float> floats(const io::Tensor& t) {
  std::vector<float> v(t.data.size() / 4);
  std::memcpy(v.data(), t.data.data(), v.size() * 4);
  return v;
}

std::vector<double> widened(const std::vector<float>& f, std::size_t first, std::size_t n) {
  return {f.begin() + static_cast<std::ptrdiff_t>(first), f.begin() + static_cast<std::ptrdiff_t>(first + n)};
}

// One store of one output: the golden side, the candidate's, and the tallies.
struct Job {
  Job(const golden::GoldenSet& gs, const StoreCandidate& c, StoreSpec s) : g(gs), cand(c), spec(s) {}
  const golden::GoldenSet& g;
  const StoreCandidate& cand;
  StoreSpec spec;
  std::int64_t T = 0, H = 0, D = 0;
  std::vector<double> y, e;  // exact values and the class's input error per element
  std::vector<float> margin, scale_margin;
  StoreCheck out;
  std::size_t K = 0;
  std::vector<std::int64_t> failed_elements, failed_groups;  // for the diagnosis

  const io::Tensor& golden(const std::string& suffix) const { return g.tensor(cand.golden_name + suffix); }
  double budget(accuracy::GroupStore k, std::size_t first, std::size_t n) const {
    double e_max = 0, amax = 0;
    for (std::size_t i = first; i < first + n; ++i) e_max = std::max(e_max, e[i]), amax = std::max(amax, std::fabs(y[i]));
    return accuracy::group_budget(k, e_max, amax);
  }
  void group(StoreVerdict v) {
    if (v == StoreVerdict::fail) failed_groups.push_back(out.groups);
    ++out.groups;
    (v == StoreVerdict::pass ? out.groups_passed : v == StoreVerdict::fail ? out.groups_failed : out.groups_not_tested)++;
  }
  void element(std::size_t i, StoreVerdict v, int gc, int cc, double value, double budget) {
    ++out.elements;
    (v == StoreVerdict::pass ? out.passed : v == StoreVerdict::fail ? out.failed : out.not_tested)++;
    if (v == StoreVerdict::pass) return;
    if (v == StoreVerdict::fail) failed_elements.push_back(static_cast<std::int64_t>(i));
    const auto ii = static_cast<std::int64_t>(i);
    StoreElement s{ii, ii / (H * D), static_cast<int>(ii / D % H), static_cast<int>(ii % D), gc, cc, value, y[i],
                   budget, margin[i], v == StoreVerdict::fail ? ropecheck::Verdict::fail : ropecheck::Verdict::not_tested};
    auto& w = out.worst;
    const bool failed = v == StoreVerdict::fail;
    const auto at = failed ? std::find_if(w.begin(), w.end(), [](const StoreElement& x) { return x.verdict != ropecheck::Verdict::fail; })
                           : w.end();
    if (static_cast<std::size_t>(at - w.begin()) < K) w.insert(at, s);
    if (w.size() > K) w.pop_back();
  }
  void require(std::size_t have, std::size_t want, const char* what) const {
    if (have != want)
      throw InputError(cand.golden_name + ": candidate tensor " + quote_name(cand.name) + " holds " + std::to_string(have) +
                       " bytes of " + what + ", the golden store " + std::to_string(want));
  }

  void fp8();
  void fp8_given();
  void ggml();
  void affine();
};

// Each scale group gathered (fp8_scale_group: per token and per (token, head) contiguous, per tensor the
// whole tensor, per head its head over every token) and judged as one group.
void Job::fp8() {
  const std::size_t n = y.size();
  const std::vector<float> gs = floats(golden(".scale"));
  require(cand.codes.size(), n, "codes");
  require(cand.scales.size(), gs.size() * 4, "scales (f32)");
  std::vector<float> cs(gs.size());
  std::memcpy(cs.data(), cand.scales.data(), cand.scales.size());
  const std::uint8_t* gc = golden("").data.data();
  std::vector<std::vector<std::size_t>> members(gs.size());
  for (std::size_t i = 0; i < n; ++i)
    members.at(static_cast<std::size_t>(quant::fp8_scale_group(spec, static_cast<std::int64_t>(i), H, D))).push_back(i);
  for (std::size_t k = 0; k < members.size(); ++k) {
    const std::vector<std::size_t>& idx = members[k];
    std::vector<std::uint8_t> g8, c8;
    std::vector<double> m, yg;
    double e_max = 0, amax = 0;
    for (std::size_t i : idx) {
      g8.push_back(gc[i]), c8.push_back(cand.codes[i]), m.push_back(margin[i]), yg.push_back(y[i]);
      e_max = std::max(e_max, e[i]), amax = std::max(amax, std::fabs(y[i]));
    }
    const double b = accuracy::group_budget(accuracy::GroupStore::fp8_dynamic, e_max, amax);
    const accuracy::Fp8GroupVerdicts v =
        accuracy::judge_fp8_group(gs[k], scale_margin[k], g8, m, yg, cs[k], c8, spec.fp8, spec.overflow, b);
    group(v.scale);
    for (std::size_t j = 0; j < idx.size(); ++j)
      element(idx[j], v.elements[j], g8[j], c8[j], quant::fp8_dequantize(c8[j], cs[k], spec.fp8), b);
  }
}

// A given scale (a golden input, the `.scale` tensor): each element its own group, nothing to judge of
// the scale; the budget of the kernel's y / s or y * fl(1 / s) (given_scale_budget, section 15).
void Job::fp8_given() {
  const std::vector<float> gs = floats(golden(".scale"));
  require(cand.codes.size(), y.size(), "codes");
  const std::uint8_t* gc = golden("").data.data();
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double sc = gs.at(gs.size() == 1 ? 0 : i / static_cast<std::size_t>(D) % static_cast<std::size_t>(H));
    const double b = accuracy::given_scale_budget(e[i], y[i], sc);
    const StoreVerdict v = accuracy::judge_fp8(gc[i], margin[i], y[i], cand.codes[i], sc, spec.fp8, spec.overflow, b);
    element(i, v, gc[i], cand.codes[i], quant::fp8_dequantize(cand.codes[i], sc, spec.fp8), b);
  }
}

void Job::ggml() {
  const bool q8 = spec.kind == StoreKind::q8_0;
  const std::size_t bytes = q8 ? 34 : 18, blocks = y.size() / quant::kGgmlBlock;
  const std::vector<std::uint8_t>& gb = golden("").data;
  require(cand.codes.size(), blocks * bytes, "GGML blocks");
  constexpr std::size_t B = quant::kGgmlBlock;
  for (std::size_t k = 0; k < blocks; ++k) {
    const std::size_t f = k * B;
    const double b = budget(q8 ? accuracy::GroupStore::q8_0 : accuracy::GroupStore::q4_0, f, B);
    std::array<double, B> m{};
    for (std::size_t j = 0; j < B; ++j) m[j] = margin[f + j];
    const std::span<const double, B> ys(y.data() + f, B);
    const std::uint8_t* pg = gb.data() + k * bytes;
    const std::uint8_t* pc = cand.codes.data() + k * bytes;
    if (q8) {
      const quant::BlockQ8_0 go = quant::q8_0_from_bytes(std::span<const std::uint8_t, 34>(pg, 34));
      const quant::BlockQ8_0 ca = quant::q8_0_from_bytes(std::span<const std::uint8_t, 34>(pc, 34));
      const auto v = accuracy::judge_q8_0(go, scale_margin[k], m, ys, ca, b);
      group(v.scale);
      for (int j = 0; j < quant::kGgmlBlock; ++j)
        element(f + static_cast<std::size_t>(j), v.elements[static_cast<std::size_t>(j)], go.qs[static_cast<std::size_t>(j)],
                ca.qs[static_cast<std::size_t>(j)], quant::ggml_value(ca, j), b);
    } else {
      const quant::BlockQ4_0 go = quant::q4_0_from_bytes(std::span<const std::uint8_t, 18>(pg, 18));
      const quant::BlockQ4_0 ca = quant::q4_0_from_bytes(std::span<const std::uint8_t, 18>(pc, 18));
      const auto v = accuracy::judge_q4_0(go, scale_margin[k], m, ys, ca, b);
      group(v.scale);
      for (int j = 0; j < quant::kGgmlBlock; ++j)
        element(f + static_cast<std::size_t>(j), v.elements[static_cast<std::size_t>(j)], quant::q4_0_code(go, j),
                quant::q4_0_code(ca, j), quant::ggml_value(ca, j), b);
    }
  }
}

void Job::affine() {
  const std::size_t n = y.size(), G = static_cast<std::size_t>(spec.affine.group_size), groups = n / G;
  const DType sd = spec.affine.scale_dtype;
  const std::size_t ss = dtype_size(io::tensor_dtype(sd));
  require(cand.codes.size(), n * static_cast<std::size_t>(spec.affine.bits) / 8, "packed codes");
  require(cand.scales.size(), groups * ss, "scales");
  require(cand.biases.size(), groups * ss, "biases");
  const auto words = [](const std::vector<std::uint8_t>& b) {
    std::vector<std::uint32_t> w(b.size() / 4);
    std::memcpy(w.data(), b.data(), w.size() * 4);
    return w;
  };
  const std::vector<std::uint8_t> gcodes = quant::affine_unpack(words(golden("").data), spec.affine.bits, n);
  const std::vector<std::uint8_t> ccodes = quant::affine_unpack(words(cand.codes), spec.affine.bits, n);
  std::vector<double> gsc(groups), gbi(groups), csc(groups), cbi(groups);
  decode(golden(".scales").data.data(), sd, gsc);
  decode(golden(".biases").data.data(), sd, gbi);
  decode(cand.scales.data(), sd, csc);
  decode(cand.biases.data(), sd, cbi);
  const std::vector<float> dm = floats(golden(".decision_margin"));
  for (std::size_t k = 0; k < groups; ++k) {
    const std::size_t f = k * G;
    const double b = budget(accuracy::GroupStore::affine, f, G);
    const quant::AffineGroup go{gsc[k], gbi[k]}, ca{csc[k], cbi[k]};
    const accuracy::AffineGroupVerdicts v = accuracy::judge_affine_group(
        {gcodes.data() + f, G}, go, scale_margin[k], dm[k], widened(margin, f, G), {y.data() + f, G},
        {ccodes.data() + f, G}, ca, spec.affine, b);
    group(v.scale);
    for (std::size_t j = 0; j < G; ++j)
      element(f + j, v.elements[j], gcodes[f + j], ccodes[f + j], quant::affine_value(ccodes[f + j], ca), b);
  }
}

StoreCheck judge_one(const golden::GoldenSet& g, const StoreCandidate& c, accuracy::AccuracyClass cls, int worst_count) {
  const std::string base = check_detail::base_of(c.golden_name);
  Job job(g, c, spec_of(g, c.golden_name));
  job.K = static_cast<std::size_t>(std::max(0, worst_count));
  const check_detail::OutputGeometry geo(g, base);
  job.T = g.tokens(), job.H = geo.H, job.D = geo.D;
  const io::Tensor& truth = g.tensor(base + ".f64");
  job.y.resize(truth.data.size() / 8);
  std::memcpy(job.y.data(), truth.data.data(), job.y.size() * 8);
  job.e.resize(job.y.size());
  for (std::size_t i = 0; i < job.y.size(); ++i) {
    const auto el = geo.element(static_cast<std::int64_t>(i));
    job.e[i] = accuracy::quantizer_input_error(cls, el.quantity, el.angle, el.magnitude, job.y[i]);
    // A norm stage before the rotation: its term, as the check adds it (ERROR_MODEL.md section 17).
    if (cls != accuracy::AccuracyClass::exact) job.e[i] += geo.norm_term * el.magnitude;
  }
  job.margin = floats(job.golden(".margin"));
  if (!job.spec.given_scale()) job.scale_margin = floats(job.golden(".scale_margin"));
  job.out.golden_name = c.golden_name, job.out.candidate_name = c.name;
  job.out.store = store_item(g, c.golden_name.substr(c.golden_name.find('.') + 1));
  switch (job.spec.kind) {
    case StoreKind::fp8: job.spec.given_scale() ? job.fp8_given() : job.fp8(); break;
    case StoreKind::q8_0:
    case StoreKind::q4_0: job.ggml(); break;
    case StoreKind::affine: job.affine(); break;
  }
  StoreCheck& o = job.out;
  o.verdict = o.failed + o.groups_failed > 0 ? ropecheck::Verdict::fail
              : o.not_tested + o.groups_not_tested > 0 ? ropecheck::Verdict::not_tested
                                                      : ropecheck::Verdict::pass;
  if (o.verdict == ropecheck::Verdict::fail)
    o.diagnosis = diagnose_store({g, c, job.spec, base, job.y, job.T, job.H, job.D, std::move(job.failed_elements),
                                  std::move(job.failed_groups)});
  return std::move(job.out);
}

}  // namespace store_check

std::vector<std::string> store_outputs(const golden::GoldenSet& g) {
  std::vector<std::string> out;
  for (const golden::ManifestTensor& t : g.tensors())
    if (t.role == "store" && std::count(t.name.begin(), t.name.end(), '.') == 1) out.push_back(t.name);
  return out;
}

quant::StoreSpec store_spec(const golden::GoldenSet& g, const std::string& golden_name) {
  return store_check::spec_of(g, golden_name);
}

std::vector<std::string> store_companions(const golden::GoldenSet& g, const std::string& golden_name) {
  switch (store_check::spec_of(g, golden_name).kind) {
    case quant::StoreKind::fp8:  // a given scale is the set's input, not the candidate's
      if (store_check::spec_of(g, golden_name).given_scale()) return {};
      return {".scale"};
    case quant::StoreKind::affine: return {".scales", ".biases"};
    default: return {};
  }
}

StoresReport check_stores(const golden::GoldenSet& g, const std::vector<StoreCandidate>& candidates,
                          const Criterion& criterion, int worst_count) {
  StoresReport r;
  if (criterion.kind == Criterion::Kind::accuracy_class) r.accuracy_class = criterion.accuracy_class;
  std::int64_t failed = 0, untested = 0;
  for (const StoreCandidate& c : candidates) {
    r.stores.push_back(store_check::judge_one(g, c, r.accuracy_class, worst_count));
    const StoreCheck& s = r.stores.back();
    r.verdict = ropecheck::combine(r.verdict, s.verdict);
    failed += s.verdict == ropecheck::Verdict::fail;
    untested += s.verdict == ropecheck::Verdict::not_tested;
  }
  const std::string cls(accuracy::to_string(r.accuracy_class));
  if (failed > 0)
    r.reason = fmt::format("{} of {} quantized stores fail their {} store class", failed, r.stores.size(), cls);
  else if (untested > 0)
    r.reason = fmt::format("{} of {} quantized stores hold codes the {} store class cannot decide (not tested)",
                           untested, r.stores.size(), cls);
  return r;
}

}  // namespace ropecheck::checker
