// run_compare: two kernels on the same inputs at the same positions (sweep.hpp, DRIFT.md
// "Comparing two candidates").
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numbers>

#include "parallel.hpp"
#include "ropecheck/drift/sweep.hpp"
#include "sweep_setup.hpp"

namespace ropecheck::drift {

namespace {

using detail::Setup;
using detail::sz;

// Values equal as numbers (+0 = -0), and NaN equal to NaN (both sides equally broken).
bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// |a - b| in ulps of the storage dtype at the larger magnitude; infinity when exactly one side is
// not finite or both are infinite with different signs.
double diff_ulps(double a, double b, DType t) {
  if (same(a, b)) return 0.0;
  if (!std::isfinite(a) || !std::isfinite(b)) return std::numeric_limits<double>::infinity();
  return std::fabs(a - b) / ulp(std::max(std::fabs(a), std::fabs(b)), t);
}

void add_capped(Stat& st, double v, double cap) { st.add(std::isfinite(v) ? v : cap); }

}  // namespace

void CompareMetrics::merge(const CompareMetrics& o) {
  samples += o.samples;
  diff_ulp.merge(o.diff_ulp);
  diff_rel.merge(o.diff_rel);
  differing += o.differing;
  elements += o.elements;
  angle_diff.merge(o.angle_diff);
  trig_diff.merge(o.trig_diff);
  table_diff.merge(o.table_diff);
  err_a_ulp.merge(o.err_a_ulp);
  err_b_ulp.merge(o.err_b_ulp);
  err_a_rel.merge(o.err_a_rel);
  err_b_rel.merge(o.err_b_rel);
  nonfinite_a += o.nonfinite_a;
  nonfinite_b += o.nonfinite_b;
  violations += o.violations;
  saturated += o.saturated;
}

namespace {

CompareResult compare_measured(const EncodingSpec& spec, const plugin::KernelName& a_name, const plugin::KernelName& b_name,
                               const DriftOptions& options, Setup& s, std::chrono::steady_clock::time_point t0) {
  std::unique_ptr<SweptKernel> A = make_swept_kernel(a_name, spec, options.storage, s.seq_len, s.threads, options.plugin);
  std::unique_ptr<SweptKernel> B = make_swept_kernel(b_name, spec, options.storage, s.seq_len, s.threads, options.plugin);

  CompareResult res;
  res.spec = spec;
  res.options = s.opt;
  res.plan = s.plan;
  res.seq_len = s.seq_len;
  res.attention_factor = s.att_f64;
  res.a = A->name();
  res.b = B->name();
  res.a_description = A->description();
  res.b_description = B->description();
  const std::int64_t n = s.samples();
  res.positions.resize(sz(n));
  const bool rows = A->has_rows() && B->has_rows();
  const DType dt = options.storage;
  const std::int64_t HD = s.heads * s.D;
  const accuracy::ClassBound bound = accuracy::class_bound(options.compare_class, dt, accuracy::Quantity::rotated);

  // Per worker: the earliest sample where the rotated values differ, and its largest difference.
  struct First {
    std::int64_t sample = std::numeric_limits<std::int64_t>::max();
    FirstDifference at;
  };
  std::vector<First> firsts(sz(s.threads));

  detail::ChunkOutput oa, ob;
  for (std::int64_t begin = 0; begin < n; begin += detail::kSamplesPerChunk) {
    const std::int64_t end = std::min(n, begin + detail::kSamplesPerChunk);
    const detail::Chunk chunk = detail::make_chunk(s, begin, end);
    detail::run_chunk(*A, s, chunk, oa);
    detail::run_chunk(*B, s, chunk, ob);
    const bool tables = oa.has_table && ob.has_table;
    detail::parallel_for(end - begin, s.threads, [&](std::int64_t lo, std::int64_t hi, int worker) {
      std::vector<double> aa(sz(s.P)), ab(sz(s.P));
      std::vector<float> ca(sz(s.P)), sa(sz(s.P)), cb(sz(s.P)), sb(sz(s.P));
      for (std::int64_t k = lo; k < hi; ++k) {
        const std::int64_t i = begin + k;
        const std::int64_t p = s.plan.positions[sz(i)];
        CompareMetrics& m = res.positions[sz(i)];
        m.samples = 1;
        const DD* ec = s.ecos.data() + i * s.P;
        const DD* es = s.esin.data() + i * s.P;
        if (rows) {
          A->angle_row(p, aa);
          B->angle_row(p, ab);
          A->trig_row(p, ca, sa);
          B->trig_row(p, cb, sb);
          for (int j = 0; j < s.P; ++j) {
            add_capped(m.angle_diff, std::fabs(std::remainder(aa[sz(j)] - ab[sz(j)], 2 * std::numbers::pi)), kAngleCap);
            add_capped(m.trig_diff, std::fabs(static_cast<double>(ca[sz(j)]) - cb[sz(j)]), kUnitCap);
            add_capped(m.trig_diff, std::fabs(static_cast<double>(sa[sz(j)]) - sb[sz(j)]), kUnitCap);
          }
        }
        if (tables)
          for (std::int64_t e = k * s.P; e < (k + 1) * s.P; ++e) {
            add_capped(m.table_diff, same(oa.tcos[sz(e)], ob.tcos[sz(e)]) ? 0.0 : std::fabs(oa.tcos[sz(e)] - ob.tcos[sz(e)]),
                       kUnitCap);
            add_capped(m.table_diff, same(oa.tsin[sz(e)], ob.tsin[sz(e)]) ? 0.0 : std::fabs(oa.tsin[sz(e)] - ob.tsin[sz(e)]),
                       kUnitCap);
          }
        // Rotated query vectors at p (token 0).
        const float* x = chunk.x.data() + k * s.K * HD;
        const double* ra = oa.rot.data() + k * s.K * HD;
        const double* rb = ob.rot.data() + k * s.K * HD;
        FirstDifference here;
        for (int h = 0; h < s.heads; ++h)
          for (int j = 0; j < s.P; ++j) {
            const auto [ia, ib] = s.channels[sz(j)];
            const double xa = x[h * s.D + ia], xb = x[h * s.D + ib];
            const RotatedPair ex = exact_rotation(xa, xb, ec[j], es[j], s.att);
            const double M = s.att_f64 * (std::fabs(xa) + std::fabs(xb));
            const accuracy::PairAngle angle{std::fabs(static_cast<double>(p) * s.w[sz(j)]), s.abs_log_w[sz(j)]};
            const double tol = 2 * bound.allowed(angle, M);  // A and B both within E of the exact value
            for (int c = 0; c < 2; ++c) {
              const int ch = c == 0 ? ia : ib;
              const double va = ra[h * s.D + ch], vb = rb[h * s.D + ch];
              const DD& e = c == 0 ? ex.a : ex.b;
              const double u = ulp(e.hi, dt);
              const double du = diff_ulps(va, vb, dt);
              ++m.elements;
              if (!same(va, vb)) ++m.differing;
              if (!same(va, vb) && !(std::fabs(va - vb) <= tol)) ++m.violations;  // NaN / Inf on one side too
              else if (bound.saturated(angle)) ++m.saturated;
              const double cap_ulp = kUnitCap * M / u;
              add_capped(m.diff_ulp, du, cap_ulp);
              add_capped(m.diff_rel, M > 0 ? (same(va, vb) ? 0.0 : std::fabs(va - vb) / M) : 0.0, kUnitCap);
              if (!std::isfinite(va)) ++m.nonfinite_a;
              if (!std::isfinite(vb)) ++m.nonfinite_b;
              add_capped(m.err_a_ulp, std::isfinite(va) ? std::fabs(dd_error(va, e)) / u : std::nan(""), cap_ulp);
              add_capped(m.err_b_ulp, std::isfinite(vb) ? std::fabs(dd_error(vb, e)) / u : std::nan(""), cap_ulp);
              add_capped(m.err_a_rel, std::isfinite(va) ? (M > 0 ? std::fabs(dd_error(va, e)) / M : 0.0) : std::nan(""),
                         kUnitCap);
              add_capped(m.err_b_rel, std::isfinite(vb) ? (M > 0 ? std::fabs(dd_error(vb, e)) / M : 0.0) : std::nan(""),
                         kUnitCap);
              if (du > 0 && (!here.position || du > here.diff_ulp)) {
                here.position = p;
                here.head = h;
                here.pair = j;
                here.channel = ch;
                here.a = va;
                here.b = vb;
                here.diff_ulp = du;
              }
            }
          }
        First& f = firsts[sz(worker)];
        if (here.position && i < f.sample) {
          f.sample = i;
          f.at = here;
        }
      }
    });
  }
  res.bins.assign(s.plan.bins.size(), CompareMetrics{});
  for (std::int64_t i = 0; i < n; ++i) res.bins[sz(s.plan.bin_of[sz(i)])].merge(res.positions[sz(i)]);
  for (const CompareMetrics& b : res.bins) res.total.merge(b);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t p = s.plan.positions[sz(i)];
    if (res.positions[sz(i)].violations > 0 && !res.first_violation) res.first_violation = p;
    if (res.positions[sz(i)].saturated > 0 && !res.first_saturated) res.first_saturated = p;
  }
  const std::string cls(to_string(options.compare_class));
  if (res.total.violations > 0) {
    res.verdict = ropecheck::Verdict::fail;
    res.reason = std::to_string(res.total.violations) + " of " + std::to_string(res.total.elements) +
                 " rotated values differ by more than twice the " + cls + " bound (first at position " +
                 std::to_string(*res.first_violation) + "): A and B cannot both be " + cls;
  } else if (res.total.saturated > 0) {
    res.verdict = ropecheck::Verdict::not_tested;
    res.reason = std::to_string(res.total.saturated) + " of " + std::to_string(res.total.elements) +
                 " rotated values not discriminated by " + cls + " (saturated bound) from position " +
                 std::to_string(*res.first_saturated) + "; " + std::string(ropecheck::kSaturationAdvice) +
                 " (--class), or --max-pos below that position";
  }
  std::int64_t best = std::numeric_limits<std::int64_t>::max();
  for (const First& f : firsts)
    if (f.sample < best) {
      best = f.sample;
      res.first_sampled = f.at;
    }

