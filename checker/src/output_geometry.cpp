#include "output_geometry.hpp"

#include "ropecheck/formulas/qk_norm.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"

namespace ropecheck::checker::check_detail {

const RmsNormStage* norm_of(const golden::GoldenSet& g, const std::string& base) {
  return g.is_rope() && (base == "q_rot" || base == "k_rot") ? norm_stage(g.spec().rope, base.substr(0, 1)) : nullptr;
}

std::vector<double> rotation_input(const golden::GoldenSet& g, const std::string& base) {
  const io::Tensor& x = g.tensor(input_of(base));  // f32
  std::vector<double> v(x.data.size() / 4);
  decode(x.data.data(), DType::f32, v);
  if (const RmsNormStage* n = norm_of(g, base)) {
    const std::size_t D = static_cast<std::size_t>(g.spec().rope.head_dim);
    std::vector<double> head(D);
    for (std::size_t at = 0; at + D <= v.size(); at += D) {
      std::copy(v.begin() + static_cast<std::ptrdiff_t>(at), v.begin() + static_cast<std::ptrdiff_t>(at + D), head.begin());
      rms_norm_head<double>(head, *n, std::span(v).subspan(at, D));
    }
  }
  return v;
}

OutputGeometry::OutputGeometry(const golden::GoldenSet& g, const std::string& base, bool load_data)
    : positions(load_data ? &g.positions() : nullptr) {
  if (g.is_rope()) {
    // k_pe_rot (MLA): one head of the key's own width, rotated as the slice alone (key_rope).
    const bool k_pe = base == "k_pe_rot";
    const RopeSpec r = k_pe ? key_rope(g.spec().rope) : g.spec().rope;
    rope.emplace(r, rope_frequencies<double>(r, g.seq_len()).inv_freq, g.attention_factor());
    P = rope->pairs();
    D = r.head_dim;
    H = k_pe ? 1 : g.heads();
    if (is_rotated_base(base)) {
      kind = Kind::rotated;
      exact_passthrough = is_mla_layout(g.spec().rope);
      if (norm_of(g, base) != nullptr) norm_term = accuracy::qk_norm_relative_term(r.head_dim);
      if (load_data && norm_term > 0) {  // M of the rotation's input: the normalized head
        normalized = std::make_shared<const std::vector<double>>(rotation_input(g, base));
        in.emplace(normalized->data(), DType::f64);
      } else if (load_data) {
        const io::Tensor& x = g.tensor(input_of(base));  // f32, checked when the set was loaded
        in.emplace(x.data.data(), DType::f32);
      }
    }
    return;
  }
  kind = Kind::pe;
  const SinusoidalSpec& s = g.spec().sinusoidal;
  const std::vector<double> freq = sinusoidal_frequencies<double>(s);
  D = s.d_model;
  offset = s.position_offset;
  for (int c = 0; c < D; ++c) {
    const SinusoidalColumn col = sinusoidal_column(s, c);
    pe_index.push_back(col.kind == SinusoidalKind::zero ? -1 : col.frequency);
    pe_freq.push_back(col.kind == SinusoidalKind::zero ? 0.0 : freq[static_cast<std::size_t>(col.frequency)]);
  }
}

OutputGeometry::Element OutputGeometry::element(std::int64_t i) const {
  Element e = locate(i, (*positions)[static_cast<std::size_t>(i / per_token())]);
  if (kind == Kind::rotated) e.magnitude = rope->magnitude(head(i - e.channel), e.channel);
  return e;
}

OutputGeometry::Element OutputGeometry::locate(std::int64_t i, const Position& pos) const {
  Element e;
  e.token = i / per_token();
  e.position = pos.t;
  switch (kind) {
    case Kind::pair_table:
      e.pair = static_cast<int>(i % P);
      break;
    case Kind::pe:
      e.channel = static_cast<int>(i % D);
      e.pair = pe_index[static_cast<std::size_t>(e.channel)];
      if (e.pair >= 0)
        e.angle = accuracy::pair_angle(static_cast<double>(pos.t + offset), pe_freq[static_cast<std::size_t>(e.channel)]);
      return e;
    case Kind::rotated:
      e.channel = static_cast<int>(i % D);
      e.head = static_cast<int>((i / D) % H);
      e.pair = rope->pair_of(e.channel);
      e.quantity = rope->quantity(e.channel);
      break;
  }
  if (e.pair >= 0) {
    e.stream = rope->stream(e.pair);
    e.position = rope->position(pos, e.pair);
    e.angle = rope->angle(e.position, e.pair);
  }
  return e;
}

}  // namespace ropecheck::checker::check_detail
