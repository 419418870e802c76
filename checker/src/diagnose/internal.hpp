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
// without scaling; a factor needs a scaling that has one; a LongRoPE swap needs LongRoPE; a rotary
// width of its own needs prefix-partial RoPE without per-pair lists or sections).
bool evaluable(const RopeSpec& truth, const Mistake& m);
// YaRN's get_mscale(factor, mscale) of a spec, alone (mla-yarn-mscale-on-slice).
double mscale_of(const RopeSpec& r);
// p cast to a signed integer of `bits` (16 or 32) bits, two's complement: what a narrowing cast does.
std::int64_t wrapped_position(std::int64_t p, int bits);
// Whether some position of the set changes when wrapped to `bits` bits.
bool wraps(const GoldenSet& g, int bits);

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
    bool saturated = false;  // the bound has reached the element's magnitude: it does not discriminate here
  };
  // Element `index` of output `base` (cos, sin, q_rot, k_rot) stored as `dt`, judged with class c.
  Value at(const std::string& base, std::int64_t index, accuracy::AccuracyClass c, DType dt);
  // Working precision that covers mistake m on this set (its largest angle).
  static unsigned precision_bits(const GoldenSet& g, const Mistake& m);

 private:
  struct State;
  static void init(State& s, const GoldenSet& g, const Mistake& m, const RopeSpec& truth, int heads);
  std::unique_ptr<State> s_;
  std::unique_ptr<State> key_;  // MLA sets: k_pe_rot's (the slice alone, one head)
};

// The elements of one output a diagnosis evaluates: failing ones (outside class c) and passing ones,
// each a fixed-seed sample of at most the options' counts, in index order.
struct ElementSample {
  std::vector<std::int64_t> failing, passing;
  std::int64_t failing_total = 0;
};
ElementSample sample_elements(const GoldenSet& g, const std::string& golden_name, const Tensor& candidate,
                              accuracy::AccuracyClass c, const DiagnoseOptions& o);

// A diagnosed output: its base (cos, sin, q_rot, k_rot), the candidate tensor, its dtype, its sample.
struct Target {
  std::string base;
  const Tensor* candidate;
  DType dt;
  ElementSample sample;
};

// The parametric hypotheses fitted to the candidate (parametric_fit.cpp): for each family the spec
// has (a position offset; the base; the linear / YaRN / llama3 factor; the attention factor; the rotary
// width) the value the candidate's own outputs give, found in binary64 from the angles and magnitudes
// its rows imply, rounded to the fewest significant digits that still fit the fitting rows within the
// bound of class `judged`. Nothing is fitted when the fitting rows hold under the spec itself; a
// family that no value fits gives none; a value a catalogue hypothesis computes is recorded as the same
// as it. `sin_beside_cos`: the sin tensor beside a diagnosed cos one (nullptr when absent). Every family
// tried is appended to `fits`.
std::vector<Hypothesis> fit_hypotheses(const GoldenSet& g, const std::vector<Target>& targets,
                                       const Tensor* sin_beside_cos, accuracy::AccuracyClass judged,
                                       std::vector<ParameterFit>& fits);

}  // namespace ropecheck::checker::diagnose_detail
