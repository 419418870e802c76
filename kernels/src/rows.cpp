// The per-token rows (rows.hpp): each recipe's angle, cos / sin and the prepared rotation rows.
#include "rows.hpp"

#include <cmath>

#include "ropecheck/kernels/scalar_recipes.hpp"

namespace ropecheck::kernels::detail {

Mode mode_of(DType table) {
  switch (table) {
    case DType::bf16: return Mode::bf16;
    case DType::f16: return Mode::f16;
    case DType::f64: return Mode::f64;
    case DType::f32: break;
  }
  return Mode::f32;
}

float recipe_position_f32(Recipe r, std::int64_t p) {
  const auto pf = static_cast<float>(p);  // one rounding from the integer (exact below 2^24)
  if (r == Recipe::bf16_positions) return round_to_dtype(pf, DType::bf16);
  if (r == Recipe::f16_positions) return round_to_dtype(pf, DType::f16);
  return pf;
}

RowEngine::RowEngine(const RopePlan& plan, const Backend& backend) : plan_(plan), be_(backend) {
  const auto P = static_cast<std::size_t>(plan.pairs);
  theta_d_.resize(P);
  cd_.resize(P);
  sd_.resize(P);
  theta_f_.resize(P);
  c_.resize(P);
  s_.resize(P);
  cc_.resize(2 * P);
  ss_.resize(2 * P);
  ccd_.resize(2 * P);
  ssd_.resize(2 * P);
}

void RowEngine::angles(const Position& pos) {
  const int P = plan_.pairs;
  const std::int64_t pt[3] = {pos.t, pos.h, pos.w};
  const std::uint8_t* stream = plan_.stream.data();
  const bool uniform = plan_.spec.mrope == MropeMode::none || (pos.t == pos.h && pos.t == pos.w);
  double* td = theta_d_.data();
  float* tf = theta_f_.data();
  switch (plan_.recipe) {
    case Recipe::accurate: {
      // theta = p * w in binary64 (p exact below 2^53).
      const double pd[3] = {static_cast<double>(pt[0]), static_cast<double>(pt[1]), static_cast<double>(pt[2])};
      const double* w = plan_.inv_freq_f64.data();
      if (uniform) {  // one stream: a loop the compiler vectorises
        for (int j = 0; j < P; ++j) td[j] = pd[0] * w[j];
      } else {
        for (int j = 0; j < P; ++j) td[j] = pd[stream[j]] * w[j];
      }
      return;
    }
    case Recipe::ggml: {
      // theta_0 = fl32(p), theta_{j+1} = fl32(theta_j * theta_scale): one running value per stream
      // (ggml's rope_multi keeps t, h, w recurrences side by side), divided by the pair's divisor.
      float th[3] = {static_cast<float>(pt[0]), static_cast<float>(pt[1]), static_cast<float>(pt[2])};
      const float scale = plan_.ggml_theta_scale;
      const float* div = plan_.ggml_divisor.data();
      for (int j = 0; j < P; ++j) {
        tf[j] = th[stream[j]] / div[j];
        th[0] = th[0] * scale;
        th[1] = th[1] * scale;
        th[2] = th[2] * scale;
      }
      break;
    }
    default: {
      // theta = fl32(p_f32 * w_j): one f32 product (w_j and p_f32 as the recipe holds them).
      const float pf[3] = {recipe_position_f32(plan_.recipe, pt[0]), recipe_position_f32(plan_.recipe, pt[1]),
                           recipe_position_f32(plan_.recipe, pt[2])};
      const float* w = plan_.inv_freq_f32.data();
      if (uniform) {
        for (int j = 0; j < P; ++j) tf[j] = pf[0] * w[j];
      } else {
        for (int j = 0; j < P; ++j) tf[j] = pf[stream[j]] * w[j];
      }
      break;
    }
  }
  for (int j = 0; j < P; ++j) td[j] = static_cast<double>(tf[j]);  // exact
}

void RowEngine::cos_sin() {
  const auto P = static_cast<std::int64_t>(plan_.pairs);
  if (plan_.recipe == Recipe::fast_sincos)
    be_.fast_sincos(theta_f_.data(), P, s_.data(), c_.data());
  else
    be_.sincos(theta_d_.data(), P, s_.data(), c_.data());  // f32 angles: their exact binary64 values
}

void RowEngine::cos_sin_f64() {
  for (std::size_t j = 0; j < theta_d_.size(); ++j) {
    cd_[j] = std::cos(theta_d_[j]);
    sd_[j] = std::sin(theta_d_[j]);
  }
}

namespace {

// Channel order: (a, b) = (j, j + P) or (2j, 2j + 1); cc = (c, c), ss = (-s, +s).
template <class T>
void fill_channels(bool interleaved, std::size_t P, std::size_t j, T c, T s, T* cc, T* ss) {
  const std::size_t ia = interleaved ? 2 * j : j, ib = interleaved ? 2 * j + 1 : j + P;
  cc[ia] = c;
  cc[ib] = c;
  ss[ia] = -s;
  ss[ib] = s;
}

}  // namespace

void RowEngine::prepare(Mode mode) {
  const auto P = static_cast<std::size_t>(plan_.pairs);
  const bool il = plan_.interleaved;
  if (mode == Mode::f64) {
    if (plan_.recipe == Recipe::accurate) {
      cos_sin_f64();
      const double att = plan_.attention_factor_f64;
      for (std::size_t j = 0; j < P; ++j) fill_channels(il, P, j, cd_[j] * att, sd_[j] * att, ccd_.data(), ssd_.data());
    } else {  // hf with f64 activations: the f32 table (attention factor folded in f32) cast to f64
      const float att = plan_.attention_factor_f32;
      for (std::size_t j = 0; j < P; ++j)
        fill_channels(il, P, j, static_cast<double>(c_[j] * att), static_cast<double>(s_[j] * att), ccd_.data(),
                      ssd_.data());
    }
    return;
  }
  be_.prepare(c_.data(), s_.data(), static_cast<std::int64_t>(P), plan_.attention_factor_f32, mode, il, cc_.data(),
              ss_.data());
}

}  // namespace ropecheck::kernels::detail
