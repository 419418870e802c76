// A candidate's attention scores made the way ropecheck's own recipes would make them, for tests of the
// score check and its diagnosis: the recipe's rotation (kernels/rope_kernels.hpp) of a golden set's
// score_q heads at each pair's query position and score_k at its key position, then the score arithmetic
// its class stands for (accuracy/ERROR_MODEL.md 16.2, as tests/attention/test_recipes.cpp writes it out):
// the dot product left to right in Acc, held in `mid`, times the scale held in `mid`, stored in dt.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "float_recipes.hpp"
#include "recipe_classes.hpp"
#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"

namespace ropecheck::testing_support {

using ScoreRecipe = RecipeClass;
inline const std::vector<ScoreRecipe>& score_recipes() { return recipe_classes(); }

// The set's scores file: positions per pair, score_q [G][D], score_k [D].
struct ScoreInputs {
  std::int64_t G = 0, N = 0, D = 0;
  std::vector<std::int64_t> qpos, kpos;
  std::vector<double> q, k;
  double scale = 1;
};
inline ScoreInputs score_inputs(const golden::GoldenSet& g) {
  ScoreInputs s;
  const io::Tensor& pos = g.tensor("score_positions");
  const io::Tensor& q = g.tensor("score_q");
  const io::Tensor& k = g.tensor("score_k");
  s.G = q.shape[0], s.D = q.shape[1], s.N = pos.shape[0];
  for (std::int64_t i = 0; i < s.N; ++i) {
    std::int64_t v[2];
    std::memcpy(v, pos.data.data() + 16 * i, 16);
    s.qpos.push_back(v[0]);
    s.kpos.push_back(v[1]);
  }
  s.q.resize(static_cast<std::size_t>(s.G * s.D));
  s.k.resize(static_cast<std::size_t>(s.D));
  decode(q.data.data(), DType::f32, s.q);
  decode(k.data.data(), DType::f32, s.k);
  s.scale = g.manifest()["scores"]["scale_binary64"].get<double>();
  return s;
}

// `x` ([heads][D], the same at every token) rotated by the recipe at `positions` in dt, decoded.
inline std::vector<double> recipe_rotated(const RopeSpec& spec, std::optional<std::int64_t> seq_len, const ScoreRecipe& rc,
                                          std::span<const double> x, std::int64_t heads, std::vector<std::int64_t> positions) {
  const kernels::RopePlan plan = kernels::make_rope_plan(spec, rc.recipe, seq_len);
  const std::size_t bytes = static_cast<std::size_t>(format_info(rc.dt).storage_bits / 8), row = x.size();
  const auto T = static_cast<std::int64_t>(positions.size()), D = static_cast<std::int64_t>(row) / heads;
  std::vector<unsigned char> in(positions.size() * row * bytes), out(in.size());
  for (std::size_t t = 0; t < positions.size(); ++t)
    for (std::size_t i = 0; i < row; ++i) {
      const std::uint64_t b = double_to_bits(x[i], rc.dt);
      std::memcpy(in.data() + (t * row + i) * bytes, &b, bytes);  // little-endian: the low bytes
    }
  kernels::rope_apply(plan, kernels::PositionsView::of(std::span<const std::int64_t>(positions)),
                      kernels::TensorView::contiguous(in.data(), rc.dt, T, heads, D),
                      kernels::TensorView::contiguous(out.data(), rc.dt, T, heads, D), {}, {}, {.threads = 1});
  std::vector<double> y(positions.size() * row);
  decode(out.data(), rc.dt, y);
  return y;
}

// Scores [G][N] from rotated queries Qh [N][G][D] and keys Kh [N][D], in the class's arithmetic.
template <class Acc>
std::vector<double> score_arithmetic(const ScoreInputs& s, const ScoreRecipe& rc, const std::vector<double>& Qh,
                                     const std::vector<double>& Kh) {
  auto mid = [&](Acc x) { return static_cast<Acc>(recipes::round_double_to(static_cast<double>(x), rc.mid)); };
  const Acc scale = mid(static_cast<Acc>(s.scale));
  std::vector<double> out(static_cast<std::size_t>(s.G * s.N));
  for (std::int64_t h = 0; h < s.G; ++h)
    for (std::int64_t p = 0; p < s.N; ++p) {
      Acc d = 0;
      for (std::int64_t c = 0; c < s.D; ++c)
        d += static_cast<Acc>(Qh[static_cast<std::size_t>((p * s.G + h) * s.D + c)]) * static_cast<Acc>(Kh[static_cast<std::size_t>(p * s.D + c)]);
      out[static_cast<std::size_t>(h * s.N + p)] = recipes::round_double_to(static_cast<double>(mid(mid(d) * scale)), rc.dt);
    }
  return out;
}

// The recipe's scores of the set's pairs with `spec` at positions qp / kp (a mistake injected): a tensor
// "scores" in dt.
inline io::Tensor recipe_scores_at(const golden::GoldenSet& g, const ScoreRecipe& rc, const RopeSpec& spec,
                                   const std::vector<std::int64_t>& qp, const std::vector<std::int64_t>& kp) {
  const ScoreInputs s = score_inputs(g);
  const std::vector<double> Qh = recipe_rotated(spec, g.seq_len(), rc, s.q, s.G, qp);
  const std::vector<double> Kh = recipe_rotated(spec, g.seq_len(), rc, s.k, 1, kp);
  const std::vector<double> v = rc.f64_acc ? score_arithmetic<double>(s, rc, Qh, Kh) : score_arithmetic<float>(s, rc, Qh, Kh);
  const std::size_t bytes = static_cast<std::size_t>(format_info(rc.dt).storage_bits / 8);
  io::Tensor t{"scores", rc.dt == DType::f32 ? io::TensorDType::f32 : (rc.dt == DType::bf16 ? io::TensorDType::bf16 : io::TensorDType::f16),
               {s.G, s.N}, std::vector<std::uint8_t>(v.size() * bytes)};
  for (std::size_t i = 0; i < v.size(); ++i) store_element(t.data.data() + i * bytes, v[i], rc.dt);
  return t;
}

// The recipe's scores of the set's pairs, the query positions moved by q_shift.
inline io::Tensor recipe_scores(const golden::GoldenSet& g, const ScoreRecipe& rc, std::int64_t q_shift = 0) {
  const ScoreInputs s = score_inputs(g);
  std::vector<std::int64_t> qp = s.qpos;
  for (std::int64_t& p : qp) p += q_shift;
  return recipe_scores_at(g, rc, g.spec().rope, qp, s.kpos);
}

}  // namespace ropecheck::testing_support
