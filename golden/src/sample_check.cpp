#include "sample_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "ropecheck/reference/resolve.hpp"
#include "ropecheck/formulas/qk_norm.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"

namespace ropecheck::golden::detail {
using namespace ropecheck::io;  // tensors and files are this module's material
using namespace ropecheck::io::detail;  // the tensor files\' layout and writer
namespace {

// Distance in units in the last place between two finite doubles of the same sign (else huge).
std::uint64_t ulps_apart(double a, double b) {
  if (a == b) return 0;
  if (!std::isfinite(a) || !std::isfinite(b) || std::signbit(a) != std::signbit(b)) return UINT64_MAX;
  std::int64_t ia = 0, ib = 0;
  std::memcpy(&ia, &a, 8);
  std::memcpy(&ib, &b, 8);
  return static_cast<std::uint64_t>(ia > ib ? ia - ib : ib - ia);
}

std::string fmt_double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Tokens 0, T/3, 2T/3, T-1 (distinct): both ends of the range and two inside it.
std::vector<std::int64_t> sample_tokens(std::int64_t T) {
  std::set<std::int64_t> s;
  for (int i = 0; i < kSampleTokens; ++i) s.insert(i * (T - 1) / (kSampleTokens - 1));
  return {s.begin(), s.end()};
}

std::vector<int> sample_indices(int n) {  // first, middle, last
  std::set<int> s = {0, n / 2, n - 1};
  return {s.begin(), s.end()};
}

}  // namespace

namespace {

// The sampled values read one by one (GoldenSet::value), so that a set of any size is checked without
// loading a tensor.
class Sampled {
 public:
  Sampled(const GoldenSet& set, std::string name) : set_(set), name_(std::move(name)) {}
  double value(std::int64_t i) const { return set_.value(name_, i); }

