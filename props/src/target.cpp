// make_function_target, make_reference_target and the target registry.
#include "ropecheck/props/target.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>

#include "ropecheck/props/registry.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"

namespace ropecheck::props {
using namespace ropecheck::accuracy;  // the error model is this module's vocabulary
namespace {

class FunctionTarget final : public Target {
 public:
  FunctionTarget(TargetInfo info, NamedRopeFunction rope, SinusoidalFunction sinusoidal)
      : info_(std::move(info)), rope_(std::move(rope)), sinusoidal_(std::move(sinusoidal)) {}
  const TargetInfo& info() const override { return info_; }
  bool rope_apply(const EncodingSpec& spec, std::span<const Position> positions, int heads,
                  std::span<const double> x, std::span<double> out) override {
    return rope_apply_input("q", spec, positions, heads, x, out);
  }
  bool rope_apply_input(std::string_view input, const EncodingSpec& spec, std::span<const Position> positions,
                        int heads, std::span<const double> x, std::span<double> out) override {
    return rope_ ? rope_(input, spec, positions, heads, x, out) : false;
  }
  bool sinusoidal(const EncodingSpec& spec, std::span<const std::int64_t> positions, std::span<double> out) override {
    return sinusoidal_ ? sinusoidal_(spec, positions, out) : false;
  }

 private:
  TargetInfo info_;
  NamedRopeFunction rope_;
  SinusoidalFunction sinusoidal_;
};

// The exact reference: MPFR at working_precision_bits(53, largest angle of the call), at least
// `bits`, every value rounded once to binary64.
class ReferenceTarget final : public Target {
 public:
  explicit ReferenceTarget(unsigned bits) : bits_(bits) {
    info_.name = bits == 128 ? "reference" : "reference:" + std::to_string(bits);
    info_.description = "exact MPFR reference (" + std::to_string(bits) + " bits minimum), rounded once to binary64";
    info_.accuracy = AccuracyClass::exact;
    info_.dtype = DType::f64;
    info_.negative_positions = true;
  }
  const TargetInfo& info() const override { return info_; }

  bool rope_apply(const EncodingSpec& spec, std::span<const Position> positions, int heads,
                  std::span<const double> x, std::span<double> out) override {
    if (spec.family != Family::rope) return false;
    const RopeSpec& r = spec.rope;
    const auto D = static_cast<std::size_t>(r.head_dim);
    const auto H = static_cast<std::size_t>(heads);
    if (x.size() != positions.size() * H * D || out.size() != x.size()) return false;
    std::int64_t max_abs = 0;
    for (const Position& p : positions)
      for (std::int64_t v : {p.t, p.h, p.w}) max_abs = std::max(max_abs, v < 0 ? -v : v);
    ScopedPrecision prec(std::max(bits_, working_precision_bits(53, rope_max_abs_angle(r, std::nullopt, max_abs))));
    const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
    std::vector<Real> in(D);
    for (std::size_t t = 0; t < positions.size(); ++t)
      for (std::size_t h = 0; h < H; ++h) {
        const std::size_t off = (t * H + h) * D;
        for (std::size_t c = 0; c < D; ++c) in[c] = Real(x[off + c]);
        const std::vector<Real> y = ropecheck::rope_apply<Real>(r, f, positions[t], in);
        for (std::size_t c = 0; c < D; ++c) out[off + c] = to_f64(y[c]);
      }
    return true;
  }

  bool sinusoidal(const EncodingSpec& spec, std::span<const std::int64_t> positions, std::span<double> out) override {
    if (spec.family != Family::sinusoidal) return false;
    const SinusoidalSpec& s = spec.sinusoidal;
    const auto d = static_cast<std::size_t>(s.d_model);
    if (out.size() != positions.size() * d) return false;
    std::int64_t max_abs = 0;
    for (std::int64_t v : positions) max_abs = std::max(max_abs, v < 0 ? -v : v);
    ScopedPrecision prec(std::max(bits_, working_precision_bits(53, sinusoidal_max_abs_angle(s, max_abs))));
    const std::vector<Real> w = sinusoidal_frequencies<Real>(s);
    for (std::size_t t = 0; t < positions.size(); ++t) {
      const std::vector<Real> row = sinusoidal_row<Real>(s, w, positions[t]);
      for (std::size_t c = 0; c < d; ++c) out[t * d + c] = to_f64(row[c]);
    }
    return true;
  }

 private:
  unsigned bits_;
  TargetInfo info_;
};

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::pair<TargetFactory, std::string>> entries;
};
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::unique_ptr<Target> make_function_target(TargetInfo info, RopeFunction rope, SinusoidalFunction sinusoidal) {
  NamedRopeFunction named;
  if (rope)
    named = [rope = std::move(rope)](std::string_view, const EncodingSpec& spec, std::span<const Position> positions,
                                     int heads, std::span<const double> x, std::span<double> out) {
      return rope(spec, positions, heads, x, out);
    };
  return std::make_unique<FunctionTarget>(std::move(info), std::move(named), std::move(sinusoidal));
}

std::unique_ptr<Target> make_named_function_target(TargetInfo info, NamedRopeFunction rope, SinusoidalFunction sinusoidal) {
  return std::make_unique<FunctionTarget>(std::move(info), std::move(rope), std::move(sinusoidal));
}

std::unique_ptr<Target> make_reference_target(unsigned bits) { return std::make_unique<ReferenceTarget>(bits); }

bool register_target(const std::string& name, TargetFactory factory, std::string description) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.entries[name] = {std::move(factory), std::move(description)};
  return true;
}

std::unique_ptr<Target> make_target(const std::string& name) {
  if (name == "reference") return make_reference_target(128);
  if (name.rfind("reference:", 0) == 0) {
    const std::string digits = name.substr(10);
    if (digits.empty() || digits.size() > 4 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return nullptr;
    const int bits = std::stoi(digits);
    if (bits < 64 || bits > 4096) return nullptr;
    return make_reference_target(static_cast<unsigned>(bits));
  }
  Registry& r = registry();
  TargetFactory factory;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    const auto it = r.entries.find(name);
    if (it == r.entries.end()) return nullptr;
    factory = it->second.first;
  }
  return factory ? factory() : nullptr;
}

std::vector<std::pair<std::string, std::string>> target_descriptions() {
  std::vector<std::pair<std::string, std::string>> out = {
      {"reference", "exact MPFR reference (128 bits minimum), rounded once to binary64; class exact"},
      {"reference:BITS", "the same at BITS (64..4096) bits minimum"}};
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& [name, e] : r.entries) out.emplace_back(name, e.second);
  return out;
}

std::vector<std::string> target_names() {
  std::vector<std::string> out;
  for (const auto& [n, d] : target_descriptions()) out.push_back(n);
  return out;
}

}  // namespace ropecheck::props
