// A target: any RoPE / sinusoidal implementation the property suite runs against — the exact
// reference at a chosen precision, one of our kernels, a C ABI plugin, or a C++ callable that
// another project registers from its own test binary.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::props {

struct TargetInfo {
  std::string name;          // e.g. "reference", "hf-fp32", "plugin:libmyrope.so"
  std::string description;   // one line
  // The accuracy class the target claims; every property's tolerance is derived from it
  // (accuracy/ERROR_MODEL.md). A correct target of that class never fails a property.
  accuracy::AccuracyClass accuracy = accuracy::AccuracyClass::fp32_angle;
  // The dtype its outputs are stored in (values are representable in it).
  DType dtype = DType::f32;
  // Whether positions may be negative (the exact reference: yes; most kernels: no).
  bool negative_positions = false;
};

// Input/output layout of one call: `tokens` positions, `heads` vectors of head_dim per token,
// x and out row-major [tokens][heads][head_dim]. x values are exactly representable in bf16.
class Target {
 public:
  virtual ~Target() = default;
  virtual const TargetInfo& info() const = 0;
  // Rotates x with the spec's RoPE at each token's position, attention factor folded in
  // (Hugging Face semantics, like golden's q_rot). Returns false when the target does not
  // implement this spec (the property is then skipped for this target, and reported so).
  virtual bool rope_apply(const EncodingSpec& spec, std::span<const Position> positions, int heads,
                          std::span<const double> x, std::span<double> out) = 0;
  // The same for the input named `input` ("q" or "k"). The suite calls this one, with both names and
  // different data, because real kernels have separate q and k paths (a head-stride bug in the k path
  // alone is a real bug). Default: rope_apply (a target whose q and k share one path).
  virtual bool rope_apply_input(std::string_view input, const EncodingSpec& spec, std::span<const Position> positions,
                                int heads, std::span<const double> x, std::span<double> out) {
    (void)input;
    return rope_apply(spec, positions, heads, x, out);
  }
  // The same kernel storing its outputs in `dtype` (same class claim), or nullptr when it has no such
  // output of its own. The suite runs every output dtype a target offers this way (suite.hpp,
  // SuiteOptions::dtypes). Default: nullptr (one output dtype, info().dtype; the registered kernel
  // targets name their dtype: kernel:hf, kernel:hf-bf16out). Kernel plugins offer every ABI dtype and
  // answer UNSUPPORTED for those they do not implement.
  virtual std::unique_ptr<Target> with_output(DType dtype) {
    (void)dtype;
    return nullptr;
  }
  // Sinusoidal rows [tokens][d_model]; false when unsupported.
  virtual bool sinusoidal(const EncodingSpec& spec, std::span<const std::int64_t> positions, std::span<double> out) {
    (void)spec;
    (void)positions;
    (void)out;
    return false;
  }
  // Calls that failed since the last take (a kernel plugin that crashed, hung, exited, ...): how
  // many, out of how many calls, and the first one's message. The suite fails the property they
  // happened in and reports them. Targets that cannot fail that way keep the default.
  struct Failures {
    std::int64_t failed = 0, calls = 0;
    std::string first;
    std::string declined;  // the first reason the kernel gave for an UNSUPPORTED answer ("" if none)
  };
  virtual Failures take_failures() { return {}; }
};

using RopeFunction = std::function<bool(const EncodingSpec&, std::span<const Position>, int heads,
                                        std::span<const double> x, std::span<double> out)>;
// A callable that also receives the input name ("q" or "k").
using NamedRopeFunction = std::function<bool(std::string_view input, const EncodingSpec&, std::span<const Position>,
                                             int heads, std::span<const double> x, std::span<double> out)>;
using SinusoidalFunction =
    std::function<bool(const EncodingSpec&, std::span<const std::int64_t>, std::span<double> out)>;

// Wraps C++ callables as a target (what another project registers from its own tests).
std::unique_ptr<Target> make_function_target(TargetInfo info, RopeFunction rope, SinusoidalFunction sinusoidal = {});
// The same with a callable that tells q from k.
std::unique_ptr<Target> make_named_function_target(TargetInfo info, NamedRopeFunction rope,
                                                   SinusoidalFunction sinusoidal = {});

// The exact reference (MPFR at max(bits, the working precision for the angles)), rounded once to
// binary64: class exact, dtype f64, negative positions allowed.
std::unique_ptr<Target> make_reference_target(unsigned bits = 128);

}  // namespace ropecheck::props
