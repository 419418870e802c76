// The store names of golden --stores (quantized_store_spec.hpp).
#include <charconv>
#include <cmath>
#include <utility>
#include <vector>

#include "ropecheck/core/quantized_store_spec.hpp"

namespace ropecheck::quant {
namespace {

// 'item', built by appending: GCC 12's -Wrestrict misfires on "'" + std::string(...).
std::string quoted(std::string_view item) {
  std::string s(1, '\'');
  s.append(item);
  s.push_back('\'');
  return s;
}

// One given scale: a decimal number rounded once to binary32 (from_chars: nearest even), a positive
// normal value after the rounding (1e39 overflows, 1e-50 underflows: both refused; a subnormal scale
// is no checkpoint's and would make y / s overflow every store).
std::optional<float> parse_scale(std::string_view v, std::string& why) {
  float f = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), f);
  if (v.empty() || ec == std::errc::invalid_argument || p != v.data() + v.size()) {
    why = "scale " + quoted(v) + " is not a number";
    return std::nullopt;
  }
  if (ec == std::errc::result_out_of_range || !std::isnormal(f) || !(f > 0)) {
    why = "scale " + quoted(v) + " is not a positive normal binary32 value (2^-126 to 2^128)";
    return std::nullopt;
  }
  return f;
}

// scale=V or scale=V1/V2/...: the given scales, per tensor or per head.
bool parse_given(std::string_view list, StoreSpec& s, std::string& why) {
  s.given.clear();
  for (std::size_t b = 0;;) {
    const std::size_t c = list.find('/', b);
    const auto f = parse_scale(list.substr(b, c == std::string_view::npos ? std::string_view::npos : c - b), why);
    if (!f) return false;
    s.given.push_back(*f);
    if (c == std::string_view::npos) break;
    b = c + 1;
  }
  s.scale = s.given.size() == 1 ? ScaleGranularity::per_tensor : ScaleGranularity::per_head;
  return true;
}

std::optional<StoreSpec> parse_fp8_options(const std::vector<std::string_view>& parts, StoreSpec s, std::string& why) {
  bool granularity = false;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string_view p = parts[i];
    if (const auto o = parse_fp8_overflow(p)) {
      s.overflow = *o;
      continue;
    }
    const auto g = parse_scale_granularity(p);  // per-tensor, per-head alone: data-derived over all tokens
    const bool given = p.rfind("scale=", 0) == 0;
    if (!g && !given) {
      why = quoted(p) + " is not an FP8 option (saturate, nonfinite, per-token, per-token-head, per-tensor, per-head, "
                        "scale=V, scale=V1/V2/...)";
      return std::nullopt;
    }
    if (granularity) {
      why = "one scale option per store, not " + quoted(p) + " as well";
      return std::nullopt;
    }
    granularity = true;
    if (g) s.scale = *g;
    if (given && !parse_given(p.substr(6), s, why)) return std::nullopt;
  }
  return s;
}

// The shortest decimal that rounds back to f (to_chars' round trip).
std::string shortest(float f) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, f);
  return std::string(buf, r.ptr);
}

}  // namespace

std::string StoreSpec::item() const {
  switch (kind) {
    case StoreKind::fp8: {
      std::string s = name() + ":" + std::string(to_string(overflow)) + ":";
      if (given.empty()) return s + std::string(to_string(scale));
      s += "scale=";
      for (std::size_t i = 0; i < given.size(); ++i) {
        if (i > 0) s.push_back('/');
        s.append(shortest(given[i]));
      }
      return s;
    }
    case StoreKind::affine: return name() + ":" + std::string(to_string(affine.scale_dtype));
    default: return name();
  }
}

std::string StoreSpec::name() const {
  switch (kind) {
    case StoreKind::fp8: return std::string(to_string(fp8));
    case StoreKind::q8_0: return "q8_0";
    case StoreKind::q4_0: return "q4_0";
    case StoreKind::affine: return "int" + std::to_string(affine.bits) + "g" + std::to_string(affine.group_size);
  }
  return "";
}

