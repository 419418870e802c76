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

// Per worker: the earliest sample where the rotated values differ, and its largest difference.
struct EarliestDifference {
  std::int64_t sample = std::numeric_limits<std::int64_t>::max();
  FirstDifference at;
};

// One worker's rows of A and B at a position: angles and f32 cos / sin per pair.
struct PairRows {
  explicit PairRows(int P) : aa(sz(P)), ab(sz(P)), ca(sz(P)), sa(sz(P)), cb(sz(P)), sb(sz(P)) {}
  std::vector<double> aa, ab;
  std::vector<float> ca, sa, cb, sb;
};

// The result's description of the run and of both kernels, before anything is measured.
CompareResult compare_result_for(const EncodingSpec& spec, const Setup& s, const SweptKernel& A, const SweptKernel& B) {
  CompareResult res;
  res.spec = spec;
  res.options = s.opt;
  res.plan = s.plan;
  res.seq_len = s.seq_len;
  res.attention_factor = s.att_f64;
  res.a = A.name();
  res.b = B.name();
  res.a_description = A.description();
  res.b_description = B.description();
  return res;
}

// Keeps in `here` the element with the largest difference seen (du > 0 only).
void keep_largest_difference(FirstDifference& here, std::int64_t position, int head, int pair, int channel, double va,
                             double vb, double du) {
  if (du > 0 && (!here.position || du > here.diff_ulp)) {
    here.position = position;
    here.head = head;
    here.pair = pair;
    here.channel = channel;
    here.a = va;
    here.b = vb;
    here.diff_ulp = du;
  }
}

// A's and B's angles and f32 cos / sin at p, pair by pair (kernels with rows only).
void compare_angle_rows(const SweptKernel& A, const SweptKernel& B, std::int64_t p, int P, PairRows& r,
                        CompareMetrics& m) {
  A.angle_row(p, r.aa);
  B.angle_row(p, r.ab);
  A.trig_row(p, r.ca, r.sa);
  B.trig_row(p, r.cb, r.sb);
  for (int j = 0; j < P; ++j) {
    add_capped(m.angle_diff, std::fabs(std::remainder(r.aa[sz(j)] - r.ab[sz(j)], 2 * std::numbers::pi)), kAngleCap);
    add_capped(m.trig_diff, std::fabs(static_cast<double>(r.ca[sz(j)]) - r.cb[sz(j)]), kUnitCap);
    add_capped(m.trig_diff, std::fabs(static_cast<double>(r.sa[sz(j)]) - r.sb[sz(j)]), kUnitCap);
  }
}

// A's and B's cos / sin tables of the chunk's sample k (kernels with tables only).
void compare_tables(const detail::ChunkOutput& oa, const detail::ChunkOutput& ob, std::int64_t k, int P,
                    CompareMetrics& m) {
  for (std::int64_t e = k * P; e < (k + 1) * P; ++e) {
    add_capped(m.table_diff, same(oa.tcos[sz(e)], ob.tcos[sz(e)]) ? 0.0 : std::fabs(oa.tcos[sz(e)] - ob.tcos[sz(e)]),
               kUnitCap);
    add_capped(m.table_diff, same(oa.tsin[sz(e)], ob.tsin[sz(e)]) ? 0.0 : std::fabs(oa.tsin[sz(e)] - ob.tsin[sz(e)]),
               kUnitCap);
  }
}

// The rotated query vectors at p (token 0; x the inputs, ra / rb A's and B's outputs), every head and
// rotated channel: each against the other (within twice the class bound: both within it of the exact
// value) and against the exact value (ec / es: the sample's exact cos / sin). Returns the element with
// the largest difference.
FirstDifference compare_rotated(const Setup& s, const accuracy::ClassBound& bound, DType dt, std::int64_t p,
                                const float* x, const double* ra, const double* rb, const DD* ec, const DD* es,
                                CompareMetrics& m) {
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
        keep_largest_difference(here, p, h, j, ch, va, vb, du);
      }
    }
  return here;
}

