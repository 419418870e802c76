// What the diagnosis units share (private to golden/): the mistaken exact computation of one
// hypothesis over a golden set, and the elements a diagnosis looks at.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ropecheck/checker/diagnose.hpp"

namespace ropecheck::checker::diagnose_detail {
// The checker's vocabulary from the modules below it.
using golden::GoldenSet;
using golden::ManifestTensor;
using io::Tensor;
using io::TensorDType;

// The spec a mistake computes with (layout, scaling, truncate, mrope mode changed); positions,
// frequency rounding and the attention factor are applied by MistakenTruth.
RopeSpec mistaken_spec(const RopeSpec& truth, const Mistake& m);
// Whether the mistake can be evaluated on this spec (proportional RoPE changes its pair count
// without scaling; the catalogue leaves that out).
bool evaluable(const RopeSpec& truth, const Mistake& m);

// The exact value of a golden output's element under a mistake, and the error the class allows
// around it. Uses the MPFR reference: the caller sets ScopedPrecision (precision_bits) first.
class MistakenTruth {
 public:
  MistakenTruth(const GoldenSet& g, const Mistake& m);
  ~MistakenTruth();
  MistakenTruth(MistakenTruth&&) noexcept;
  struct Value {
    double value = 0;    // nearest binary64 of the exact mistaken value (NaN when the position overflowed)
    double allowed = 0;  // the class bound around it
  };
  // Element `index` of output `base` (cos, sin, q_rot, k_rot) stored as `dt`, judged with class c.
  Value at(const std::string& base, std::int64_t index, accuracy::AccuracyClass c, DType dt);
  // Working precision that covers every catalogue mistake on this set.
  static unsigned precision_bits(const GoldenSet& g);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// The elements of one output a diagnosis evaluates: failing ones (outside class c) and passing ones,
// each a fixed-seed sample of at most the options' counts, in index order.
struct ElementSample {
  std::vector<std::int64_t> failing, passing;
  std::int64_t failing_total = 0;
};
ElementSample sample_elements(const GoldenSet& g, const std::string& golden_name, const Tensor& candidate,
                              accuracy::AccuracyClass c, const DiagnoseOptions& o);

}  // namespace ropecheck::checker::diagnose_detail