std::optional<StoreSpec> parse_store(std::string_view item, std::string& why) {
  std::vector<std::string_view> parts;
  for (std::size_t b = 0;;) {
    const std::size_t c = item.find(':', b);
    parts.push_back(item.substr(b, c == std::string_view::npos ? std::string_view::npos : c - b));
    if (c == std::string_view::npos) break;
    b = c + 1;
  }
  StoreSpec s;
  const std::string_view head = parts[0];
  if (const auto f = parse_fp8(head)) {
    s.fp8 = *f;
    return parse_fp8_options(parts, s, why);
  }
  if (head == "q8_0" || head == "q4_0") {
    if (parts.size() > 1) {
      why = std::string(head) + " takes no options";
      return std::nullopt;
    }
    s.kind = head == "q8_0" ? StoreKind::q8_0 : StoreKind::q4_0;
    return s;
  }
  int bits = 0, group = 0;
  if (head.rfind("int4g", 0) == 0 || head.rfind("int8g", 0) == 0) {
    bits = head[3] - '0';
    const std::string_view gs = head.substr(5);
    const auto [p, ec] = std::from_chars(gs.data(), gs.data() + gs.size(), group);
    if (ec != std::errc() || p != gs.data() + gs.size() || (group != 32 && group != 64 && group != 128)) {
      why = quoted(head) + ": the group size is 32, 64 or 128";
      return std::nullopt;
    }
    s.kind = StoreKind::affine;
    s.affine = {bits, group, DType::f32};
    if (parts.size() > 2) {
      why = std::string(head) + " takes one option (the scales' dtype)";
      return std::nullopt;
    }
    if (parts.size() == 2) {
      const auto d = parse_dtype(parts[1]);
      if (!d || *d == DType::f64) {
        why = quoted(parts[1]) + " is not a scale dtype (f32, f16, bf16)";
        return std::nullopt;
      }
      s.affine.scale_dtype = *d;
    }
    return s;
  }
  why = "unknown store " + quoted(head) + " (e4m3fn, e5m2, q8_0, q4_0, int4gG, int8gG)";
  return std::nullopt;
}

std::string store_head_dim_problem(const StoreSpec& s, std::int64_t head_dim) {
  const std::int64_t m = s.kind == StoreKind::affine                                ? s.affine.group_size
                         : s.kind == StoreKind::q8_0 || s.kind == StoreKind::q4_0 ? kGgmlBlock
                                                                                  : 1;
  if (head_dim % m == 0) return "";
  return s.name() + " needs head_dim a multiple of " + std::to_string(m) + ", not " + std::to_string(head_dim);
}

std::string store_heads_problem(const StoreSpec& s, std::int64_t heads) {
  if (!s.given_scale() || s.scale != ScaleGranularity::per_head || std::cmp_equal(s.given.size(), heads)) return "";
  return s.name() + ": scale= lists " + std::to_string(s.given.size()) + " per-head scales for " + std::to_string(heads) +
         (heads == 1 ? " head" : " heads");
}

double given_scale(const StoreSpec& s, std::int64_t h) {
  return s.given.at(s.given.size() == 1 ? 0 : static_cast<std::size_t>(h));
}

std::int64_t fp8_scale_group(const StoreSpec& s, std::int64_t i, std::int64_t heads, std::int64_t head_dim) {
  const std::int64_t token = i / (heads * head_dim), head = i / head_dim % heads;
  if (s.given_scale()) return s.given.size() == 1 ? 0 : head;
  return scale_index(s.scale, token, head, heads);
}

std::int64_t scale_groups_per_token(const StoreSpec& s, std::int64_t heads, std::int64_t head_dim) {
  switch (s.kind) {
    case StoreKind::fp8:
      return s.given_scale() || s.whole_tensor_scale() ? 0 : s.scale == ScaleGranularity::per_token ? 1 : heads;
    case StoreKind::q8_0:
    case StoreKind::q4_0: return heads * head_dim / kGgmlBlock;
    case StoreKind::affine: return heads * head_dim / s.affine.group_size;
  }
  return 0;
}

}  // namespace ropecheck::quant
