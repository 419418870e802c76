#include "ropecheck/golden/plugin_target.hpp"

#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "ropecheck/golden/plugin.hpp"
#include "ropecheck/golden/plugin_client.hpp"
#include "ropecheck/golden/tensor.hpp"
#include "ropecheck/kernel_abi.h"
#include "ropecheck/reference/rope_reference.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/reference/sinusoidal_reference.hpp"
#include "ropecheck/core/spec_json.hpp"

namespace ropecheck::golden {
using namespace ropecheck::accuracy;  // the error model is this module's vocabulary
namespace {




// Kernel failures (plugin_client.hpp) do not throw: the call's outputs read as NaN, which fails the
// property, and take_failures() tells the suite what happened so it reports it.
class PluginTarget final : public props::Target {
 public:
  PluginTarget(KernelPlugin plugin, accuracy::AccuracyClass accuracy, DType dtype, const PluginClientOptions& options)
      : plugin_(std::move(plugin)), options_(options) {
    info_.name = "plugin:" + plugin_.name();
    info_.description = "kernel plugin " + plugin_.path().string();
    info_.accuracy = accuracy;
    info_.dtype = dtype;
    info_.negative_positions = plugin_.negative_positions();  // ropecheck_kernel_capabilities
  }

  const props::TargetInfo& info() const override { return info_; }

  props::Target::Failures take_failures() override {
    props::Target::Failures f{plugin_.failed_calls() - reported_, plugin_.calls() - calls_reported_, first_};
    reported_ = plugin_.failed_calls();
    calls_reported_ = plugin_.calls();
    first_.clear();
    plugin_.forgive();  // the next property gets calls again after a crash streak (not after a timeout)
    return f;
  }

  bool rope_apply(const EncodingSpec& spec, std::span<const Position> positions, int heads, std::span<const double> x,
                  std::span<double> out) override {
    return rope_apply_input("q", spec, positions, heads, x, out);
  }

  // Every ABI output dtype: the kernel answers UNSUPPORTED for those it does not implement (or does not
  // declare, ropecheck_kernel_capabilities). Same library, same isolation options.
  std::unique_ptr<props::Target> with_output(DType dtype) override {
    return make_plugin_target(plugin_.path(), info_.accuracy, dtype, options_);
  }

  bool rope_apply_input(std::string_view input, const EncodingSpec& spec, std::span<const Position> positions,
                        int heads, std::span<const double> x, std::span<double> out) override {
    if (!plugin_.has_rope_apply() || spec.family != Family::rope || !plugin_.declares_dtype(abi_dtype(info_.dtype)))
      return false;
    const RopeSpec& r = spec.rope;
    const std::string json = spec_to_json(spec).dump();
    const Frequencies& f = frequencies(r, json);
    // seq_len 0: the suite resolves frequencies without a run-time length (dynamic at
    // max_position_embeddings, longrope short factors), and tells the kernel the same.
    RopeInputs in;
    in.rope = abi_rope_params(r, 0);
    in.rope.attention_factor = f.att;
    in.inv_freq = f.inv;
    in.longrope_ext = f.ext;
    in.spec_json = json;
    const auto T = static_cast<std::int64_t>(positions.size());
    const std::int32_t streams = r.mrope == MropeMode::none ? 1 : 3;
    std::vector<std::int64_t> pos(static_cast<std::size_t>(streams * T));
    for (std::int64_t t = 0; t < T; ++t) {
      const Position& q = positions[static_cast<std::size_t>(t)];
      pos[static_cast<std::size_t>(t)] = q.t;
      if (streams == 3) pos[static_cast<std::size_t>(T + t)] = q.h, pos[static_cast<std::size_t>(2 * T + t)] = q.w;
    }
    in.tokens = T;
    in.position_streams = streams;
    in.positions = pos;
    const std::vector<float> xf(x.begin(), x.end());
    const std::size_t esize = static_cast<std::size_t>(format_info(info_.dtype).storage_bits / 8);
    const std::string what = "spec " + (spec.name.empty() ? std::string("(generated)") : spec.name) + ", " +
                             std::to_string(T) + " tokens x " + std::to_string(heads) + " heads, " +
                             std::string(to_string(info_.dtype)) + " output, first position " +
                             (T > 0 ? std::to_string(positions[0].t) : std::string("-"));
    const std::string input_name(input);  // "q" or "k": the kernel may have separate paths
    const KernelCall c = plugin_.rope_apply(in, input_name.c_str(), heads, xf, abi_dtype(info_.dtype), xf.size() * esize, what);
    return finish(c, out, esize);
  }

