// Which elements a diagnosis evaluates: one pass over the output finds the elements outside the
// judging class; of those, and of the passing ones, it keeps the ones with the smallest keys of a
// seeded hash of their index (a fixed-seed sample that does not depend on the thread count).
#include <algorithm>
#include <cmath>

#include "../output_geometry.hpp"
#include "ropecheck/core/splitmix.hpp"
#include "../check_internal.hpp"
#include "internal.hpp"

namespace ropecheck::checker::diagnose_detail {
// The checker's vocabulary from the modules below it.
using golden::GoldenSet;
using golden::ManifestTensor;
using io::Tensor;
using io::TensorDType;

namespace {

std::uint64_t mix(std::uint64_t x) { return splitmix64_finalize(x + 0x9E3779B97F4A7C15ULL); }  // SplitMix64's step

struct Keyed {
  std::uint64_t key;
  std::int64_t index;
  bool operator<(const Keyed& o) const { return key != o.key ? key < o.key : index < o.index; }
};

// The k smallest, kept as a max-heap.
void keep(std::vector<Keyed>& heap, std::size_t k, const Keyed& e) {
  if (k == 0) return;
  if (heap.size() < k) {
    heap.push_back(e);
    std::push_heap(heap.begin(), heap.end());
  } else if (e < heap.front()) {
    std::pop_heap(heap.begin(), heap.end());
    heap.back() = e;
    std::push_heap(heap.begin(), heap.end());
  }
}

std::vector<std::int64_t> indices(std::vector<Keyed> v, std::size_t k) {
  std::sort(v.begin(), v.end());
  if (v.size() > k) v.resize(k);
  std::vector<std::int64_t> out;
  for (const Keyed& e : v) out.push_back(e.index);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

ElementSample sample_elements(const GoldenSet& g, const std::string& golden_name, const Tensor& candidate,
                              accuracy::AccuracyClass c, const DiagnoseOptions& o) {
  using check_detail::OutputGeometry;
  const std::string base = check_detail::base_of(golden_name);
  const OutputGeometry geo(g, base);
  const DType dt = *check_detail::float_dtype(candidate.dtype);
  const StoredValues cand_r(candidate.data.data(), dt), truth_r(g.tensor(base + ".f64").data.data(), DType::f64);
  std::array<accuracy::ClassBound, 3> bounds{};
  for (accuracy::Quantity q : {accuracy::Quantity::table, accuracy::Quantity::rotated, accuracy::Quantity::passthrough})
    bounds[static_cast<std::size_t>(q)] = accuracy::class_bound(c, dt, q);
  if (c != accuracy::AccuracyClass::exact)  // a norm stage's term, as the check adds it (ERROR_MODEL.md section 17)
    for (accuracy::Quantity q : {accuracy::Quantity::rotated, accuracy::Quantity::passthrough})
      bounds[static_cast<std::size_t>(q)].k_const += geo.norm_term;
  const std::size_t kf = static_cast<std::size_t>(std::max(0, o.max_failing));
  const std::size_t kp = static_cast<std::size_t>(std::max(0, o.max_passing));

  const std::int64_t n = candidate.numel();
  constexpr std::int64_t kChunk = std::int64_t{1} << 16;
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  struct Part {
    std::vector<Keyed> failing, passing;
    std::int64_t failing_total = 0;
  };
  std::vector<Part> parts(static_cast<std::size_t>(chunks));
  check_detail::for_each_chunk(chunks, o.threads, [&](std::int64_t k) {
    Part& part = parts[static_cast<std::size_t>(k)];
    for (std::int64_t i = k * kChunk, end = std::min(n, (k + 1) * kChunk); i < end; ++i) {
      const double cv = cand_r[i], y = truth_r[i];
      const OutputGeometry::Element e = geo.element(i);
      bool fails;
      if (std::isfinite(cv) && std::isfinite(y))
        fails = std::fabs(cv - y) > bounds[static_cast<std::size_t>(e.quantity)].allowed(e.angle, e.magnitude);
      else
        fails = !((std::isnan(cv) && std::isnan(y)) || (std::isinf(cv) && cv == y));
      const Keyed key{mix(static_cast<std::uint64_t>(i) ^ mix(o.seed)), i};
      if (fails) {
        ++part.failing_total;
        keep(part.failing, kf, key);
      } else {
        keep(part.passing, kp, key);
      }
    }
  });
  ElementSample s;
  std::vector<Keyed> failing, passing;
  for (Part& p : parts) {
    s.failing_total += p.failing_total;
    failing.insert(failing.end(), p.failing.begin(), p.failing.end());
    passing.insert(passing.end(), p.passing.begin(), p.passing.end());
  }
  s.failing = indices(std::move(failing), kf);
  s.passing = indices(std::move(passing), kp);
  return s;
}

}  // namespace ropecheck::checker::diagnose_detail