  // Every position 0 .. N-1: the unit pair vector rotated by both (uniqueness.hpp's rows).
  if (options.uniqueness) {
    constexpr std::int64_t kChunk = 16384;
    const std::int64_t N = options.sampling.max_pos;
    std::vector<float> unit(sz(s.D), 0.0f), x;
    for (const auto& c : s.channels) unit[sz(c.first)] = 1.0f;
    for (std::int64_t t = 0; t < std::min(N, kChunk); ++t) x.insert(x.end(), unit.begin(), unit.end());
    std::vector<std::int64_t> pos;
    std::vector<double> ua, ub;
    for (std::int64_t start = 0; start < N; start += kChunk) {
      const std::int64_t T = std::min(kChunk, N - start);
      pos.resize(sz(T));
      for (std::int64_t t = 0; t < T; ++t) pos[sz(t)] = start + t;
      const std::span<const float> xs(x.data(), sz(T * s.D));
      ua.assign(sz(T * s.D), 0.0);
      ub.assign(sz(T * s.D), 0.0);
      A->rotate(pos, 1, xs, ua);
      B->rotate(pos, 1, xs, ub);
      for (std::int64_t t = 0; t < T; ++t) {
        FirstDifference here;
        for (int j = 0; j < s.P; ++j)
          for (int c = 0; c < 2; ++c) {
            const int ch = c == 0 ? s.channels[sz(j)].first : s.channels[sz(j)].second;
            const double va = ua[sz(t * s.D + ch)], vb = ub[sz(t * s.D + ch)];
            const double du = diff_ulps(va, vb, dt);
            if (du > 0 && (!here.position || du > here.diff_ulp)) {
              here.position = start + t;
              here.head = 0;
              here.pair = j;
              here.channel = ch;
              here.a = va;
              here.b = vb;
              here.diff_ulp = du;
            }
          }
        if (here.position) {
          ++res.positions_differing_all;
          if (!res.first_all.position) res.first_all = here;
        }
      }
    }
  }
  for (SweptKernel* c : {A.get(), B.get()}) {
    c->finish();
    if (const SweptKernel::KernelFailures f = c->failures(); f.failed > 0) res.kernel_failures.push_back(describe_failures(f));
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace

CompareResult run_compare(const EncodingSpec& spec, const plugin::KernelName& a_name, const plugin::KernelName& b_name,
                          const DriftOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  Setup s = detail::make_setup(spec, options, 2);
  try {
    return compare_measured(spec, a_name, b_name, options, s, t0);
  } catch (const KernelDeclined& e) {
    CompareResult res;
    res.spec = spec;
    res.options = s.opt;
    res.plan = s.plan;
    res.seq_len = s.seq_len;
    res.attention_factor = s.att_f64;
    res.a = a_name.given;
    res.b = b_name.given;
    res.declined = e.what();
    res.verdict = ropecheck::Verdict::not_tested;
    res.reason = "a kernel declined this spec / dtype, nothing compared: " + res.declined;
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return res;
  }
}

}  // namespace ropecheck::drift