 private:
  const GoldenSet& set_;
  std::string name_;
};

void compare_sample(const GoldenSet& set) {
  const std::string where = sanitize((set.dir() / "manifest.json").string());
  const EncodingSpec& spec = set.spec();
  const std::vector<std::int64_t> tokens = sample_tokens(set.tokens());
  std::map<std::int64_t, Position> pos;
  for (std::int64_t t : tokens) pos[t] = set.positions(t, t + 1).front();
  std::int64_t max_abs = 0;
  for (std::int64_t t : tokens)
    for (std::int64_t x : {pos[t].t, pos[t].h, pos[t].w}) max_abs = std::max(max_abs, x < 0 ? -x : x);

  auto compare = [&](const char* tensor, std::int64_t token, std::int64_t index, double stored, double exact) {
    if (ulps_apart(stored, exact) <= 1) return;
    throw InputError(where + ": the set's data does not match its spec (" + std::string(tensor) + " at token " +
                      std::to_string(token) + ", element " + std::to_string(index) + " is " + fmt_double(stored) +
                      ", the spec gives " + fmt_double(exact) +
                      "): manifest.json was edited or belongs to another set; regenerate the set");
  };

  if (spec.family == Family::rope) {
    const RopeSpec& r = spec.rope;
    // The attention factor the manifest states must be the spec's (plugins are given it).
    const std::string att = resolve_spec(spec, set.seq_len(), 40).attention_factor;
    if (att != set.attention_factor_text())
      throw InputError(where + ": 'attention_factor' " + quote_name(set.attention_factor_text()) +
                        " does not match the spec's " + att + ": manifest.json was edited; regenerate the set");
    ScopedPrecision prec(working_precision_bits(53, rope_max_abs_angle(r, set.seq_len(), max_abs)));
    const RopeFrequencies<Real> f = rope_frequencies<Real>(r, set.seq_len());
    const int P = rope_pairs(r), H = set.heads();
    // MLA: the key is k_pe, no head axis, rotated as the slice alone (key_rope).
    const bool k_pe = r.key_layout == KeyLayout::k_pe;
    const RopeSpec kr = key_rope(r);
    const std::string key = k_pe ? "k_pe" : "k";
    const Sampled cos_t(set, "cos.f64"), sin_t(set, "sin.f64"), q(set, "q"), k(set, key), q_rot(set, "q_rot.f64"),
        k_rot(set, key + "_rot.f64");
    const std::string k_name = key + "_rot.f64";
    std::vector<Real> c, s;
    for (std::int64_t t : tokens) {
      const Position& p = pos[t];
      rope_cos_sin(r, f, p, c, s);
      for (int j : sample_indices(P)) {
        const std::int64_t i = t * P + j;
        compare("cos.f64", t, i, cos_t.value(i), to_f64(c[static_cast<std::size_t>(j)]));
        compare("sin.f64", t, i, sin_t.value(i), to_f64(s[static_cast<std::size_t>(j)]));
      }
      // q of head 0 and k of the last head: every channel of those rows would be D values; take the
      // two channels of the first, middle and last pair (and channels 0 and D-1, pass-through ones if any).
      for (const auto& [in, out, spec_of, head, heads, name] :
           {std::tuple{&q, &q_rot, &r, 0, H, "q_rot.f64"},
            std::tuple{&k, &k_rot, &kr, k_pe ? 0 : H - 1, k_pe ? 1 : H, k_name.c_str()}}) {
        const int w = spec_of->head_dim;
        const std::int64_t row = (t * heads + head) * w;
        std::vector<Real> x(static_cast<std::size_t>(w));
        std::vector<double> xd(static_cast<std::size_t>(w));
        for (int ch = 0; ch < w; ++ch) xd[static_cast<std::size_t>(ch)] = in->value(row + ch);
        for (int ch = 0; ch < w; ++ch) x[static_cast<std::size_t>(ch)] = Real(xd[static_cast<std::size_t>(ch)]);
        // The norm stage (when the spec has one; never with MLA) before the rotation, in MPFR as well.
        if (const RmsNormStage* n = norm_stage(r, name[0] == 'q' ? "q" : "k"))
          rms_norm_head<Real>(xd, *n, std::span<Real>(x));
        const std::vector<Real> y = rope_apply(*spec_of, f, p, std::span<const Real>(x));
        std::set<int> channels = {0, w - 1};
        for (int j : sample_indices(P)) {
          const auto [a, b] = pair_channels(*spec_of, j);
          channels.insert(a);
          channels.insert(b);
        }
        for (int ch : channels)
          compare(name, t, row + ch, out->value(row + ch), to_f64(y[static_cast<std::size_t>(ch)]));
      }
    }
  } else {
    const SinusoidalSpec& ss = spec.sinusoidal;
    ScopedPrecision prec(working_precision_bits(53, sinusoidal_max_abs_angle(ss, max_abs)));
    const std::vector<Real> w = sinusoidal_frequencies<Real>(ss);
    const Sampled pe(set, "pe.f64");
    const int dm = ss.d_model;
    for (std::int64_t t : tokens) {
      const std::vector<Real> row = sinusoidal_row(ss, w, pos[t].t);
      std::set<int> cols = {0, 1, dm / 2, dm - 1};
      for (int c : cols) {
        const std::int64_t i = t * dm + c;
        compare("pe.f64", t, i, pe.value(i), to_f64(row[static_cast<std::size_t>(c)]));
      }
    }
  }
}

}  // namespace

void verify_sample(const GoldenSet& set, bool files_hashed) {
  try {
    compare_sample(set);
  } catch (const InputError&) {
    if (files_hashed) throw;
    // A data file changed since the manifest was written reads as a manifest that does not fit its data:
    // name the file instead.
    std::vector<std::string> files;
    for (const ManifestFile& f : set.files()) files.push_back(f.file);
    set.verify_files(files, 0).wait();
    throw;
  }
}

}  // namespace ropecheck::golden::detail
