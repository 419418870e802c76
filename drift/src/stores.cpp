// run_stores (stores.hpp): every sampled position's query heads (golden's input stream q, as the sweep's),
// the exact rotation in double-double (exact.hpp), each recipe's binary32 rotation (kernels::rope_apply),
// and both stored with the owner's quantizer (kernels::quantize_store), read back with their steps
// (kernels::dequantize_store). The exact side stores fl32(y*): what a kernel without rotation error would
// store. Every store groups within a token, so all positions go through one call.
#include <chrono>
#include <cmath>

#include "ropecheck/drift/exact.hpp"
#include "ropecheck/drift/stores.hpp"
#include "ropecheck/golden/input_generator.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kernels/store_values.hpp"

namespace ropecheck::drift {

namespace {

struct Sampled {
  std::int64_t T = 0, H = 0, D = 0;
  std::vector<float> x;          // [T][H][D] inputs
  std::vector<double> exact, M;  // y* (rounded once to binary64) and the error model's magnitude per element
  std::vector<char> rotated;     // the element is a rotated channel (pass-through copies are not counted)
};

Sampled sample(const RopeSpec& r, const SamplingPlan& plan, const StoresOptions& o) {
  Sampled s;
  s.T = static_cast<std::int64_t>(plan.positions.size()), s.H = o.heads, s.D = r.head_dim;
  const auto n = static_cast<std::size_t>(s.T * s.H * s.D);
  s.x.resize(n), s.exact.resize(n), s.M.resize(n), s.rotated.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) s.x[i] = golden::generate_input(o.seed, golden::InputStream::q, i);
  const ExactRope er(r, o.seq_len);
  const int P = er.pairs();
  std::vector<DD> c(static_cast<std::size_t>(P)), sn(static_cast<std::size_t>(P));
  for (std::int64_t t = 0; t < s.T; ++t) {
    er.cos_sin_row(Position::uniform(plan.positions[static_cast<std::size_t>(t)]), c, sn);
    for (std::int64_t h = 0; h < s.H; ++h) {
      const std::size_t base = static_cast<std::size_t>((t * s.H + h) * s.D);
      for (std::size_t k = 0; k < static_cast<std::size_t>(s.D); ++k) s.exact[base + k] = s.x[base + k], s.M[base + k] = std::fabs(s.x[base + k]);
      for (int j = 0; j < P; ++j) {
        const auto [ia, ib] = pair_channels(r, j);
        const double a = s.x[base + static_cast<std::size_t>(ia)], b = s.x[base + static_cast<std::size_t>(ib)];
        const RotatedPair e = exact_rotation(a, b, c[static_cast<std::size_t>(j)], sn[static_cast<std::size_t>(j)], er.attention_factor());
        const double M = er.attention_factor_f64() * (std::fabs(a) + std::fabs(b));
        for (const auto& [ch, v] : {std::pair{ia, e.a}, std::pair{ib, e.b}}) {
          const std::size_t i = base + static_cast<std::size_t>(ch);
          s.exact[i] = v.hi + v.lo, s.M[i] = M, s.rotated[i] = 1;
        }
      }
    }
  }
  return s;
}

kernels::StoredValuesAndSteps stored(const std::vector<float>& v, const Sampled& s, const quant::StoreSpec& st) {
  return kernels::dequantize_store(kernels::quantize_store(v, s.T, s.H, s.D, st), st, s.T, s.H, s.D);
}

StoreCurve curve(const Sampled& s, const SamplingPlan& plan, const std::vector<float>& y, const kernels::StoredValuesAndSteps& ex,
                 const quant::StoreSpec& st) {
  const kernels::StoredValuesAndSteps got = stored(y, s, st);
  StoreCurve c;
  c.bins.resize(plan.bins.size());
  std::vector<std::int64_t> changed(plan.bins.size()), counted(plan.bins.size());
  for (std::size_t b = 0; b < plan.bins.size(); ++b) c.bins[b].lo = plan.bins[b].lo, c.bins[b].hi = plan.bins[b].hi;
  const auto per_token = static_cast<std::size_t>(s.H * s.D);
  const bool fp8 = st.kind == quant::StoreKind::fp8;
  for (std::size_t t = 0; t < static_cast<std::size_t>(s.T); ++t) {
    const auto b = static_cast<std::size_t>(plan.bin_of[t]);
    StoreBin& bin = c.bins[b];
    ++bin.positions;
    double worst = 0;  // the largest rotation error of the position, in quanta
    for (std::size_t i = t * per_token; i < (t + 1) * per_token; ++i) {
      if (!s.rotated[i]) continue;
      // One quantum (DRIFT.md): FP8's steps shrink toward zero, so its quantum is the step at the pair's
      // magnitude M (the scale rotation errors are measured in); an integer store's step is its group's.
      const double step = fp8 ? quant::fp8_step(s.M[i] / ex.scale[i], st.fp8) * ex.scale[i] : ex.step[i];
      const double rot = std::fabs(static_cast<double>(y[i]) - s.exact[i]);
      const double diff = std::fabs(got.value[i] - ex.value[i]) / step;
      const bool moved = !(diff < 0.5);  // a different code (the same code moves only with its scale, by far less)
      if (s.M[i] > 0) bin.rot_rel = std::max(bin.rot_rel, rot / s.M[i]), bin.store_rel = std::max(bin.store_rel, std::fabs(ex.value[i] - s.exact[i]) / s.M[i]);
      bin.rot_quanta = std::max(bin.rot_quanta, rot / step);
      bin.code_diff = std::isnan(diff) ? INFINITY : std::max(bin.code_diff, diff);
      worst = std::isnan(rot) ? INFINITY : std::max(worst, rot / step);
      changed[b] += moved, counted[b] += 1;
    }
    if (worst > 0.5 && !c.crossover) c.crossover = plan.positions[t];  // past half a quantum: DRIFT.md
  }
  for (std::size_t b = 0; b < plan.bins.size(); ++b) {
    c.bins[b].codes_changed = counted[b] ? static_cast<double>(changed[b]) / static_cast<double>(counted[b]) : 0;
    c.elements += counted[b], c.changed += changed[b];
  }
  return c;
}

}  // namespace

