// attention_dump: correctly rounded attention scores and outputs as JSON, for the independent mpmath
// cross-check (tests/python/mpmath_attention.py).
//
//   attention_dump --spec FILE.json (--positions LIST | --pairs GRAMMAR) [--group G] [--scale S]
//                  [--softcap C] [--window W] [--noncausal] [--sinks z1,z2,...] [--seed N] [--force-fallback]
//
// LIST is core/positions.hpp's grammar (T/H/W triples for multimodal specs), GRAMMAR attention/pairs.hpp's.
// The inputs (q [tokens][group][head_dim], k, v [tokens][head_dim]) are bf16-exact values drawn from
// SplitMix64 with the seed; they are printed with the values so that the checker recomputes from them.
// Every number is printed with C's %a (bit for bit). Block mode prints scores [group][visible pairs, row by
// row] and outputs [tokens][group][head_dim]; pairs mode the pairs and scores [group][pairs].
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/attention/engine.hpp"
#include "ropecheck/attention/pairs.hpp"
#include "ropecheck/core/positions.hpp"
#include "ropecheck/core/spec_json.hpp"
#include "ropecheck/core/splitmix.hpp"

namespace {

using namespace ropecheck;
using namespace ropecheck::attention;

std::string hex(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

// A bf16-exact value in about [-2, 2): 8 significant bits from the hash, an exponent from 2^-3 to 2^0.
std::vector<double> inputs(std::size_t n, std::uint64_t seed) {
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t h = splitmix64_finalize(seed * 0x9E3779B97F4A7C15ULL + i);
    const double m = static_cast<double>(128 + (h & 127)) / 128.0;  // [1, 2), 8 bits
    const int e = -static_cast<int>((h >> 7) & 3);
    out[i] = ((h >> 9) & 1 ? -1.0 : 1.0) * std::ldexp(m, e);
  }
  return out;
}

std::vector<double> parse_list(const std::string& s) {
  std::vector<double> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stod(item));
  return out;
}

nlohmann::json hex_list(const std::vector<double>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (double x : v) a.push_back(hex(x));
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec_file, positions, pairs;
  AttentionSpec a;
  std::uint64_t seed = 1;
  AttentionEngineOptions opt;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value");
      return argv[++i];
    };
    if (k == "--spec") spec_file = next();
    else if (k == "--positions") positions = next();
    else if (k == "--pairs") pairs = next();
    else if (k == "--group") a.group = std::stoi(next());
    else if (k == "--scale") a.scale = std::stod(next());
    else if (k == "--softcap") a.softcap = std::stod(next());
    else if (k == "--window") a.window = std::stoll(next());
    else if (k == "--noncausal") a.causal = false;
    else if (k == "--sinks") a.sinks = parse_list(next());
    else if (k == "--seed") seed = std::stoull(next());
    else if (k == "--force-fallback") opt.force_fallback = true;
    else {
      std::cerr << "attention_dump: unknown option " << k << "\n";
      return 2;
    }
  }
  try {
    const RopeSpec rope = load_spec_file(spec_file).rope;
    std::vector<Position> pos;
    PairTokens tokens;
    if (!pairs.empty()) {
      tokens = pair_tokens(parse_pairs(pairs));
      for (std::int64_t p : tokens.positions) pos.push_back(Position::uniform(p));
    } else {
      pos = parse_positions(positions).positions;
    }
    std::int64_t max_pos = 0;
    for (const Position& p : pos) max_pos = std::max({max_pos, p.t, p.h, p.w});
    const AttentionEngine engine(rope, std::nullopt, a, max_pos, opt);
    const std::size_t T = pos.size(), D = static_cast<std::size_t>(rope.head_dim), G = static_cast<std::size_t>(a.group);
    const std::vector<double> q = inputs(T * G * D, seed), k = inputs(T * D, seed + 1), v = inputs(T * D, seed + 2);
    const std::array<DType, 4> types = {DType::f64, DType::f32, DType::f16, DType::bf16};
    const std::size_t n_scores = pairs.empty() ? static_cast<std::size_t>(BlockLayout(a, static_cast<std::int64_t>(T)).total())
                                               : tokens.query_token.size();
    std::vector<std::vector<double>> s(4, std::vector<double>(G * n_scores)), o(4, std::vector<double>(T * G * D));
    std::vector<AttentionOut> out;
    for (std::size_t d = 0; d < 4; ++d) out.push_back({s[d].data(), pairs.empty() ? o[d].data() : nullptr});
    RoundingStats stats;
    if (pairs.empty())
      engine.block(pos, q, k, v, types, out, stats);
    else
      engine.pairs(pos, q, k, tokens.query_token, tokens.key_token, types, out, stats);
    nlohmann::json j;
    j["positions"] = nlohmann::json::array();
    for (const Position& p : pos) j["positions"].push_back({p.t, p.h, p.w});
    j["q"] = hex_list(q);
    j["k"] = hex_list(k);
    j["v"] = hex_list(v);
    if (!pairs.empty()) {
      j["query_token"] = tokens.query_token;
      j["key_token"] = tokens.key_token;
    }
    j["fast_values"] = stats.fast_values;
    j["fallback_values"] = stats.fallback_values;
    for (std::size_t d = 0; d < 4; ++d) {
      j["scores"][std::string(to_string(types[d]))] = hex_list(s[d]);
      if (pairs.empty()) j["outputs"][std::string(to_string(types[d]))] = hex_list(o[d]);
    }
    std::cout << j.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "attention_dump: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
