// run_drift: every kernel against the exact reference (sweep.hpp, drift/DRIFT.md).
#include "ropecheck/drift/sweep.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <tuple>

#include <fmt/core.h>

#include "parallel.hpp"
#include "sweep_setup.hpp"

namespace ropecheck::drift {

namespace {

using detail::Setup;
using detail::sz;
constexpr double kInf = std::numeric_limits<double>::infinity();

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Per worker: the earliest violating sample of each class and its worst element.
struct BreakdownTracker {
  std::vector<std::int64_t> sample;  // per class; max() = none yet
  std::vector<Breakdown> at;
  explicit BreakdownTracker(std::size_t classes)
      : sample(classes, std::numeric_limits<std::int64_t>::max()), at(classes) {}
};

// The per-element check of one sample against every class: keeps, per class, the element with the
// largest error / allowed among the violating ones.
struct SampleCheck {
  std::vector<double> worst_ratio;
  std::vector<Breakdown> worst;
  explicit SampleCheck(std::size_t classes) : worst_ratio(classes, 0.0), worst(classes) {}
  void reset() {
    std::fill(worst_ratio.begin(), worst_ratio.end(), 0.0);
    std::fill(worst.begin(), worst.end(), Breakdown{});
  }
  void check(std::size_t ci, double err, double allowed, const char* quantity, int head, int pair, int channel) {
    if (!(err > allowed)) return;  // NaN errors are passed as infinity
    const double ratio = allowed > 0 ? err / allowed : kInf;
    if (ratio > worst_ratio[ci] || worst[ci].quantity.empty()) {
      worst_ratio[ci] = ratio;
      Breakdown& b = worst[ci];
      b.quantity = quantity;
      b.head = head;
      b.pair = pair;
      b.channel = channel;
      b.error = err;
      b.allowed = allowed;
    }
  }
};

struct ClassBounds {
  std::vector<accuracy::AccuracyClass> classes;
  std::vector<accuracy::ClassBound> rotated, table;
};

ClassBounds class_bounds(DType storage) {
  ClassBounds cb;
  for (accuracy::AccuracyClass c : accuracy::kAccuracyClasses) {
    cb.classes.push_back(c);
    cb.rotated.push_back(accuracy::class_bound(c, storage, accuracy::Quantity::rotated));
    cb.table.push_back(accuracy::class_bound(c, storage, accuracy::Quantity::table));
  }
  return cb;
}

// The per-pair class bounds at one position, [class][pair]: their relative part only (the absolute
// floor is per class, added where an element is checked).
struct RelativeBounds {
  std::vector<double> rotated, table;
};

RelativeBounds relative_bounds(const Setup& s, const ClassBounds& cb, std::int64_t p) {
  const std::size_t nc = cb.classes.size();
  RelativeBounds rel{std::vector<double>(nc * sz(s.P)), std::vector<double>(nc * sz(s.P))};
  for (int j = 0; j < s.P; ++j) {
    const accuracy::PairAngle a{std::fabs(static_cast<double>(p) * s.w[sz(j)]), s.abs_log_w[sz(j)]};
    for (std::size_t ci = 0; ci < nc; ++ci) {
      rel.rotated[ci * sz(s.P) + sz(j)] = cb.rotated[ci].relative(a);
      rel.table[ci * sz(s.P) + sz(j)] = cb.table[ci].relative(a);
    }
  }
  return rel;
}

// The angles and the recipe's f32 cos / sin at p against the exact ones (ec / es: the sample's exact
// cos / sin per pair); only kernels with rows (SweptKernel::has_rows) have them.
void measure_angle_rows(const Setup& s, const SweptKernel& c, std::int64_t p, const DD* ec, const DD* es, Metrics& m,
                        std::vector<double>& angles, std::vector<float>& fc, std::vector<float>& fs) {
  c.angle_row(p, angles);
  c.trig_row(p, fc, fs);
  for (int j = 0; j < s.P; ++j) {
    const double e = wrapped_angle_error(angles[sz(j)], ec[j], es[j]);
    if (std::isnan(e)) {
      ++m.nonfinite;
      m.angle.add(kAngleCap);
    } else {
      m.angle.add(std::fabs(e));
    }
    for (const auto& [v, ex] : {std::pair{fc[sz(j)], ec[j]}, std::pair{fs[sz(j)], es[j]}}) {
      if (!std::isfinite(v)) {
        ++m.nonfinite;
        m.trig.add(kUnitCap);
      } else {
        m.trig.add(std::fabs(dd_error(static_cast<double>(v), ex)));
      }
    }
  }
}

// The table in the storage dtype (M = 1), every element checked against every class.
void measure_table(const Setup& s, const ClassBounds& cb, const RelativeBounds& rel, const double* tcos,
                   const double* tsin, const DD* ec, const DD* es, Metrics& m, SampleCheck& check) {
  const std::size_t nc = cb.classes.size();
  for (int j = 0; j < s.P; ++j)
    for (int k = 0; k < 2; ++k) {
      const double v = (k == 0 ? tcos : tsin)[j];
      const DD& ex = k == 0 ? ec[j] : es[j];
      double err = kInf;
      if (!std::isfinite(v)) {
        ++m.nonfinite;
        m.table.add(kUnitCap);
      } else {
        err = std::fabs(dd_error(v, ex));
        m.table.add(err);
      }
      for (std::size_t ci = 0; ci < nc; ++ci)
        check.check(ci, err, rel.table[ci * sz(s.P) + sz(j)] + cb.table[ci].floor, "table", -1, j, k);
    }
}

// Rotated query vectors at p (token 0), every head and rotated channel, each element checked against
// every class.
void measure_rotated(const Setup& s, const ClassBounds& cb, const RelativeBounds& rel, const float* x,
                     const double* rot, const DD* ec, const DD* es, Metrics& m, SampleCheck& check) {
  const std::size_t nc = cb.classes.size();
  for (int h = 0; h < s.heads; ++h) {
    const float* xin = x + h * s.D;
    const double* out = rot + h * s.D;
    for (int j = 0; j < s.P; ++j) {
      const auto [ia, ib] = s.channels[sz(j)];
      const double a = xin[ia], b = xin[ib];
      const RotatedPair ex = exact_rotation(a, b, ec[j], es[j], s.att);
      const double M = s.att_f64 * (std::fabs(a) + std::fabs(b));
      for (int k = 0; k < 2; ++k) {
        const int chn = k == 0 ? ia : ib;
        const DD& e = k == 0 ? ex.a : ex.b;
        const double v = out[chn];
        const double u = ulp(e.hi, s.opt.storage);
        double err = kInf;
        if (!std::isfinite(v)) {
          ++m.nonfinite;
          m.rot_rel.add(kUnitCap);
          m.rot_ulp.add(kUnitCap * M / u);
        } else {
          err = std::fabs(dd_error(v, e));
          m.rot_ulp.add(err / u);
          m.rot_rel.add(M > 0 ? err / M : 0.0);
        }
        for (std::size_t ci = 0; ci < nc; ++ci)
          check.check(ci, err, rel.rotated[ci * sz(s.P) + sz(j)] * M + cb.rotated[ci].floor, "rotated", h, j, chn);
      }
    }
  }
}

// Relative-shift violation per head: logits <q(p), k(n)> against <q(p+s), k(n+s)>.
void measure_shifts(const Setup& s, const float* x, const double* rot, Metrics& m) {
  const std::int64_t HD = s.heads * s.D;
  for (int h = 0; h < s.heads; ++h) {
    const float* q = x + h * s.D;
    const float* kk = x + HD + h * s.D;
    double qn = 0, kn = 0;
    for (int d = 0; d < s.D; ++d) {
      qn += static_cast<double>(q[d]) * q[d];
      kn += static_cast<double>(kk[d]) * kk[d];
    }
    const double scale = s.att_f64 * s.att_f64 * std::sqrt(qn) * std::sqrt(kn);
    auto logit = [&](int tq, int tk) {
      const double* a = rot + tq * HD + h * s.D;
      const double* b = rot + tk * HD + h * s.D;
      double sum = 0;
      for (int d = 0; d < s.D; ++d) sum += a[d] * b[d];
      return sum;
    };
    const double l0 = logit(0, 1);
    for (int si = 0; si < s.S; ++si) {
      const double ls = logit(2 + 2 * si, 3 + 2 * si);
      const double v = std::fabs(l0 - ls) / scale;
      if (!std::isfinite(v)) {
        ++m.nonfinite;
        m.shift[sz(si)].add(kUnitCap);
      } else {
        m.shift[sz(si)].add(scale > 0 ? v : 0.0);
      }
    }
  }
}

// All measurements of one sample (sweep.hpp, Metrics; DRIFT.md "Metrics").
void measure_sample(const Setup& s, const SweptKernel& c, const ClassBounds& cb, std::int64_t i, const float* x,
                    const double* rot, const double* tcos, const double* tsin, Metrics& m, SampleCheck& check,
                    std::vector<double>& angles, std::vector<float>& fc, std::vector<float>& fs) {
  const std::int64_t p = s.plan.positions[sz(i)];
  const DD* ec = s.ecos.data() + i * s.P;
  const DD* es = s.esin.data() + i * s.P;
  m.samples = 1;
  m.shift.assign(sz(s.S), Stat{});
  check.reset();
  const RelativeBounds rel = relative_bounds(s, cb, p);
  if (c.has_rows()) measure_angle_rows(s, c, p, ec, es, m, angles, fc, fs);
  if (tcos) measure_table(s, cb, rel, tcos, tsin, ec, es, m, check);
  measure_rotated(s, cb, rel, x, rot, ec, es, m, check);
  measure_shifts(s, x, rot, m);
}

KernelResult sweep_kernel(const Setup& s, SweptKernel& c) {
  const auto t0 = std::chrono::steady_clock::now();
  KernelResult r;
  r.name = c.name();
  r.description = c.description();
  r.known_bad = c.known_bad();
  r.is_recipe = c.recipe().has_value();
  r.table_dtype = c.table_dtype();
  r.has_rows = c.has_rows();
  r.has_table = c.has_table();
  const ClassBounds cb = class_bounds(s.opt.storage);
  const std::size_t nc = cb.classes.size();
  const std::int64_t n = s.samples();
  r.positions.resize(sz(n));
  const auto [first, last] = shard_range(n, s.opt.shard, "sampled positions");
  std::vector<BreakdownTracker> trackers(sz(s.threads), BreakdownTracker(nc));

  detail::ChunkOutput out;
  const std::int64_t HD = s.heads * s.D;
  for (std::int64_t begin = first; begin < last; begin += detail::kSamplesPerChunk) {
    const std::int64_t end = std::min(last, begin + detail::kSamplesPerChunk);
    const detail::Chunk chunk = detail::make_chunk(s, begin, end);
    detail::run_chunk(c, s, chunk, out);
    detail::parallel_for(end - begin, s.threads, [&](std::int64_t b, std::int64_t e, int worker) {
      std::vector<double> angles(sz(s.P));
      std::vector<float> fc(sz(s.P)), fs(sz(s.P));
      SampleCheck check(nc);
      BreakdownTracker& tr = trackers[sz(worker)];
      for (std::int64_t k = b; k < e; ++k) {
        const std::int64_t i = begin + k;
        const float* x = chunk.x.data() + k * s.K * HD;
        const double* rot = out.rot.data() + k * s.K * HD;
        const double* tc = out.has_table ? out.tcos.data() + k * s.P : nullptr;
        const double* ts = out.has_table ? out.tsin.data() + k * s.P : nullptr;
        measure_sample(s, c, cb, i, x, rot, tc, ts, r.positions[sz(i)], check, angles, fc, fs);
        for (std::size_t ci = 0; ci < nc; ++ci)
          if (!check.worst[ci].quantity.empty() && i < tr.sample[ci]) {
            tr.sample[ci] = i;
            tr.at[ci] = check.worst[ci];
          }
      }
    });
  }

  summarize_positions(r, s.plan, sz(s.S));

  for (std::size_t ci = 0; ci < nc; ++ci) {
    Breakdown b;
    std::int64_t best = std::numeric_limits<std::int64_t>::max();
    for (const BreakdownTracker& tr : trackers)
      if (tr.sample[ci] < best) {
        best = tr.sample[ci];
        b = tr.at[ci];
      }
    b.cls = cb.classes[ci];
    if (best != std::numeric_limits<std::int64_t>::max()) b.position = s.plan.positions[sz(best)];
    for (std::int64_t i = 0; i < n && !b.saturated_from; ++i) {
      const std::int64_t p = s.plan.positions[sz(i)];
      for (int j = 0; j < s.P && !b.saturated_from; ++j)
        if (cb.rotated[ci].saturated({std::fabs(static_cast<double>(p) * s.w[sz(j)]), s.abs_log_w[sz(j)]}))
          b.saturated_from = p;
    }
    r.breakdown.push_back(b);
  }
  r.seconds = seconds_since(t0);
  return r;
}

}  // namespace

void summarize_positions(KernelResult& r, const SamplingPlan& plan, std::size_t shifts) {
  r.bins.assign(plan.bins.size(), Metrics{});
  for (Metrics& b : r.bins) b.shift.assign(shifts, Stat{});
  r.total = Metrics{};
  r.total.shift.assign(shifts, Stat{});
  for (std::size_t i = 0; i < r.positions.size(); ++i) r.bins[sz(plan.bin_of[i])].merge(r.positions[i]);
  for (const Metrics& b : r.bins) r.total.merge(b);
}

DriftResult run_drift(const EncodingSpec& spec, std::span<const plugin::KernelName> names, const DriftOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (names.empty()) throw SpecError("--recipes: no recipe given");
  Setup s = detail::make_setup(spec, options, names.size());
  // Every kernel first, so that a bad name or plugin fails before any long computation.
  std::vector<std::unique_ptr<SweptKernel>> cands;
  for (const plugin::KernelName& n : names) cands.push_back(make_swept_kernel(n, spec, options.storage, s.seq_len, s.threads, options.plugin));

  DriftResult res;
  res.spec = spec;
  res.options = s.opt;
  res.plan = s.plan;
  res.seq_len = s.seq_len;
  res.attention_factor = s.att_f64;
  std::tie(res.first_sample, res.last_sample) = shard_range(s.samples(), options.shard, "sampled positions");
  for (std::size_t k = 0; k < cands.size(); ++k) {
    SweptKernel* c = cands[k].get();
    KernelResult r = sweep_kernel(s, *c);
    const double sweep_s = r.seconds;
    if (options.uniqueness && static_cast<int>(k % static_cast<std::size_t>(options.shard.count)) == options.shard.index - 1) {
      r.uniqueness = measure_uniqueness(*c, spec.rope, options.sampling.max_pos, s.edges, s.threads);
      r.seconds += r.uniqueness->seconds;
    }
    if (options.progress)
      options.progress(fmt::format("{}: sweep {:.2f} s{}", r.name, sweep_s,
                                   r.uniqueness ? fmt::format(", uniqueness {:.2f} s", r.uniqueness->seconds) : ""));
    res.kernels.push_back(std::move(r));
  }
  for (const auto& c : cands) {
    c->finish();
    if (const SweptKernel::KernelFailures f = c->failures(); f.failed > 0) res.kernel_failures.push_back(describe_failures(f));
  }
  res.seconds = seconds_since(t0);
  return res;
}

}  // namespace ropecheck::drift
