// A small RoPE problem for tests of kernels under test (kut/kernel_under_test.hpp): inputs exact in bf16,
// positions spread over the range where f32 angles lose bits, and one rope_apply call on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ropecheck/kut/kernel_under_test.hpp"
#include "ropecheck/reference/presets.hpp"

namespace ropecheck::test {

// Inputs exact in bf16, positions spread over the range where f32 angles lose bits.
struct Problem {
  EncodingSpec spec = load_preset("llama-3.1-8b");
  std::vector<Position> pos;
  std::vector<std::int64_t> flat;
  int heads = 2;
  std::vector<float> x;
  Problem() {
    for (std::int64_t p : {0, 1, 7, 4095, 65537, 131071}) pos.push_back(Position::uniform(p)), flat.push_back(p);
    x.resize(pos.size() * static_cast<std::size_t>(heads * spec.rope.head_dim));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 17) - 8) / 8.0f;
  }
};

inline std::vector<std::byte> rope_apply(kut::KernelUnderTest& kt, const Problem& p, DType out, kut::CallResult* result) {
  std::vector<std::byte> o(p.x.size() * static_cast<std::size_t>(format_info(out).storage_bits / 8));
  kut::RopeApplyCall c;
  c.problem = {&p.spec, std::nullopt, p.pos, "test"};
  c.input = "k";
  c.heads = p.heads;
  c.x = {DType::f32, std::as_bytes(std::span(p.x))};
  c.out = {out, o};
  *result = kt.rope_apply(c);
  return o;
}

}  // namespace ropecheck::test
