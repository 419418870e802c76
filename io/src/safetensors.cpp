#include "ropecheck/io/safetensors.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "ropecheck/io/detail/tensor_io.hpp"

namespace ropecheck::io {

namespace {

using nlohmann::json;
using detail::fail;

constexpr std::uint64_t kMaxHeaderSize = 100'000'000;  // the reference reader's MAX_HEADER_SIZE
constexpr std::size_t kMaxJsonDepth = 8;  // a valid header nests 3 deep: {name: {shape: [..]}}
constexpr std::string_view kMetadataKey = "__metadata__";

// Dtypes the safetensors format knows but TensorDType does not.
constexpr std::array<std::string_view, 12> kOtherSafetensorsDtypes = {
    "BOOL", "F4", "F6_E2M3", "F6_E3M2", "I8", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "C64", "U64"};

// Position in the crate's Dtype enum, which is declared in increasing alignment order.
int alignment_rank(TensorDType t) {
  switch (t) {
    case TensorDType::u8: return 0;
    case TensorDType::e5m2: return 1;
    case TensorDType::e4m3fn: return 2;
    case TensorDType::f16: return 3;
    case TensorDType::bf16: return 4;
    case TensorDType::i32: return 5;
    case TensorDType::u32: return 6;
    case TensorDType::f32: return 7;
    case TensorDType::f64: return 8;
    case TensorDType::i64: return 9;
  }
  return 0;
}

struct Entry {
  std::string name;
  TensorDType dtype = TensorDType::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

std::string nlohmann_message(const std::exception& e) {
  std::string_view m = e.what();
  if (const std::size_t p = m.find("] "); m.rfind("[json.exception", 0) == 0 && p != std::string_view::npos) {
    m.remove_prefix(p + 2);
  }
  return sanitize(m, 200);
}

// Parses the header text; rejects duplicate keys and deep nesting while parsing.
json parse_header_json(std::string_view text, std::string_view what) {
  // One entry per open container: the keys seen so far for an object, nullopt for an array.
  std::vector<std::optional<std::set<std::string>>> open;
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (open.size() >= kMaxJsonDepth) {
          fail(what, "header nests deeper than " + std::to_string(kMaxJsonDepth) +
                         " levels (a safetensors header nests 3)");
        }
        if (event == json::parse_event_t::object_start) {
          open.emplace_back(std::set<std::string>{});
        } else {
          open.emplace_back(std::nullopt);
        }
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!open.empty()) open.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open.empty() && open.back() && parsed.is_string()) {
          const std::string& k = parsed.get_ref<const std::string&>();
          if (!open.back()->insert(k).second) {
            if (open.size() == 1) {
              fail(what, k == kMetadataKey ? "duplicate __metadata__ in header"
                                           : "duplicate tensor name " + quote_name(k) + " in header");
            }
            fail(what, "duplicate key " + quote_name(k) + " in header");
          }
        }
        break;
      case json::parse_event_t::value:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    fail(what, "header is not valid JSON: " + nlohmann_message(e));
  }
}

std::optional<std::uint64_t> as_u64(const json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() == 0) return 0;  // "-0"
  return std::nullopt;
}

Entry parse_entry(const std::string& name, const json& v, std::string_view what) {
  const std::string tq = "tensor " + quote_name(name);
  if (!v.is_object()) fail(what, tq + ": header entry is not an object");
  Entry e;
  e.name = name;

  const auto dt = v.find("dtype");
  if (dt == v.end()) fail(what, tq + ": no \"dtype\"");
  if (!dt->is_string()) fail(what, tq + ": \"dtype\" is not a string");
  const std::string& dts = dt->get_ref<const std::string&>();
  if (const auto t = parse_safetensors_dtype(dts)) {
    e.dtype = *t;
  } else if (std::find(kOtherSafetensorsDtypes.begin(), kOtherSafetensorsDtypes.end(), dts) !=
             kOtherSafetensorsDtypes.end()) {
    fail(what, tq + ": unsupported dtype " + dts + " (supported: F64, F32, F16, BF16, I64, I32, U8, U32, F8_E4M3, F8_E5M2)");
  } else {
    fail(what, tq + ": unknown dtype " + quote_name(dts));
  }

  const auto sh = v.find("shape");
  if (sh == v.end()) fail(what, tq + ": no \"shape\"");
  if (!sh->is_array()) fail(what, tq + ": \"shape\" is not an array");
  e.shape.reserve(sh->size());
  for (const json& d : *sh) {
    const std::optional<std::uint64_t> u = as_u64(d);
    if (!u) {
      if (d.is_number_integer()) {
        fail(what, tq + ": negative dimension " + std::to_string(d.get<std::int64_t>()) + " in \"shape\"");
      }
      fail(what, tq + ": \"shape\" is not an array of non-negative integers");
    }
    if (*u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(what, tq + ": dimension " + std::to_string(*u) + " overflows (shape too large)");
    }
    e.shape.push_back(static_cast<std::int64_t>(*u));
  }

  const auto off = v.find("data_offsets");
  if (off == v.end()) fail(what, tq + ": no \"data_offsets\"");
  if (!off->is_array() || off->size() != 2 || !as_u64((*off)[0]) || !as_u64((*off)[1])) {
    fail(what, tq + ": \"data_offsets\" is not [BEGIN, END] with non-negative integers");
  }
  e.begin = *as_u64((*off)[0]);
  e.end = *as_u64((*off)[1]);
  return e;
}

