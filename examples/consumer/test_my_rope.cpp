// Runs ropecheck's property suite against my_rope from this project's own GoogleTest binary.
#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>
#include <ropecheck/props/gtest.hpp>

#include "my_rope.hpp"

namespace rp = ropecheck::props;

namespace {

// The adapter ropecheck calls: its layout is x[tokens][heads][head_dim] in double (values that
// are exact in float); return false for a spec my_rope does not implement (a property that no case
// could run is then NOT TESTED: a failure, unless named in allow_not_tested below).
bool my_rope_target(const ropecheck::EncodingSpec& spec, std::span<const ropecheck::Position> positions, int heads,
                    std::span<const double> x, std::span<double> out) {
  const auto& r = spec.rope;
  const auto scaling = r.scaling.type;
  if (spec.family != ropecheck::Family::rope || r.mrope != ropecheck::MropeMode::none ||
      (scaling != ropecheck::ScalingType::none && scaling != ropecheck::ScalingType::linear))
    return false;
  const std::size_t n = positions.size() * static_cast<std::size_t>(heads) * static_cast<std::size_t>(r.head_dim);
  if (x.size() != n || out.size() != n)
    throw std::invalid_argument("my_rope_target: x / out size is not tokens * heads * head_dim");
  const MyRopeConfig cfg{.head_dim = r.head_dim,
                         .rotary_dim = r.rotary_dim,
                         .base = static_cast<float>(r.base),
                         .linear_factor = scaling == ropecheck::ScalingType::linear
                                              ? static_cast<float>(ropecheck::effective_factor(r))
                                              : 1.0f,
                         .interleaved = r.layout == ropecheck::RopeLayout::interleaved};
  std::vector<float> buf(x.begin(), x.end());
  std::vector<std::int64_t> pos;
  for (const auto& p : positions) pos.push_back(p.t);
  my_rope(cfg, buf.data(), pos.data(), pos.size(), static_cast<std::size_t>(heads));
  std::copy(buf.begin(), buf.end(), out.begin());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  // A property my_rope could not run is NOT TESTED and fails its test unless named here: my_rope has
  // no sinusoidal tables, multimodal streams or YaRN, so the properties about those cannot run
  // (attention_factor derives a YaRN spec when the preset's own factor is 1).
  // fp32-angle stops discriminating near position 1.16e6 (the bound reaches the pair's magnitude),
  // so positions are generated below that; a stricter class would test further.
  const rp::SuiteOptions options{.max_position = 1 << 19,
                                 .allow_not_tested = {"sinusoidal_shift", "sinusoidal_dot", "mrope_equal_streams",
                                                      "mrope_streams", "yarn_frequencies", "attention_factor"}};
  rp::register_property_tests("MyRope", [] {
    return rp::make_function_target({.name = "my-rope", .description = "RoPE in float",
                                     .accuracy = ropecheck::accuracy::AccuracyClass::fp32_angle, .dtype = ropecheck::DType::f32,
                                     .negative_positions = true},
                                    my_rope_target);
  }, options);
  return RUN_ALL_TESTS();
}
