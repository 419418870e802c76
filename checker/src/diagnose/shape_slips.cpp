// Shape and convention slips named before the numeric check, with the remedy: q / k outputs in
// [batch, heads, seq, head_dim] or [batch, seq, heads, head_dim], cos / sin tables of width head_dim
// (cat(freqs, freqs) or repeat_interleave), leading dimensions of 1; and --layout, which rewrites
// batch-1 4-D outputs to [tokens, heads, head_dim].
#include <cstring>

#include "../check_internal.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"
#include "ropecheck/checker/diagnose.hpp"

namespace ropecheck::checker {
// The checker's vocabulary from the modules below it.
using golden::GoldenSet;
using golden::ManifestTensor;
using io::Tensor;
using io::TensorDType;

namespace {

std::vector<std::int64_t> squeezed(std::vector<std::int64_t> s) {
  while (s.size() > 2 && s.front() == 1) s.erase(s.begin());
  return s;
}

// Whether element (r, a) equals element (r, b) for every row r of a [rows, width] tensor, bit for bit.
bool columns_equal(const Tensor& t, std::int64_t rows, std::int64_t width, std::int64_t a_first, std::int64_t b_first,
                   std::int64_t step, std::int64_t count) {
  const std::size_t es = dtype_size(t.dtype);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < count; ++k) {
      const std::size_t ia = static_cast<std::size_t>(r * width + a_first + k * step) * es;
      const std::size_t ib = static_cast<std::size_t>(r * width + b_first + k * step) * es;
      if (std::memcmp(t.data.data() + ia, t.data.data() + ib, es) != 0) return false;
    }
  return true;
}

}  // namespace

std::string shape_slip(const std::string& base, const Tensor& c, const std::vector<std::int64_t>& g) {
  const std::vector<std::int64_t>& s = c.shape;
  if ((base == "q_rot" || base == "k_rot") && g.size() == 3) {
    const std::int64_t T = g[0], H = g[1], D = g[2];
    if (s.size() == 4 && s[1] == H && s[2] == T && s[3] == D)
      return "looks like [batch, heads, seq, head_dim]; pass --layout bhsd (batch 1) or transpose to [tokens, heads, head_dim]";
    if (s.size() == 4 && s[1] == T && s[2] == H && s[3] == D)
      return "looks like [batch, seq, heads, head_dim]; pass --layout bshd (batch 1) or drop the batch dimension";
    if (s.size() == 3 && s[0] == H && s[1] == T && s[2] == D)
      return "looks like [heads, seq, head_dim]; transpose to [tokens, heads, head_dim]";
    if (s.size() == 2 && s[0] == T && s[1] == H * D)
      return "looks like [tokens, heads * head_dim]; reshape to [tokens, heads, head_dim]";
    return "";
  }
  if (base == "k_pe_rot" && g.size() == 2) {  // MLA: one key a token, no head axis
    const std::int64_t T = g[0], R = g[1];
    if (s.size() == 3 && s[0] == T && s[1] > 1 && s[2] == R)
      return fmt::format("looks like k_pe expanded to every head [tokens, {}, rotary_dim] (transformers' k_rot.expand); "
                         "ropecheck expects [tokens, rotary_dim]: pass k_pe_rot[:, 0]",
                         s[1]);
    if (s.size() == 3 && s[2] == R && ((s[0] == 1 && s[1] == T) || (s[0] == T && s[1] == 1)))
      return "has a head axis of 1 ([tokens, 1, rotary_dim] or [1, tokens, rotary_dim]); squeeze it to [tokens, rotary_dim]";
    return "";
  }
  if ((base == "cos" || base == "sin") && g.size() == 2) {
    const std::int64_t T = g[0], P = g[1];
    const std::vector<std::int64_t> q = squeezed(s);
    if (q == g) return "has leading dimensions of 1; squeeze it to [tokens, pairs]";
    if (q.size() == 2 && q[0] == T && q[1] == 2 * P && c.numel() == T * 2 * P) {
      if (columns_equal(c, T, 2 * P, 0, P, 1, P))
        return fmt::format("{} with equal halves: a cat(freqs, freqs) table; ropecheck expects [tokens, pairs]: pass {}[..., :{}]",
                           base, base, P);
      if (columns_equal(c, T, 2 * P, 0, 1, 2, P))
        return fmt::format("{} with equal neighbours: a repeat_interleave table; ropecheck expects [tokens, pairs]: pass {}[..., ::2]",
                           base, base);
      return fmt::format("has head_dim columns; ropecheck expects [tokens, pairs] ({} pairs)", P);
    }
  }
  return "";
}

std::optional<CandidateLayout> parse_candidate_layout(const std::string& s) {
  if (s == "thd") return CandidateLayout::thd;
  if (s == "bshd") return CandidateLayout::bshd;
  if (s == "bhsd") return CandidateLayout::bhsd;
  return std::nullopt;
}

void apply_candidate_layout(std::vector<Tensor>& candidate, CandidateLayout layout) {
  if (layout == CandidateLayout::thd) return;
  const char* name = layout == CandidateLayout::bshd ? "bshd" : "bhsd";
  for (Tensor& t : candidate) {
    if (t.shape.size() != 4) continue;
    if (t.shape[0] != 1)
      throw InputError(fmt::format("--layout {}: candidate tensor {} has batch {}; ropecheck checks one sequence (batch 1)",
                                    name, quote_name(t.name), t.shape[0]));
    if (layout == CandidateLayout::bshd) {
      t.shape = {t.shape[1], t.shape[2], t.shape[3]};
      continue;
    }
    const std::int64_t H = t.shape[1], T = t.shape[2], D = t.shape[3];
    const std::size_t row = static_cast<std::size_t>(D) * dtype_size(t.dtype);
    std::vector<std::uint8_t> out(t.data.size());
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t tok = 0; tok < T; ++tok)
        std::memcpy(out.data() + static_cast<std::size_t>(tok * H + h) * row,
                    t.data.data() + static_cast<std::size_t>(h * T + tok) * row, row);
    t.data = std::move(out);
    t.shape = {T, H, D};
  }
}

}  // namespace ropecheck::checker