void check_utf8_for_writing(std::string_view s, std::string_view role) {
  if (!detail::is_valid_utf8(s)) {
    throw InputError("cannot write safetensors: " + std::string(role) + " " + quote_name(s) + " is not valid UTF-8");
  }
}

// JSON string as serde_json writes it: escapes ", \, and control bytes; UTF-8 passes through.
void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

}  // namespace

std::vector<detail::TensorSpan> detail::safetensors_layout(std::span<const std::uint8_t> bytes, std::string_view what,
                                                          std::map<std::string, std::string>* metadata) {
  if (metadata) metadata->clear();
  const std::uint64_t size = bytes.size();
  if (size < 8) {
    fail(what, "file is " + std::to_string(size) + " bytes, too short for the 8-byte header length");
  }
  const std::uint64_t n = detail::load_u64(bytes.data());
  if (n > kMaxHeaderSize) {
    fail(what, "header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxHeaderSize) +
                   " bytes");
  }
  if (n > size - 8) {
    fail(what, "header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(size) +
                   " bytes)");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8, static_cast<std::size_t>(n));
  if (!detail::is_valid_utf8(text)) fail(what, "header is not valid UTF-8");
  if (text.starts_with("\xEF\xBB\xBF")) fail(what, "header starts with a byte-order mark");

  const json header = parse_header_json(text, what);
  if (!header.is_object()) fail(what, "header is not a JSON object");

  std::map<std::string, std::string> meta;
  std::vector<Entry> entries;
  entries.reserve(header.size());
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      if (value.is_null()) continue;  // the reference reader reads null as "no metadata"
      if (!value.is_object()) fail(what, "__metadata__ is not an object of strings");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) fail(what, "__metadata__ value for key " + quote_name(mk) + " is not a string");
        meta[mk] = mv.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(key, value, what));
  }

  // Validate the layout as the reference reader does: sorted by data_offsets, contiguous from 0.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  std::uint64_t expected_begin = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    const std::string tq = "tensor " + quote_name(e.name);
    const std::string offs = "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
    if (e.end < e.begin) fail(what, tq + ": " + offs + " end before begin");
    if (e.begin != expected_begin) {
      if (!previous) fail(what, tq + ": " + offs + ": the first tensor does not begin at 0");
      if (e.begin < expected_begin) {
        fail(what, tq + ": " + offs + " overlaps tensor " + quote_name(previous->name) + " (which ends at " +
                       std::to_string(expected_begin) + ")");
      }
      fail(what, tq + ": " + offs + " leaves a gap after tensor " + quote_name(previous->name) + " (which ends at " +
                     std::to_string(expected_begin) + ")");
    }
    const std::optional<std::uint64_t> nbytes = detail::checked_byte_size(e.shape, dtype_size(e.dtype));
    if (!nbytes) {
      fail(what, tq + ": shape " + shape_for_message(e.shape) + " overflows 64-bit sizes");
    }
    if (e.end - e.begin != *nbytes) {
      fail(what, tq + ": " + offs + " hold " + std::to_string(e.end - e.begin) + " bytes but " +
                     std::string(safetensors_name(e.dtype)) + " " + shape_for_message(e.shape) + " needs " +
                     std::to_string(*nbytes));
    }
    expected_begin = e.end;
    previous = &e;
  }
  const std::uint64_t data_size = size - 8 - n;
  if (expected_begin > data_size) {
    fail(what, "tensors need " + std::to_string(expected_begin) + " data bytes but the file has only " +
                   std::to_string(data_size) + " after the header (truncated or out of bounds)");
  }
  if (expected_begin < data_size) {
    fail(what, std::to_string(data_size - expected_begin) + " trailing bytes after the last tensor");
  }

  std::vector<TensorSpan> out;
  out.reserve(entries.size());
  for (Entry& e : entries)
    out.push_back({{std::move(e.name), e.dtype, std::move(e.shape)}, 8 + n + e.begin, e.end - e.begin});
  if (metadata) *metadata = std::move(meta);
  return out;
}