StoresResult run_stores(const EncodingSpec& spec, const std::vector<kernels::Recipe>& recipes,
                        const std::vector<std::pair<std::string, quant::StoreSpec>>& stores, const StoresOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  StoresResult r;
  r.spec_name = spec.name, r.options = options, r.plan = make_sampling_plan(options.sampling);
  const Sampled s = sample(spec.rope, r.plan, options);
  std::vector<float> exact32(s.exact.begin(), s.exact.end());  // fl32(y*): the exact side's binary32 values
  std::vector<kernels::StoredValuesAndSteps> exact_stored;
  for (const auto& st : stores) exact_stored.push_back(stored(exact32, s, st.second));
  for (const kernels::Recipe rec : recipes) {
    const kernels::RopePlan plan = kernels::make_rope_plan(spec.rope, rec, options.seq_len);
    std::vector<float> in(s.x), y(s.x.size());
    kernels::rope_apply(plan, kernels::PositionsView::of(r.plan.positions),
                        kernels::TensorView::contiguous(in.data(), DType::f32, s.T, s.H, s.D),
                        kernels::TensorView::contiguous(y.data(), DType::f32, s.T, s.H, s.D));
    for (std::size_t k = 0; k < stores.size(); ++k) {
      StoreCurve c = curve(s, r.plan, y, exact_stored[k], stores[k].second);
      c.recipe = std::string(kernels::to_string(rec)), c.store = stores[k].first;
      r.curves.push_back(std::move(c));
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return r;
}

}  // namespace ropecheck::drift