  bool sinusoidal(const EncodingSpec& spec, std::span<const std::int64_t> positions, std::span<double> out) override {
    if (!plugin_.has_sinusoidal() || spec.family != Family::sinusoidal || !plugin_.declares_dtype(abi_dtype(info_.dtype)))
      return false;
    const SinusoidalSpec& s = spec.sinusoidal;
    ropecheck_sinusoidal_params p{};
    p.d_model = s.d_model;
    p.layout = s.layout == SinusoidalLayout::concatenated ? ROPECHECK_SINUSOIDAL_CONCATENATED : ROPECHECK_SINUSOIDAL_INTERLEAVED;
    p.frequencies = s.frequencies == SinusoidalFrequencies::half_dim_minus_one ? ROPECHECK_SINUSOIDAL_HALF_DIM_MINUS_ONE
                                                                               : ROPECHECK_SINUSOIDAL_VASWANI;
    p.frequency_count = sinusoidal_frequency_count(s);
    p.base = s.base;
    p.position_offset = s.position_offset;
    const std::string json = spec_to_json(spec).dump();
    const std::size_t esize = static_cast<std::size_t>(format_info(info_.dtype).storage_bits / 8);
    const std::string what = "spec " + (spec.name.empty() ? std::string("(generated)") : spec.name) + ", " +
                             std::to_string(positions.size()) + " tokens, " + std::string(to_string(info_.dtype)) + " output";
    const KernelCall c = plugin_.sinusoidal(json, p, positions, abi_dtype(info_.dtype), out.size() * esize, what);
    return finish(c, out, esize);
  }

 private:
  // The spec's frequencies (MPFR, rounded once to binary64): the costliest part of a call, and a
  // property case asks for the same spec many times, under every output dtype (one target each).
  // Keyed by the spec's JSON; shared by the targets of a thread.
  struct Frequencies {
    std::vector<double> inv, ext;
    double att = 1;
  };
  static const Frequencies& frequencies(const RopeSpec& r, const std::string& json) {
    thread_local std::unordered_map<std::string, Frequencies> frequencies_;
    if (const auto it = frequencies_.find(json); it != frequencies_.end()) return it->second;
    if (frequencies_.size() > 512) frequencies_.clear();
    Frequencies out;
    ScopedPrecision prec(kMinWorkingBits);
    const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
    for (const Real& w : f.inv_freq) out.inv.push_back(to_f64(w));
    out.att = to_f64(f.attention_factor);
    if (r.scaling.type == ScalingType::longrope) out.ext = f.long_factors ? r.scaling.long_factor : r.scaling.short_factor;
    return frequencies_.emplace(json, std::move(out)).first->second;
  }

  bool finish(const KernelCall& c, std::span<double> out, std::size_t esize) {
    if (c.status == KernelCall::Status::unsupported) return false;
    if (c.status == KernelCall::Status::failed && first_.empty()) first_ = c.message;
    const std::span<const std::uint8_t> buf = plugin_.output(0);  // NaN after a failed call
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = load_element(buf.data() + i * esize, info_.dtype);
    return true;
  }

  KernelPlugin plugin_;
  PluginClientOptions options_;
  props::TargetInfo info_;
  std::int64_t reported_ = 0, calls_reported_ = 0;
  std::string first_;
};

}  // namespace

std::unique_ptr<props::Target> make_plugin_target(const std::filesystem::path& library, accuracy::AccuracyClass accuracy,
                                                  DType dtype, const PluginClientOptions& options) {
  return std::make_unique<PluginTarget>(load_kernel_plugin(library, options), accuracy, dtype, options);
}

}  // namespace ropecheck::golden
