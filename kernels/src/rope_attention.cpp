// The fused RoPE + attention recipes (rope_attention.hpp).
#include "ropecheck/kernels/rope_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "storage.hpp"

namespace ropecheck::kernels {

AttentionArithmetic attention_arithmetic(Recipe recipe, DType dt) {
  switch (recipe) {
    case Recipe::bf16_table: return {false, DType::bf16};
    case Recipe::f16_table: return {false, DType::f16};
    case Recipe::accurate: return dt == DType::f32 ? AttentionArithmetic{false, DType::f32} : AttentionArithmetic{true, DType::f64};
    default: break;
  }
  if (dt == DType::f64) return {true, DType::f64};
  const bool eager = recipe != Recipe::meta && recipe != Recipe::ggml;  // hf and the recipes derived from it
  return {false, eager && (dt == DType::bf16 || dt == DType::f16) ? dt : DType::f32};
}

namespace {

// x rounded once to t (binary64 when t is f64).
double round_to(double x, DType t) { return t == DType::f64 ? x : static_cast<double>(detail::round_double_to_float(x, t)); }

bool contiguous(const TensorView& t, std::int64_t tokens, std::int64_t heads, std::int64_t dim) {
  return t.data && t.tokens == tokens && t.heads == heads && t.head_dim == dim && t.stride_dim == 1 &&
         t.stride_head == dim && t.stride_token == heads * dim;
}

std::vector<double> decoded(const TensorView& t) {
  std::vector<double> out(static_cast<std::size_t>(t.tokens * t.heads * t.head_dim));
  decode(t.data, t.dtype, out);
  return out;
}

// The rotated tensor x (positions pos) held in dt, decoded.
std::vector<double> rotated(const RopePlan& plan, const PositionsView& pos, const TensorView& x, DType dt,
                            const KernelOptions& opts) {
  const std::size_t n = static_cast<std::size_t>(x.tokens * x.heads * x.head_dim);
  std::vector<unsigned char> held(n * static_cast<std::size_t>(format_info(dt).storage_bits / 8));
  rope_apply(plan, pos, x, TensorView::contiguous(held.data(), dt, x.tokens, x.heads, x.head_dim), {}, {}, opts);
  std::vector<double> out(n);
  decode(held.data(), dt, out);
  return out;
}

struct Block {
  std::size_t T, G, D, Dv;
  const AttentionParams& a;
  int scale_dim;
  DType dt, mid;
};

// The attention arithmetic of rope_attention.hpp in Acc on the rotated Q, K (held in dt) and V.
template <class Acc>
void attend(const Block& b, const std::vector<double>& Q, const std::vector<double>& K, const std::vector<double>& V,
            const TensorView& out, void* scores) {
  auto mid = [&](Acc x) { return static_cast<Acc>(round_to(static_cast<double>(x), b.mid)); };
  const Acc scale = mid(static_cast<Acc>(b.scale_dim > 0 ? 1 / std::sqrt(static_cast<double>(b.scale_dim)) : *b.a.scale));
  const auto T = static_cast<std::int64_t>(b.T);
  const std::int64_t total = attention_score_count(b.a, T);
  const std::size_t e = static_cast<std::size_t>(format_info(b.dt).storage_bits / 8);
  for (std::size_t h = 0; h < b.G; ++h) {
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < b.T; ++i) {
      const AttentionKeys kr = attention_keys(b.a, static_cast<std::int64_t>(i), T);
      std::vector<Acc> t;
      for (std::int64_t j = kr.first; j <= kr.last; ++j) {
        Acc d = 0;
        for (std::size_t c = 0; c < b.D; ++c)
          d += static_cast<Acc>(Q[(i * b.G + h) * b.D + c]) * static_cast<Acc>(K[static_cast<std::size_t>(j) * b.D + c]);
        Acc s = mid(mid(d) * scale);
        if (b.a.softcap) {
          const Acc cap = static_cast<Acc>(*b.a.softcap);
          s = mid(cap * mid(std::tanh(mid(s / cap))));
        }
        t.push_back(s);
        if (scores) {
          const auto at = static_cast<std::size_t>(static_cast<std::int64_t>(h) * total + offset + (j - kr.first));
          store_element(static_cast<unsigned char*>(scores) + at * e, round_to(static_cast<double>(s), b.dt), b.dt);
        }
      }
      offset += kr.size();
      const bool sink = !b.a.sinks.empty();
      const Acc z = sink ? static_cast<Acc>(b.a.sinks[h]) : Acc(0);
      Acc mx = sink ? z : t[0];
      for (Acc x : t) mx = std::max(mx, x);
      Acc sum = sink ? static_cast<Acc>(std::exp(z - mx)) : Acc(0);
      std::vector<Acc> p;
      for (Acc x : t) {
        p.push_back(std::exp(x - mx));
        sum += p.back();
      }
      for (std::size_t c = 0; c < b.Dv; ++c) {
        Acc o = 0;
        for (std::size_t j = 0; j < p.size(); ++j)
          o += mid(p[j] / sum) * static_cast<Acc>(V[(static_cast<std::size_t>(kr.first) + j) * b.Dv + c]);
        store_element(static_cast<unsigned char*>(out.data) + ((i * b.G + h) * b.Dv + c) * e,
                      round_to(static_cast<double>(o), b.dt), b.dt);
      }
    }
  }
}

}  // namespace

void rope_attention(const RopePlan& plan, const PositionsView& q_positions, const PositionsView& k_positions,
                    const AttentionParams& a, const TensorView& q, const TensorView& k, const TensorView& v,
                    const TensorView& out, void* scores, const KernelOptions& opts) {
  const std::int64_t T = q.tokens, G = a.group, D = plan.head_dim, Dv = attention_value_dim(a, plan.head_dim);
  if (G < 1) throw std::invalid_argument("attention group must be >= 1");
  if (!a.sinks.empty() && a.sinks.size() != static_cast<std::size_t>(G))
    throw std::invalid_argument("attention sinks: " + std::to_string(a.sinks.size()) + " given for a group of " + std::to_string(G));
  if (!a.scale && attention_scale_dim(a, plan.head_dim) <= 0) throw std::invalid_argument("attention scale: none given");
  if (a.softcap && !(*a.softcap > 0)) throw std::invalid_argument("attention soft-cap must be > 0");
  if (T < 1 || !contiguous(q, T, G, D) || !contiguous(k, T, 1, D) || !contiguous(v, T, 1, Dv) || !contiguous(out, T, G, Dv))
    throw std::invalid_argument("fused attention: q [T][G][D], k [T][D], v [T][Dv] and out [T][G][Dv] must be contiguous and match");
  if (q_positions.tokens != T || k_positions.tokens != T) throw std::invalid_argument("fused attention: one position per token");
  const AttentionArithmetic arith = attention_arithmetic(plan.recipe, out.dtype);
  const std::vector<double> Q = rotated(plan, q_positions, q, out.dtype, opts), K = rotated(plan, k_positions, k, out.dtype, opts);
  const std::vector<double> V = decoded(v);
  const Block b{static_cast<std::size_t>(T), static_cast<std::size_t>(G), static_cast<std::size_t>(D),
                static_cast<std::size_t>(Dv), a, attention_scale_dim(a, plan.head_dim), out.dtype, arith.mid};
  if (arith.f64_accumulation)
    attend<double>(b, Q, K, V, out, scores);
  else
    attend<float>(b, Q, K, V, out, scores);
}

}  // namespace ropecheck::kernels
