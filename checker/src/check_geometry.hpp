// The geometry of a golden output the checker and the diagnosis both walk: how its elements are
// decoded (Reader) and what the error model needs to know about each (Geometry: pair, partner,
// stream, frequency, magnitude). Private to golden/.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"

namespace ropecheck::checker::check_detail {
// The checker's vocabulary from the modules below it.
using golden::GoldenSet;
using golden::ManifestTensor;
using io::Tensor;
using io::TensorDType;

// Element decoding without per-call allocation; f16 through a table.
inline const std::array<double, 65536>& f16_table() {
  static const std::array<double, 65536> t = [] {
    std::array<double, 65536> a{};
    for (std::uint32_t b = 0; b < 65536; ++b) a[b] = bits_to_double(b, DType::f16);
    return a;
  }();
  return t;
}

struct Reader {
  const std::uint8_t* data;
  TensorDType dtype;
  const std::array<double, 65536>* f16;

  explicit Reader(const Tensor& t) : data(t.data.data()), dtype(t.dtype), f16(&f16_table()) {}
  double operator()(std::int64_t i) const {
    const std::size_t k = static_cast<std::size_t>(i);
    switch (dtype) {
      case TensorDType::f64: {
        double v;
        std::memcpy(&v, data + 8 * k, 8);
        return v;
      }
      case TensorDType::f32: {
        float v;
        std::memcpy(&v, data + 4 * k, 4);
        return static_cast<double>(v);
      }
      case TensorDType::f16: {
        std::uint16_t b;
        std::memcpy(&b, data + 2 * k, 2);
        return (*f16)[b];
      }
      case TensorDType::bf16: {
        std::uint16_t b;
        std::memcpy(&b, data + 2 * k, 2);
        return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16));
      }
      default: return std::nan("");
    }
  }
};

// What the error model needs to know about the elements of one output tensor.
struct Geometry {
  enum class Kind { pair_table, pe, rotated } kind = Kind::pair_table;
  const std::vector<Position>* positions = nullptr;
  std::vector<double> freq, log_freq;  // per pair (RoPE) or frequency index (sinusoidal)
  std::vector<int> stream;             // per pair: the position stream driving it
  std::vector<int> pair_of, partner;   // per channel (rotated): -1 = pass-through
  std::vector<int> column_freq;        // per pe column: frequency index, -1 for a zero column
  const Tensor* in = nullptr;          // q or k (rotated)
  std::int64_t P = 0, D = 0, H = 1;
  double att = 1;
  std::int64_t offset = 0;

  Geometry(const GoldenSet& g, const std::string& base) : positions(&g.positions()) {
    if (g.is_rope()) {
      const RopeSpec& r = g.spec().rope;
      freq = rope_frequencies<double>(r, g.seq_len()).inv_freq;
      P = rope_pairs(r);
      D = r.head_dim;
      H = g.heads();
      att = g.attention_factor();
      for (int j = 0; j < P; ++j) stream.push_back(r.mrope == MropeMode::none ? 0 : mrope_stream(r, j));
      pair_of.assign(static_cast<std::size_t>(D), -1);
      partner.assign(static_cast<std::size_t>(D), -1);
      const int block = rope_block_channels(r);
      for (int j = 0; j < P; ++j) {
        const auto [a, b] = pair_channels(r, j);
        if (a >= block || b >= block) continue;
        pair_of[static_cast<std::size_t>(a)] = pair_of[static_cast<std::size_t>(b)] = j;
        partner[static_cast<std::size_t>(a)] = b;
        partner[static_cast<std::size_t>(b)] = a;
      }
      if (base == "q_rot" || base == "k_rot") {
        kind = Kind::rotated;
        in = &g.tensor(base == "q_rot" ? "q" : "k");  // f32, checked when the set was loaded
      }
    } else {
      kind = Kind::pe;
      const SinusoidalSpec& s = g.spec().sinusoidal;
      freq = sinusoidal_frequencies<double>(s);
      D = s.d_model;
      offset = s.position_offset;
      for (int c = 0; c < D; ++c) {
        const SinusoidalColumn col = sinusoidal_column(s, c);
        column_freq.push_back(col.kind == SinusoidalKind::zero ? -1 : col.frequency);
      }
    }
    for (double w : freq) log_freq.push_back(w == 0 ? 0.0 : std::fabs(std::log(std::fabs(w))));
  }

  std::int64_t per_token() const { return kind == Kind::pair_table ? P : (kind == Kind::pe ? D : H * D); }
  std::int64_t stream_position(std::int64_t token, int pair) const {
    const Position& p = (*positions)[static_cast<std::size_t>(token)];
    const int s = stream[static_cast<std::size_t>(pair)];
    return s == 0 ? p.t : (s == 1 ? p.h : p.w);
  }
  double input(std::int64_t i) const {
    float v;
    std::memcpy(&v, in->data.data() + 4 * static_cast<std::size_t>(i), 4);
    return static_cast<double>(v);
  }

  // One element of a RoPE output by flat index, as the checker's pass sees it (pe: not used).
  struct Element {
    std::int64_t token = 0, position = 0;  // position of the driving stream
    int head = -1, channel = -1, pair = -1;
    accuracy::Quantity quantity = accuracy::Quantity::table;
    accuracy::PairAngle angle{0, 0};
    double magnitude = 1;
  };
  Element element(std::int64_t i) const {
    Element e;
    e.token = i / per_token();
    if (kind == Kind::pair_table) {
      e.pair = static_cast<int>(i % P);
    } else {
      e.channel = static_cast<int>(i % D);
      e.head = static_cast<int>((i / D) % H);
      e.pair = pair_of[static_cast<std::size_t>(e.channel)];
      e.quantity = e.pair < 0 ? accuracy::Quantity::passthrough : accuracy::Quantity::rotated;
      e.magnitude = e.pair < 0 ? std::fabs(input(i))
                               : att * (std::fabs(input(i)) +
                                        std::fabs(input(i - e.channel + partner[static_cast<std::size_t>(e.channel)])));
    }
    e.position = e.pair < 0 ? (*positions)[static_cast<std::size_t>(e.token)].t : stream_position(e.token, e.pair);
    if (e.pair >= 0)
      e.angle = {std::fabs(static_cast<double>(e.position) * freq[static_cast<std::size_t>(e.pair)]),
                 log_freq[static_cast<std::size_t>(e.pair)]};
    return e;
  }
};

}  // namespace ropecheck::checker::check_detail
