// ScoreProblem (score_problem.hpp): the scores file read and checked against the manifest, and the exact
// rotated vectors with their class bounds per position.
#include "score_problem.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ropecheck/core/input_error.hpp"
#include "ropecheck/formulas/rope.hpp"

namespace ropecheck::checker::check_detail {

namespace score_problem {

std::vector<double> decoded(const io::Tensor& t) {
  std::vector<double> out(static_cast<std::size_t>(t.numel()));
  if (t.dtype == io::TensorDType::i64) {
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::int64_t v;
      std::memcpy(&v, t.data.data() + 8 * i, 8);
      out[i] = static_cast<double>(v);
    }
    return out;
  }
  const DType dt = t.dtype == io::TensorDType::f64 ? DType::f64 : DType::f32;
  decode(t.data.data(), dt, out);
  return out;
}

}  // namespace score_problem

using score_problem::decoded;

ScoreProblem::ScoreProblem(const golden::GoldenSet& g) {
  const nlohmann::json& m = g.manifest();
  if (!g.is_rope() || !m.contains("scores") || !m["scores"].is_object())
    throw InputError(g.dir().string() + ": the golden set has no scores (write it with golden --scores)");
  const nlohmann::json& s = m["scores"];
  if (!s.contains("scale_binary64") || !s["scale_binary64"].is_number())
    throw InputError(g.dir().string() + "/manifest.json: scores.scale_binary64 missing or not a number");
  scale = s["scale_binary64"].get<double>();
  if (s.contains("softcap") && s["softcap"].is_number()) cap = s["softcap"].get<double>();
  const io::Tensor& pos = g.tensor("score_positions");
  const io::Tensor& tq = g.tensor("score_q");
  const io::Tensor& tk = g.tensor("score_k");
  const io::Tensor& tt = g.tensor("scores.f64");
  if (pos.dtype != io::TensorDType::i64 || pos.shape.size() != 2 || pos.shape[1] != 2 || tq.shape.size() != 2 ||
      tk.shape.size() != 1 || tq.shape[1] != tk.shape[0] || tt.shape.size() != 2 || tt.shape[0] != tq.shape[0] ||
      tt.shape[1] != pos.shape[0])
    throw InputError(g.dir().string() + ": the scores file's tensors disagree in shape (score_positions [N][2], "
                     "score_q [G][D], score_k [D], scores.f64 [G][N])");
  G = tq.shape[0], N = pos.shape[0], D = tk.shape[0];
  const std::vector<double> pp = decoded(pos);
  std::int64_t hi = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    qpos.push_back(static_cast<std::int64_t>(pp[static_cast<std::size_t>(2 * i)]));
    kpos.push_back(static_cast<std::int64_t>(pp[static_cast<std::size_t>(2 * i + 1)]));
    hi = std::max({hi, std::abs(qpos.back()), std::abs(kpos.back())});
  }
  q = decoded(tq), k = decoded(tk), truth = decoded(tt);
  const RopeSpec& r = g.spec().rope;
  geo.emplace(r, rope_frequencies<double>(r, g.seq_len()).inv_freq, g.attention_factor());
  engine_ = std::make_shared<const RopeRoundingEngine>(r, g.seq_len(), hi);
}

const ScoreProblem::AtPosition& ScoreProblem::Cache::at(std::int64_t position) {
  if (auto it = map_.find(position); it != map_.end()) return it->second;
  const ScoreProblem& p = *p_;
  AtPosition a;
  const Position at = Position::uniform(position);  // text tokens (GOLDEN_FORMAT.md)
  const std::size_t gd = static_cast<std::size_t>(p.G * p.D), d = static_cast<std::size_t>(p.D);
  a.Q.resize(gd);
  a.K.resize(d);
  const DType f64 = DType::f64;
  RoundingStats stats;
  RoundedOut oq, ok;
  oq.rot = a.Q.data();
  ok.rot = a.K.data();
  p.engine_->evaluate(at, p.q, static_cast<int>(p.G), std::span<const DType>(&f64, 1), std::span<const RoundedOut>(&oq, 1), stats);
  p.engine_->evaluate(at, p.k, 1, std::span<const DType>(&f64, 1), std::span<const RoundedOut>(&ok, 1), stats);
  for (accuracy::AccuracyClass c : accuracy::kAccuracyClasses) {
    std::vector<double> eq;
    for (std::int64_t h = 0; h < p.G; ++h) {
      const std::vector<double> e =
          accuracy::rotated_errors(*p.geo, c, dt_, at, std::span<const double>(p.q).subspan(static_cast<std::size_t>(h) * d, d));
      eq.insert(eq.end(), e.begin(), e.end());
    }
    a.Eq.push_back(std::move(eq));
    a.Ek.push_back(accuracy::rotated_errors(*p.geo, c, dt_, at, p.k));
  }
  return map_.emplace(position, std::move(a)).first->second;
}

accuracy::ScoreBound ScoreProblem::bound(Cache& cache, accuracy::AccuracyClass c, DType dt, std::int64_t h,
                                         std::int64_t pair) const {
  const std::size_t ci = static_cast<std::size_t>(std::find(accuracy::kAccuracyClasses.begin(), accuracy::kAccuracyClasses.end(), c) -
                                                  accuracy::kAccuracyClasses.begin());
  const std::size_t d = static_cast<std::size_t>(D), off = static_cast<std::size_t>(h) * d;
  const AtPosition& a = cache.at(qpos[static_cast<std::size_t>(pair)]);
  const AtPosition& b = cache.at(kpos[static_cast<std::size_t>(pair)]);
  return accuracy::score_bound(c, dt, std::span<const double>(a.Q).subspan(off, d), std::span<const double>(a.Eq[ci]).subspan(off, d),
                               b.K, b.Ek[ci], scale, cap, truth[static_cast<std::size_t>(h * N + pair)]);
}

}  // namespace ropecheck::checker::check_detail
