// reference_dump: correctly rounded (binary64) reference values as JSON, for the independent
// mpmath cross-check (tests/python/mpmath_crosscheck.py).
//
//   reference_dump --spec FILE.json --positions LIST [--seq-len N]
//
// LIST is comma-separated integers, or t:h:w triples for multimodal RoPE. Numbers are printed
// with C's %a so the comparison is bit for bit.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"
#include "ropecheck/core/spec_json.hpp"

namespace {

using namespace ropecheck;

std::string hex(const Real& v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", to_f64(v));
  return buf;
}

std::vector<Position> parse_positions(const std::string& list) {
  std::vector<Position> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::vector<std::int64_t> parts;
    std::stringstream is(item);
    std::string p;
    while (std::getline(is, p, ':')) parts.push_back(std::stoll(p));
    if (parts.size() == 1)
      out.push_back(Position::uniform(parts[0]));
    else if (parts.size() == 3)
      out.push_back({parts[0], parts[1], parts[2]});
    else
      throw SpecError("bad position '" + item + "'");
  }
  return out;
}

std::int64_t max_abs(const std::vector<Position>& ps) {
  std::int64_t m = 0;
  for (const Position& p : ps)
    for (std::int64_t v : {p.t, p.h, p.w}) m = std::max(m, v < 0 ? -v : v);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec_file, positions;
  std::optional<std::int64_t> seq_len;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--spec")
      spec_file = argv[i + 1];
    else if (a == "--positions")
      positions = argv[i + 1];
    else if (a == "--seq-len")
      seq_len = std::stoll(argv[i + 1]);
    else {
      std::cerr << "reference_dump: unknown option " << a << "\n";
      return 2;
    }
  }
  try {
    const EncodingSpec spec = load_spec_file(spec_file);
    const std::vector<Position> pos = parse_positions(positions);
    nlohmann::json out;
    out["family"] = std::string(to_string(spec.family));
    if (spec.family == Family::rope) {
      const RopeSpec& r = spec.rope;
      const unsigned bits = working_precision_bits(53, rope_max_abs_angle(r, seq_len, max_abs(pos)));
      ScopedPrecision precision(bits);
      out["working_precision_bits"] = bits;
      const RopeFrequencies<Real> f = rope_frequencies<Real>(r, seq_len);
      for (const Real& v : f.inv_freq) out["frequencies"].push_back(hex(v));
      out["attention_factor"] = hex(f.attention_factor);
      std::vector<Real> x;
      for (int c = 0; c < r.head_dim; ++c) x.push_back(Real((c * 37) % 17 - 8) / 4);
      for (const Real& v : x) out["input"].push_back(hex(v));
      for (const Position& p : pos) {
        std::vector<Real> c, s;
        rope_cos_sin(r, f, p, c, s);
        nlohmann::json row;
        row["position"] = {p.t, p.h, p.w};
        for (const Real& v : c) row["cos"].push_back(hex(v));
        for (const Real& v : s) row["sin"].push_back(hex(v));
        for (const Real& v : rope_apply<Real>(r, f, p, x)) row["rotated"].push_back(hex(v));
        if (r.key_layout == KeyLayout::k_pe) {  // MLA: the k_pe key, here the input's rotary block
          const std::vector<Real> key(x.begin() + r.rotary_offset, x.begin() + r.rotary_offset + r.rotary_dim);
          for (const Real& v : rope_apply<Real>(key_rope(r), f, p, key)) row["rotated_key"].push_back(hex(v));
        }
        out["rows"].push_back(row);
      }
    } else {
      const SinusoidalSpec& s = spec.sinusoidal;
      const unsigned bits = working_precision_bits(53, sinusoidal_max_abs_angle(s, max_abs(pos)));
      ScopedPrecision precision(bits);
      out["working_precision_bits"] = bits;
      const std::vector<Real> w = sinusoidal_frequencies<Real>(s);
      for (const Real& v : w) out["frequencies"].push_back(hex(v));
      for (const Position& p : pos) {
        nlohmann::json row;
        row["position"] = p.t;
        for (const Real& v : sinusoidal_row(s, w, p.t)) row["pe"].push_back(hex(v));
        out["rows"].push_back(row);
      }
    }
    std::cout << out.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "reference_dump: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
