// The fast path's logits and output rows in double-double, with their bounds.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine_impl.hpp"

namespace ropecheck::attention::detail {
namespace {

using dd::add;
using dd::mul;

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

// The rotated vectors Q = Qh + Ql + eq, K = Kh + Kl + ek (|eq_c|, |ek_c| the channels' bounds):
//   sum Q_c K_c - sum (Qh + Ql)(Kh + Kl) = sum (eq K' + Q' ek + eq ek), with |Q'_c| <= |Qh_c| (1 + 2^-52)
// (|Ql| <= u |Qh|), so by Cauchy-Schwarz
//   <= |eq| |Kh| (1 + 2^-52) + |Qh| (1 + 2^-52) |ek| + |eq| |ek|;
// the dot product's own error is dot_bound(D, |Qh| |Kh|) (sum |Qh_c Kh_c| <= |Qh| |Kh|).
double rotated_dot_error(int D, double nq_hi, double nq_err, double nk_hi, double nk_err) {
  if (!(nq_err < kInf && nk_err < kInf)) return kInf;
  const double vec = (nq_err * nk_hi + nq_hi * nk_err) * (1 + 0x1p-51) + nq_err * nk_err;
  return (dot_bound(D, nq_hi * nk_hi) + vec) * kUp;
}

// s = dot * scale by DWTimesDW3 (5u^2 < 2^-103 of |s|), scale within scale_rel:
//   |s - exact| <= |scale| e_dot + |dot| |scale| scale_rel + 2^-103 |s|.
// Soft-cap: y = s / cap (div: kDivRel of |y|; e_y = e_s / cap + kDivRel |y|), tanh_dd (1-Lipschitz: its
// input's error passes unchanged, plus its own), t = cap * tanh by DWTimesFP3 (2u^2 of |t|).
// Each bound is evaluated in double and inflated by kUp.
Logit finish_logit(const Impl& m, DD dot, double dot_err) {
  if (!(dot_err < kInf)) return {dot, kInf};
  const DD s = mul(dot, m.scale);
  const double asc = std::fabs(m.scale.hi) * (1 + 0x1p-50);
  double e = (asc * dot_err + std::fabs(dot.hi) * (1 + 0x1p-50) * asc * m.scale_rel + 0x1p-103 * std::fabs(s.hi)) * kUp;
  if (!m.cap) return {s, e};
  const double cap = *m.cap;
  const DD y = div(s, DD{cap, 0.0});
  const double ey = (e / cap + kDivRel * std::fabs(y.hi)) * kUp;
  DD th;
  const double et = tanh_dd(y, th);
  const DD t = mul(th, cap);
  e = (cap * (ey + et) + 0x1p-105 * std::fabs(t.hi)) * kUp;
  return {t, e};
}

// One output row from its logits t_j (each within err_j):
//   ref = the largest t_j.hi (or the sink's logit z when larger); x_j = t_j - ref by DWPlusFP (2u^2 of
//   |x_j|), within ex_j = err_j + 2u^2 |x_j|;
//   e_j = exp_dd(x_j): |e^(true x_j) - e_j| <= e^x (e^ex - 1) + kExpRel |e_j| + 2^-1070 with
//   e^x <= |e_j| (1 + kExpRel) + 2^-1070 (abs_e[j]); x_j.hi < -650: e_j = 0 within 2^-937;
//   the sink: e^(z - ref), z - ref exact by 2Sum, kExpRel;
//   Z = sum e_j + e_sink by AccurateDWPlusDW (<= 3.01u^2 each, relative to a partial sum <= Z):
//     err_Z = sum abs_e + abs_e_sink + 3.01u^2 (keys + 1) Z;
//   num_c = weighted_sums: err_num_c = dot_bound(keys, Zk v_max_c) + (sum abs_e) v_max_c, with
//     Zk >= sum |e_j.hi| and v_max_c >= |V_jc| for every key;
//   o_c = div(num_c, Z): |num/Z - n/z| <= (err_num + |o| err_Z) / (Z - err_Z), plus kDivRel |o_c|.
// Z >= e_ref ~ 1, so Z - err_Z > 0 unless the bounds are useless (then err = inf: the fallback).
void output_row(const Impl& m, std::span<const Logit> logits, const double* sink, const double* v,
                const double* v_max, std::int64_t first_key, RowScratch& w, DD* o, double* err) {
  const std::size_t n = logits.size();
  const std::size_t dv = static_cast<std::size_t>(m.Dv);
  w.e.resize(n);
  w.abs_e.resize(n);
  w.acc.resize(dv);
  w.s_tmp.resize(dv);
  w.c_tmp.resize(dv);
  bool ok = true;
  double ref = -kInf;
  for (const Logit& l : logits) {
    ok = ok && l.err < kInf;
    ref = std::max(ref, l.v.hi);
  }
  if (sink) ref = std::max(ref, *sink);
  double sum_abs_e = 0, zk = 0;
  DD Z{0.0, 0.0};
  for (std::size_t j = 0; ok && j < n; ++j) {
    const DD x = add(logits[j].v, -ref);
    const double ex = (logits[j].err + 0x1p-105 * std::fabs(x.hi)) * kUp;
    DD e{0.0, 0.0};
    double ae = 0x1p-937;
    if (x.hi >= -650.0) {
      // A logit known only to worse than 2^-20 (never, in practice: they are known to about 2^-90 of
      // their magnitude) leaves the row to the fallback rather than widening every bound.
      if (!exp_dd(x, e) || ex > 0x1p-20) {
        ok = false;
        break;
      }
      ae = (std::fabs(e.hi) * (1 + 0x1p-50) * ((1 + kExpRel) * std::expm1(ex) * kUp + kExpRel) + 0x1p-1069) * kUp;
    }
    w.e[j] = e;
    w.abs_e[j] = ae;
    sum_abs_e += ae;
    zk += std::fabs(e.hi);
    Z = add(Z, e);
  }
  double abs_sink = 0;
  if (ok && sink) {
    DD es;
    if (exp_dd(dd::two_sum(*sink, -ref), es)) {
      abs_sink = (std::fabs(es.hi) * kExpRel + 0x1p-1069) * kUp;
      Z = add(Z, es);
    } else {
      abs_sink = 0x1p-937;  // e^(z - ref) < 2^-937, counted as 0
    }
  }
  if (!ok) {
    std::fill(err, err + dv, kInf);
    return;
  }
  const double nk = static_cast<double>(n);
  sum_abs_e *= 1 + gamma(nk);
  zk *= (1 + gamma(nk)) * (1 + 0x1p-52);
  const double err_Z = (sum_abs_e + abs_sink + 3.01 * kU2 * (nk + 1) * std::fabs(Z.hi) * 1.01) * kUp;
  const double den = std::fabs(Z.hi) * (1 - 0x1p-50) - err_Z;
  weighted_sums(w.e.data(), v + first_key * dv, static_cast<std::int64_t>(dv), static_cast<std::int64_t>(n), m.Dv,
                w.acc.data(), w.s_tmp.data(), w.c_tmp.data());
  for (std::size_t c = 0; c < dv; ++c) {
    if (!(den > 0)) {
      err[c] = kInf;
      continue;
    }
    const double err_num = dot_bound(static_cast<std::int64_t>(n), zk * v_max[c]) + sum_abs_e * v_max[c];
    o[c] = div(w.acc[c], Z);
    const double ao = std::fabs(o[c].hi) * (1 + 0x1p-50);
    err[c] = ((err_num + ao * err_Z) / den + kDivRel * ao) * kUp;
  }
}

}  // namespace ropecheck::attention::detail
