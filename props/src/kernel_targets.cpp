// The fast CPU kernels as property-suite targets (kernel_targets.hpp): an adaptor from the Target
// interface (doubles, [tokens][heads][head_dim], Position per token) to kernels::rope_apply and
// kernels::sinusoidal_table.
#include "ropecheck/props/kernel_targets.hpp"

#include <bit>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/props/registry.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::props {
using namespace ropecheck::accuracy;  // the error model is this module's vocabulary
namespace {

namespace k = ropecheck::kernels;

std::string storage_suffix(DType t) {
  switch (t) {
    case DType::f16: return "-f16out";
    case DType::bf16: return "-bf16out";
    case DType::f64: return "-f64out";
    default: return "";
  }
}

std::size_t element_size(DType t) { return t == DType::f64 ? 8 : (t == DType::f32 ? 4 : 2); }


class KernelTarget final : public Target {
 public:
  KernelTarget(k::Recipe recipe, DType storage, bool portable) : recipe_(recipe), storage_(storage) {
    info_.name = "kernel:" + std::string(k::to_string(recipe)) + storage_suffix(storage);
    info_.description = "fast CPU kernel (" + std::string(portable ? "portable path" : "default path") + "), recipe " +
                        std::string(k::to_string(recipe)) + ", output " + std::string(to_string(storage)) + " (class " +
                        std::string(to_string(kernel_claimed_class(recipe, storage))) + ")" +
                        (k::recipe_info(recipe).known_bad ? ", KNOWN BAD" : "");
    info_.accuracy = kernel_claimed_class(recipe, storage);
    info_.dtype = storage;
    info_.negative_positions = true;
    opts_.threads = 1;
    opts_.portable = portable;
  }
  const TargetInfo& info() const override { return info_; }

  bool rope_apply(const EncodingSpec& spec, std::span<const Position> positions, int heads, std::span<const double> x,
                  std::span<double> out) override {
    if (spec.family != Family::rope || heads < 0) return false;
    const std::int64_t T = static_cast<std::int64_t>(positions.size()), H = heads, D = spec.rope.head_dim;
    const std::size_t n = static_cast<std::size_t>(T * H * D);
    if (x.size() != n || out.size() != n) return false;
    k::RopePlan plan;
    try {
      plan = k::make_rope_plan(spec.rope, recipe_);  // no run-time length, as the suite resolves (suite.hpp)
    } catch (const SpecError&) {
      return false;
    }
    // x is bf16-exact (target.hpp): exact in f32.
    std::vector<float> xf(x.begin(), x.end());
    std::vector<unsigned char> ob(n * element_size(storage_));
    std::vector<std::int64_t> thw(static_cast<std::size_t>(3 * T));
    bool three = spec.rope.mrope != MropeMode::none;
    for (std::int64_t t = 0; t < T; ++t) {
      const Position& p = positions[static_cast<std::size_t>(t)];
      thw[static_cast<std::size_t>(t)] = p.t;
      thw[static_cast<std::size_t>(T + t)] = p.h;
      thw[static_cast<std::size_t>(2 * T + t)] = p.w;
      three = three || p.h != p.t || p.w != p.t;
    }
    const k::PositionsView pv = three ? k::PositionsView::three_streams(thw, T)
                                      : k::PositionsView::of(std::span<const std::int64_t>(thw.data(), static_cast<std::size_t>(T)));
    k::rope_apply(plan, pv, k::TensorView::contiguous(xf.data(), DType::f32, T, H, D),
                  k::TensorView::contiguous(ob.data(), storage_, T, H, D), {}, {}, opts_);
    for (std::size_t i = 0; i < n; ++i) out[i] = load_element(ob.data() + i * element_size(storage_), storage_);
    return true;
  }

  bool sinusoidal(const EncodingSpec& spec, std::span<const std::int64_t> positions, std::span<double> out) override {
    if (spec.family != Family::sinusoidal) return false;
    const std::size_t n = positions.size() * static_cast<std::size_t>(spec.sinusoidal.d_model);
    if (out.size() != n) return false;
    std::vector<unsigned char> ob(n * element_size(storage_));
    k::sinusoidal_table(spec.sinusoidal, recipe_, positions, ob.data(), storage_, opts_);
    for (std::size_t i = 0; i < n; ++i) out[i] = load_element(ob.data() + i * element_size(storage_), storage_);
    return true;
  }

 private:
  k::Recipe recipe_;
  DType storage_;
  TargetInfo info_;
  k::KernelOptions opts_;
};

}  // namespace

AccuracyClass kernel_claimed_class(k::Recipe recipe, DType storage) {
  switch (recipe) {
    case k::Recipe::accurate: return storage == DType::f32 ? AccuracyClass::f32_reduced : AccuracyClass::fp64_angle;
    case k::Recipe::meta:
    case k::Recipe::ggml: return AccuracyClass::fp32_angle;
    case k::Recipe::bf16_table: return AccuracyClass::bf16_table;
    case k::Recipe::f16_table: return AccuracyClass::f16_table;
    default:  // hf and the known-bad recipes built on it: hf rounds its tables and rotation to the storage dtype
      return storage == DType::bf16 ? AccuracyClass::bf16_table
                                    : (storage == DType::f16 ? AccuracyClass::f16_table : AccuracyClass::fp32_angle);
  }
}

std::unique_ptr<Target> make_kernel_target(k::Recipe recipe, DType storage, bool portable) {
  return std::make_unique<KernelTarget>(recipe, storage, portable);
}

void register_kernel_targets() {
  for (const k::RecipeInfo& r : k::recipes())
    for (DType t : {DType::f32, DType::bf16}) {
      const k::Recipe rec = r.recipe;
      register_target(
          "kernel:" + std::string(r.name) + storage_suffix(t), [rec, t] { return make_kernel_target(rec, t); },
          "fast CPU kernel, recipe " + std::string(r.name) + ", output " + std::string(to_string(t)) + " (class " +
              std::string(to_string(kernel_claimed_class(rec, t))) + ")" + (r.known_bad ? ", known bad" : "") + ": " +
              std::string(r.description));
    }
}

}  // namespace ropecheck::props
