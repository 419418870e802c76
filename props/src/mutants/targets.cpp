// The built-in targets: the correct scalar hf-fp32 kernel and its mutants as props targets (doubles
// in and out, float inside), and their registration.
#include "mutation.hpp"

#include <memory>
#include <mutex>
#include <stdexcept>

#include "ropecheck/props/mutants.hpp"
#include "ropecheck/props/registry.hpp"

namespace ropecheck::props::mutation {
using namespace ropecheck::accuracy;  // the error model is this module's vocabulary

namespace {

// ---- the adaptor from the Target interface (doubles) to the float kernels ------------------------

// x values are bf16-exact (target.hpp), so the conversion to float is exact.
std::vector<float> to_float(std::span<const double> x) {
  std::vector<float> v(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) v[i] = static_cast<float>(x[i]);
  return v;
}
void to_double(const std::vector<float>& v, std::span<double> out) {
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<double>(v[i]);
}
bool shapes_ok(const EncodingSpec& spec, std::size_t tokens, int heads, std::size_t x, std::size_t out) {
  if (spec.family != Family::rope || heads < 0) return false;
  const std::size_t n = tokens * idx(heads) * idx(spec.rope.head_dim);
  return x == n && out == n;
}

}  // namespace

std::string dtype_suffix(DType out) {
  switch (out) {
    case DType::f16: return "-f16out";
    case DType::bf16: return "-bf16out";
    default: return "";
  }
}

std::unique_ptr<Target> make_bug_target(const MutantDef& d) {
  TargetInfo info;
  info.name = std::string("mutant:") + d.name;
  info.description = std::string("hf-fp32 with a bug: ") + d.description;
  info.accuracy = AccuracyClass::fp32_angle;
  info.dtype = d.dtype;
  info.negative_positions = true;
  const Bug bug = d.bug;
  const DType dt = d.dtype;
  NamedRopeFunction rope = [bug, dt](std::string_view input, const EncodingSpec& spec, std::span<const Position> positions,
                                     int heads, std::span<const double> x, std::span<double> out) {
    if (!shapes_ok(spec, positions.size(), heads, x.size(), out.size())) return false;
    const std::vector<float> xf = to_float(x);
    std::vector<float> of(xf.size());
    mutant_rope_apply(bug, input, spec.rope, positions, heads, xf, of, dt);
    to_double(of, out);
    return true;
  };
  SinusoidalFunction sinusoidal = [bug, dt](const EncodingSpec& spec, std::span<const std::int64_t> positions,
                                            std::span<double> out) {
    if (spec.family != Family::sinusoidal || out.size() != positions.size() * idx(spec.sinusoidal.d_model))
      return false;
    std::vector<float> of(out.size());
    mutant_sinusoidal(bug, spec.sinusoidal, positions, of, dt);
    to_double(of, out);
    return true;
  };
  return make_named_function_target(std::move(info), std::move(rope), std::move(sinusoidal));
}

}  // namespace ropecheck::props::mutation

namespace ropecheck::props {
using namespace ropecheck::accuracy;

std::vector<MutantInfo> mutants() {
  std::vector<MutantInfo> out;
  for (const mutation::MutantDef& d : mutation::mutant_defs())
    out.push_back({d.name, d.description, d.where, mutation::mutant_spec(d), d.max_position, d.known_gap, d.dtype});
  return out;
}

std::unique_ptr<Target> make_mutant_target(const std::string& name) {
  for (const mutation::MutantDef& d : mutation::mutant_defs())
    if (name == d.name) return mutation::make_bug_target(d);
  return nullptr;
}

std::unique_ptr<Target> make_hf_fp32_target(DType out_dtype) {
  if (out_dtype == DType::f64) throw std::invalid_argument("hf-fp32: a float32 kernel has no f64 output");
  TargetInfo info;
  info.name = "hf-fp32" + mutation::dtype_suffix(out_dtype);
  info.description = std::string("scalar CPU kernel, Hugging Face Llama recipe in float32, output ") +
                     std::string(to_string(out_dtype));
  info.accuracy = AccuracyClass::fp32_angle;
  info.dtype = out_dtype;
  info.negative_positions = true;
  RopeFunction rope = [out_dtype](const EncodingSpec& spec, std::span<const Position> positions, int heads,
                                  std::span<const double> x, std::span<double> out) {
    if (!mutation::shapes_ok(spec, positions.size(), heads, x.size(), out.size())) return false;
    const kernels::RopeFrequenciesF32 freq = kernels::hf_rope_frequencies_f32(spec.rope);  // no run-time length (suite.hpp)
    const std::vector<float> xf = mutation::to_float(x);
    std::vector<float> of(xf.size());
    kernels::hf_fp32_rope_apply(spec.rope, freq, positions, heads, xf, of, out_dtype);
    mutation::to_double(of, out);
    return true;
  };
  SinusoidalFunction sinusoidal = [out_dtype](const EncodingSpec& spec, std::span<const std::int64_t> positions,
                                              std::span<double> out) {
    if (spec.family != Family::sinusoidal || out.size() != positions.size() * mutation::idx(spec.sinusoidal.d_model))
      return false;
    const std::vector<float> w = kernels::hf_sinusoidal_frequencies_f32(spec.sinusoidal);
    std::vector<float> of(out.size());
    kernels::hf_fp32_sinusoidal(spec.sinusoidal, w, positions, of, out_dtype);
    mutation::to_double(of, out);
    return true;
  };
  return make_function_target(std::move(info), std::move(rope), std::move(sinusoidal));
}

void register_builtin_targets() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
      const std::string name = "hf-fp32" + mutation::dtype_suffix(t);
      register_target(
          name, [t] { return make_hf_fp32_target(t); },
          "scalar CPU kernel, Hugging Face Llama recipe in float32, output " + std::string(to_string(t)) +
              " (class fp32-angle)");
    }
    for (const mutation::MutantDef& d : mutation::mutant_defs())
      register_target(
          std::string("mutant:") + d.name, [&d] { return mutation::make_bug_target(d); },
          std::string("deliberately broken hf-fp32 (self-test): ") + d.description);
  });
}

}  // namespace ropecheck::props