std::vector<Tensor> parse_safetensors(std::span<const std::uint8_t> bytes, std::string_view what,
                                      std::map<std::string, std::string>* metadata) {
  std::vector<detail::TensorSpan> layout = detail::safetensors_layout(bytes, what, metadata);
  std::vector<Tensor> out;
  out.reserve(layout.size());
  for (detail::TensorSpan& e : layout) {
    Tensor t;
    t.name = std::move(e.info.name);
    t.dtype = e.info.dtype;
    t.shape = std::move(e.info.shape);
    t.data.assign(bytes.data() + e.offset, bytes.data() + e.offset + e.bytes);
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<Tensor> read_safetensors(const std::filesystem::path& path, std::map<std::string, std::string>* metadata) {
  const std::vector<std::uint8_t> bytes = detail::read_file(path);
  return parse_safetensors(bytes, path.string(), metadata);
}

detail::SafetensorsHeader detail::safetensors_header(const std::vector<TensorInfo>& tensors,
                                                     const std::map<std::string, std::string>& metadata) {
  std::vector<std::size_t> order;
  order.reserve(tensors.size());
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = tensors[i];
    check_utf8_for_writing(t.name, "tensor name");
    if (t.name == kMetadataKey) throw InputError("cannot write safetensors: a tensor is named __metadata__");
    if (!names.insert(t.name).second) {
      throw InputError("cannot write safetensors: duplicate tensor name " + quote_name(t.name));
    }
    order.push_back(i);
  }
  for (const auto& [k, v] : metadata) {
    check_utf8_for_writing(k, "metadata key");
    check_utf8_for_writing(v, "metadata value");
  }
  std::sort(order.begin(), order.end(), [&](std::size_t ia, std::size_t ib) {
    const TensorInfo& a = tensors[ia];
    const TensorInfo& b = tensors[ib];
    const int ra = alignment_rank(a.dtype), rb = alignment_rank(b.dtype);
    if (ra != rb) return ra > rb;
    return a.name < b.name;
  });

  std::string h = "{";
  bool first = true;
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    for (const auto& [k, v] : metadata) {
      if (!first) h += ',';
      first = false;
      append_json_string(h, k);
      h += ':';
      append_json_string(h, v);
    }
    h += '}';
    first = false;
  }
  std::uint64_t offset = 0;
  for (std::size_t i : order) {
    const TensorInfo& t = tensors[i];
    if (!first) h += ',';
    first = false;
    append_json_string(h, t.name);
    h += ":{\"dtype\":\"";
    h += safetensors_name(t.dtype);
    h += "\",\"shape\":[";
    for (std::size_t d = 0; d < t.shape.size(); ++d) {
      if (d) h += ',';
      h += std::to_string(t.shape[d]);
    }
    h += "],\"data_offsets\":[";
    h += std::to_string(offset);
    h += ',';
    offset += t.data_bytes();
    h += std::to_string(offset);
    h += "]}";
  }
  h += '}';
  h.append((8 - h.size() % 8) % 8, ' ');
  if (h.size() > kMaxHeaderSize) {
    throw InputError("cannot write safetensors: header of " + std::to_string(h.size()) + " bytes exceeds the " +
                      std::to_string(kMaxHeaderSize) + "-byte limit");
  }
  SafetensorsHeader out;
  out.bytes.reserve(8 + h.size());
  detail::put_u64(out.bytes, h.size());
  out.bytes.insert(out.bytes.end(), h.begin(), h.end());
  out.order = std::move(order);
  return out;
}

std::vector<std::uint8_t> serialize_safetensors(const std::vector<Tensor>& tensors,
                                                const std::map<std::string, std::string>& metadata) {
  std::vector<detail::TensorInfo> infos;
  infos.reserve(tensors.size());
  std::uint64_t data = 0;
  for (const Tensor& t : tensors) {
    validate(t);
    infos.push_back({t.name, t.dtype, t.shape});
    data += t.data.size();
  }
  const detail::SafetensorsHeader h = detail::safetensors_header(infos, metadata);
  std::vector<std::uint8_t> out;
  out.reserve(h.bytes.size() + data);
  out.insert(out.end(), h.bytes.begin(), h.bytes.end());
  for (std::size_t i : h.order) out.insert(out.end(), tensors[i].data.begin(), tensors[i].data.end());
  return out;
}

}  // namespace ropecheck::io