// Every sampled position, chunk by chunk, both kernels on the same inputs: fills `positions` (one
// CompareMetrics per sample) and returns each worker's earliest difference.
std::vector<EarliestDifference> compare_sampled(const Setup& s, SweptKernel& A, SweptKernel& B,
                                                const DriftOptions& options, std::vector<CompareMetrics>& positions) {
  const std::int64_t n = s.samples();
  const bool rows = A.has_rows() && B.has_rows();
  const DType dt = options.storage;
  const std::int64_t HD = s.heads * s.D;
  const accuracy::ClassBound bound = accuracy::class_bound(options.compare_class, dt, accuracy::Quantity::rotated);
  std::vector<EarliestDifference> firsts(sz(s.threads));
  detail::ChunkOutput oa, ob;
  for (std::int64_t begin = 0; begin < n; begin += detail::kSamplesPerChunk) {
    const std::int64_t end = std::min(n, begin + detail::kSamplesPerChunk);
    const detail::Chunk chunk = detail::make_chunk(s, begin, end);
    detail::run_chunk(A, s, chunk, oa);
    detail::run_chunk(B, s, chunk, ob);
    const bool tables = oa.has_table && ob.has_table;
    detail::parallel_for(end - begin, s.threads, [&](std::int64_t lo, std::int64_t hi, int worker) {
      PairRows r(s.P);
      for (std::int64_t k = lo; k < hi; ++k) {
        const std::int64_t i = begin + k;
        const std::int64_t p = s.plan.positions[sz(i)];
        CompareMetrics& m = positions[sz(i)];
        m.samples = 1;
        if (rows) compare_angle_rows(A, B, p, s.P, r, m);
        if (tables) compare_tables(oa, ob, k, s.P, m);
        const FirstDifference here =
            compare_rotated(s, bound, dt, p, chunk.x.data() + k * s.K * HD, oa.rot.data() + k * s.K * HD,
                            ob.rot.data() + k * s.K * HD, s.ecos.data() + i * s.P, s.esin.data() + i * s.P, m);
        EarliestDifference& f = firsts[sz(worker)];
        if (here.position && i < f.sample) {
          f.sample = i;
          f.at = here;
        }
      }
    });
  }
  return firsts;
}

// The first difference over every worker: the earliest sample's (none when A and B never differ).
FirstDifference earliest_difference(const std::vector<EarliestDifference>& firsts) {
  FirstDifference first;
  std::int64_t best = std::numeric_limits<std::int64_t>::max();
  for (const EarliestDifference& f : firsts)
    if (f.sample < best) {
      best = f.sample;
      first = f.at;
    }
  return first;
}

// Per-sample metrics summed into bins and the total; the first violating and the first saturated
// sampled position.
void summarize_comparison(CompareResult& res, const SamplingPlan& plan) {
  const std::int64_t n = static_cast<std::int64_t>(plan.positions.size());
  res.bins.assign(plan.bins.size(), CompareMetrics{});
  for (std::int64_t i = 0; i < n; ++i) res.bins[sz(plan.bin_of[sz(i)])].merge(res.positions[sz(i)]);
  for (const CompareMetrics& b : res.bins) res.total.merge(b);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t p = plan.positions[sz(i)];
    if (res.positions[sz(i)].violations > 0 && !res.first_violation) res.first_violation = p;
    if (res.positions[sz(i)].saturated > 0 && !res.first_saturated) res.first_saturated = p;
  }
}

// The verdict on the pair and its reason: fail where some values differ by more than twice the class
// bound, not tested where bounds are saturated, else pass (CompareResult's default).
void judge_comparison(CompareResult& res, accuracy::AccuracyClass compare_class) {
  const std::string cls(to_string(compare_class));
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
}

// Every position 0 .. N-1: the unit pair vector rotated by both (uniqueness.hpp's rows); counts the
// positions where they differ and keeps the first.
void compare_every_position(SweptKernel& A, SweptKernel& B, const Setup& s, std::int64_t N, DType dt,
                            CompareResult& res) {
  constexpr std::int64_t kChunk = 16384;
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
    A.rotate(pos, 1, xs, ua);
    B.rotate(pos, 1, xs, ub);
    for (std::int64_t t = 0; t < T; ++t) {
      FirstDifference here;
      for (int j = 0; j < s.P; ++j)
        for (int c = 0; c < 2; ++c) {
          const int ch = c == 0 ? s.channels[sz(j)].first : s.channels[sz(j)].second;
          const double va = ua[sz(t * s.D + ch)], vb = ub[sz(t * s.D + ch)];
          keep_largest_difference(here, start + t, 0, j, ch, va, vb, diff_ulps(va, vb, dt));
        }
      if (here.position) {
        ++res.positions_differing_all;
        if (!res.first_all.position) res.first_all = here;
      }
    }
  }
}

CompareResult compare_measured(const EncodingSpec& spec, const plugin::KernelName& a_name, const plugin::KernelName& b_name,
                               const DriftOptions& options, Setup& s, std::chrono::steady_clock::time_point t0) {
  std::unique_ptr<SweptKernel> A = make_swept_kernel(a_name, spec, options.storage, s.seq_len, s.threads, options.plugin);
  std::unique_ptr<SweptKernel> B = make_swept_kernel(b_name, spec, options.storage, s.seq_len, s.threads, options.plugin);
  CompareResult res = compare_result_for(spec, s, *A, *B);
  res.positions.resize(sz(s.samples()));
  const std::vector<EarliestDifference> firsts = compare_sampled(s, *A, *B, options, res.positions);
  summarize_comparison(res, s.plan);
  judge_comparison(res, options.compare_class);
  res.first_sampled = earliest_difference(firsts);
  if (options.uniqueness) compare_every_position(*A, *B, s, options.sampling.max_pos, options.storage, res);
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
