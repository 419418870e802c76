// The store names of golden --stores (quantized_store_spec.hpp).
#include <charconv>
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

}  // namespace

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
    for (std::size_t i = 1; i < parts.size(); ++i) {
      if (const auto o = parse_fp8_overflow(parts[i])) {
        s.overflow = *o;
      } else if (const auto g = parse_scale_granularity(parts[i]);
                 g == ScaleGranularity::per_token || g == ScaleGranularity::per_token_head) {
        s.scale = *g;
      } else {
        why = quoted(parts[i]) + " is not an FP8 option (saturate, nonfinite, per-token, per-token-head)";
        return std::nullopt;
      }
    }
    return s;
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

std::int64_t scale_groups_per_token(const StoreSpec& s, std::int64_t heads, std::int64_t head_dim) {
  switch (s.kind) {
    case StoreKind::fp8: return s.scale == ScaleGranularity::per_token ? 1 : heads;
    case StoreKind::q8_0:
    case StoreKind::q4_0: return heads * head_dim / kGgmlBlock;
    case StoreKind::affine: return heads * head_dim / s.affine.group_size;
  }
  return 0;
}

}  // namespace ropecheck::quant
