// The own recipe's binary32 Q/K RMSNorm (kernels/qk_norm.hpp) against the exact normalized-then-rotated
// reference (RopeRoundingEngine::evaluate_normed): the correct norm stays within its error term
// (accuracy::qk_norm_relative_term, ERROR_MODEL.md section 17) on Qwen3 and Gemma 3 specs, and each
// injected mistake (eps omitted, weight omitted, w / 1 + w confused, the whole row, the wrong width,
// the norm after the rotation) exceeds it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/formulas/qk_norm.hpp"
#include "ropecheck/golden/input_generator.hpp"
#include "ropecheck/kernels/qk_norm.hpp"
#include "ropecheck/reference/fast_rounding.hpp"
#include "ropecheck/reference/presets.hpp"

namespace {

using ropecheck::kernels::NormMistake;

ropecheck::EncodingSpec gemma3_with_norm() {
  ropecheck::EncodingSpec s = ropecheck::load_preset("gemma-3-4b-global");
  ropecheck::RmsNormStage n;
  n.weight_form = ropecheck::NormWeightForm::one_plus_w;
  s.rope.q_norm = s.rope.k_norm = n;
  return s;
}

// Worst |candidate - truth| / (term * M) over q of `heads` heads at a few positions; the candidate is the
// exact rotation of the recipe's normalized input (or, for norm_after, the norm of the exact rotation).
double worst_ratio(ropecheck::EncodingSpec spec, NormMistake mistake, bool norm_after = false, float in_scale = 1) {
  ropecheck::golden::fill_norm_weights(spec, 7);
  const ropecheck::RopeSpec& r = spec.rope;
  const int H = 4, D = r.head_dim;
  const ropecheck::RopeRoundingEngine engine(r, std::nullopt, 5000);
  const double term = ropecheck::accuracy::qk_norm_relative_term(D);
  const std::vector<ropecheck::DType> f64{ropecheck::DType::f64};
  std::vector<const ropecheck::RmsNormStage*> norms(H, &*r.q_norm);
  double worst = 0;
  for (std::int64_t p : {0, 1, 17, 4999}) {
    std::vector<float> x = ropecheck::golden::generate_inputs(7, ropecheck::golden::InputStream::q,
                                                               static_cast<std::uint64_t>(H * D), static_cast<std::uint64_t>(p * H * D));
    for (float& v : x) v *= in_scale;  // a power of two: exact
    const std::vector<double> xd(x.begin(), x.end());
    std::vector<double> truth(xd.size()), cand(xd.size());
    ropecheck::RoundingStats st;
    const ropecheck::Position pos = ropecheck::Position::uniform(p);
    engine.evaluate_normed(pos, xd, H, norms, f64, std::vector<ropecheck::RoundedOut>{{nullptr, nullptr, truth.data()}}, st);
    if (norm_after) {
      std::vector<double> rotated(xd.size());
      engine.evaluate(pos, xd, H, f64, std::vector<ropecheck::RoundedOut>{{nullptr, nullptr, rotated.data()}}, st);
      const std::vector<float> rf(rotated.begin(), rotated.end());
      std::vector<float> y(rf.size());
      ropecheck::kernels::rms_norm_f32(*r.q_norm, rf, H, D, y);
      cand.assign(y.begin(), y.end());
    } else {
      std::vector<float> y(x.size());
      ropecheck::kernels::rms_norm_f32(*r.q_norm, x, H, D, y, mistake);
      const std::vector<double> yd(y.begin(), y.end());
      engine.evaluate(pos, yd, H, f64, std::vector<ropecheck::RoundedOut>{{nullptr, nullptr, cand.data()}}, st);
    }
    for (int h = 0; h < H; ++h) {
      std::vector<double> exact(static_cast<std::size_t>(D));
      ropecheck::rms_norm_head<double>(std::span(xd).subspan(static_cast<std::size_t>(h * D), static_cast<std::size_t>(D)),
                                       *r.q_norm, std::span(exact));
      for (int j = 0; j < D / 2; ++j) {
        const auto [a, b] = ropecheck::pair_channels(r, j);
        const double M = engine.attention_factor() * (std::fabs(exact[static_cast<std::size_t>(a)]) + std::fabs(exact[static_cast<std::size_t>(b)]));
        for (int ch : {a, b}) {
          const std::size_t i = static_cast<std::size_t>(h * D + ch);
          worst = std::max(worst, std::fabs(cand[i] - truth[i]) / (term * M + 0x1p-50 * M + 1e-300));
        }
      }
    }
  }
  return worst;
}

TEST(QkNormRecipe, CorrectNormStaysWithinItsTerm) {
  for (const ropecheck::EncodingSpec& s : {ropecheck::load_preset("qwen3-8b"), gemma3_with_norm()}) {
    const double w = worst_ratio(s, NormMistake::none);
    EXPECT_LE(w, 1.0) << s.name;
    EXPECT_GT(w, 0.0) << s.name;  // the binary32 norm does round: the test measures something
  }
}

TEST(QkNormRecipe, InjectedMistakesExceedTheTerm) {
  for (const ropecheck::EncodingSpec& s : {ropecheck::load_preset("qwen3-8b"), gemma3_with_norm()}) {
    // eps (1e-6) moves a unit-scale head by about 4e-7 relative, below the term: only heads whose mean
    // square is near eps show its omission (the golden generator's inputs are unit-scale).
    EXPECT_LT(worst_ratio(s, NormMistake::eps_omitted), 1.0) << s.name;
    EXPECT_LE(worst_ratio(s, NormMistake::none, false, 0x1p-10f), 1.0) << s.name;
    EXPECT_GT(worst_ratio(s, NormMistake::eps_omitted, false, 0x1p-10f), 1.0) << s.name;
    for (NormMistake m : {NormMistake::weight_omitted, NormMistake::weight_form_swapped,
                          NormMistake::whole_row, NormMistake::mean_over_pairs})
      EXPECT_GT(worst_ratio(s, m), 1.0) << s.name << " mistake " << static_cast<int>(m);
    EXPECT_GT(worst_ratio(s, NormMistake::none, /*norm_after=*/true), 1.0) << s.name << " norm after the rotation";
  }
}

}  // namespace
