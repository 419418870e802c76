#include "ropecheck/core/spec_json.hpp"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

namespace ropecheck {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& key, const std::string& why) {
  throw SpecError("invalid spec: '" + key + "': " + why);
}

std::string show(const json& v) { return json_excerpt(v); }

// Appends a rendering of v, stopping once `out` holds `limit` characters; containers below `levels`
// are shown as [...] / {...}, so the recursion is bounded whatever the value's depth.
void excerpt_into(std::string& out, const json& v, std::size_t limit, int levels) {
  if (out.size() >= limit) return;
  if (v.is_array() || v.is_object()) {
    const bool arr = v.is_array();
    if (levels <= 0 || v.empty()) {
      out += v.empty() ? (arr ? "[]" : "{}") : (arr ? "[...]" : "{...}");
      return;
    }
    out += arr ? '[' : '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end() && out.size() < limit; ++it) {
      if (!first) out += ",";
      first = false;
      if (!arr) {
        excerpt_into(out, json(it.key()), limit, 0);
        out += ":";
      }
      excerpt_into(out, it.value(), limit, levels - 1);
    }
    out += arr ? ']' : '}';
    return;
  }
  if (v.is_string()) {
    // Dump only a prefix of a long string: a 100 MB value costs nothing here.
    const std::string& s = v.get_ref<const std::string&>();
    const json head = s.size() > limit ? json(s.substr(0, limit)) : v;
    out += head.dump(-1, ' ', false, json::error_handler_t::replace);
    return;
  }
  out += v.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Rejects keys outside `allowed`, so that a typo never silently means a default.
void check_keys(const json& obj, const std::string& where, const std::set<std::string>& allowed) {
  for (const auto& [k, v] : obj.items()) {
    if (!allowed.count(k)) fail(where.empty() ? k : where + "." + k, "unknown key");
  }
}

const json& require_object(const json& j, const std::string& key) {
  if (!j.is_object()) fail(key, "must be a JSON object, got " + show(j));
  return j;
}

double get_number(const json& j, const std::string& key) {
  if (!j.is_number()) fail(key, "must be a number, got " + show(j));
  const double v = j.get<double>();
  if (!std::isfinite(v)) fail(key, "must be finite, got " + show(j));
  return v;
}

std::int64_t get_int(const json& j, const std::string& key) {
  if (j.is_number_integer()) return j.get<std::int64_t>();
  if (j.is_number_float()) {
    const double v = j.get<double>();
    if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.2e18) return static_cast<std::int64_t>(v);
  }
  fail(key, "must be an integer, got " + show(j));
}

int get_small_int(const json& j, const std::string& key) {
  const std::int64_t v = get_int(j, key);
  if (v < -(1 << 30) || v > (1 << 30)) fail(key, "out of range, got " + show(j));
  return static_cast<int>(v);
}

bool get_bool(const json& j, const std::string& key) {
  if (!j.is_boolean()) fail(key, "must be true or false, got " + show(j));
  return j.get<bool>();
}

std::string get_string(const json& j, const std::string& key) {
  if (!j.is_string()) fail(key, "must be a string, got " + show(j));
  return j.get<std::string>();
}

std::vector<double> get_number_list(const json& j, const std::string& key) {
  if (!j.is_array()) fail(key, "must be a list of numbers, got " + show(j));
  std::vector<double> out;
  for (std::size_t i = 0; i < j.size(); ++i) out.push_back(get_number(j[i], key + "[" + std::to_string(i) + "]"));
  return out;
}

const json& at(const json& obj, const std::string& where, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) fail(where + "." + key, "missing required key");
  return *it;
}

ScalingType parse_scaling_type(const std::string& s, const std::string& key) {
  if (s == "none" || s == "default") return ScalingType::none;
  if (s == "linear") return ScalingType::linear;
  if (s == "dynamic") return ScalingType::dynamic;
  if (s == "yarn") return ScalingType::yarn;
  if (s == "llama3") return ScalingType::llama3;
  if (s == "longrope" || s == "su") return ScalingType::longrope;
  if (s == "proportional") return ScalingType::proportional;
  fail(key, "unknown rope type \"" + s +
                "\" (known: none/default, linear, dynamic, yarn, llama3, longrope, proportional)");
}

RopeLayout parse_layout(const std::string& s, const std::string& key) {
  if (s == "half_split" || s == "neox") return RopeLayout::half_split;
  if (s == "interleaved" || s == "gptj") return RopeLayout::interleaved;
  fail(key, "must be \"half_split\" or \"interleaved\", got \"" + s + "\"");
}

RopeScaling parse_scaling(const json& j) {
  const std::string w = "rope.scaling";
  require_object(j, w);
  check_keys(j, w,
             {"type", "factor", "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow",
              "mscale", "mscale_all_dim", "truncate", "low_freq_factor", "high_freq_factor", "short_factor",
              "long_factor", "short_mscale", "long_mscale"});
  RopeScaling s;
  s.type = parse_scaling_type(get_string(at(j, w, "type"), w + ".type"), w + ".type");
  auto opt = [&](const char* k) -> const json* {
    auto it = j.find(k);
    return (it == j.end() || it->is_null()) ? nullptr : &*it;
  };
  if (auto* v = opt("factor")) s.factor = get_number(*v, w + ".factor");
  if (auto* v = opt("original_max_position_embeddings"))
    s.original_max_position_embeddings = get_int(*v, w + ".original_max_position_embeddings");
  if (auto* v = opt("attention_factor")) s.attention_factor = get_number(*v, w + ".attention_factor");
  if (auto* v = opt("beta_fast")) s.beta_fast = get_number(*v, w + ".beta_fast");
  if (auto* v = opt("beta_slow")) s.beta_slow = get_number(*v, w + ".beta_slow");
  if (auto* v = opt("mscale")) s.mscale = get_number(*v, w + ".mscale");
  if (auto* v = opt("mscale_all_dim")) s.mscale_all_dim = get_number(*v, w + ".mscale_all_dim");
  if (auto* v = opt("truncate")) s.truncate = get_bool(*v, w + ".truncate");
  if (auto* v = opt("low_freq_factor")) s.low_freq_factor = get_number(*v, w + ".low_freq_factor");
  if (auto* v = opt("high_freq_factor")) s.high_freq_factor = get_number(*v, w + ".high_freq_factor");
  if (s.type == ScalingType::llama3) {
    at(j, w, "low_freq_factor");  // required: report "missing", not a default of 0
    at(j, w, "high_freq_factor");
  }
  if (auto* v = opt("short_factor")) s.short_factor = get_number_list(*v, w + ".short_factor");
  if (auto* v = opt("long_factor")) s.long_factor = get_number_list(*v, w + ".long_factor");
  if (auto* v = opt("short_mscale")) s.short_mscale = get_number(*v, w + ".short_mscale");
  if (auto* v = opt("long_mscale")) s.long_mscale = get_number(*v, w + ".long_mscale");
  return s;
}

RmsNormStage parse_norm(const json& j, const std::string& w) {
  require_object(j, w);
  check_keys(j, w, {"eps", "weight_form", "weight"});
  RmsNormStage n;
  n.eps = get_number(at(j, w, "eps"), w + ".eps");
  if (j.contains("weight_form")) {
    const std::string f = get_string(j["weight_form"], w + ".weight_form");
    if (f == "w")
      n.weight_form = NormWeightForm::w;
    else if (f == "1+w")
      n.weight_form = NormWeightForm::one_plus_w;
    else
      fail(w + ".weight_form", "must be \"w\" (Qwen3) or \"1+w\" (Gemma 3), got \"" + f + "\"");
  }
  if (j.contains("weight")) n.weight = get_number_list(j["weight"], w + ".weight");
  return n;
}

json norm_to_json(const RmsNormStage& n) {
  json o{{"eps", n.eps}, {"weight_form", std::string(to_string(n.weight_form))}};
  if (!n.weight.empty()) o["weight"] = n.weight;
  return o;
}

RopeSpec parse_rope(const json& j) {
  const std::string w = "rope";
  require_object(j, w);
  check_keys(j, w, {"head_dim", "rotary_dim", "rotary_offset", "key_layout", "base", "layout", "max_position_embeddings",
                    "scaling", "mrope", "q_norm", "k_norm"});
  RopeSpec r;
  r.head_dim = get_small_int(at(j, w, "head_dim"), "rope.head_dim");
  r.rotary_dim = j.contains("rotary_dim") ? get_small_int(j["rotary_dim"], "rope.rotary_dim") : r.head_dim;
  r.base = get_number(at(j, w, "base"), "rope.base");
  r.layout = parse_layout(get_string(at(j, w, "layout"), "rope.layout"), "rope.layout");
  if (j.contains("max_position_embeddings"))
    r.max_position_embeddings = get_int(j["max_position_embeddings"], "rope.max_position_embeddings");
  if (j.contains("scaling")) r.scaling = parse_scaling(j["scaling"]);
  if (j.contains("mrope")) {
    const json& m = require_object(j["mrope"], "rope.mrope");
    check_keys(m, "rope.mrope", {"section", "interleaved"});
    const json& sec = at(m, "rope.mrope", "section");
    if (!sec.is_array() || sec.size() != 3) fail("rope.mrope.section", "must be a list of 3 integers, got " + show(sec));
    for (std::size_t i = 0; i < 3; ++i)
      r.mrope_section[i] = get_small_int(sec[i], "rope.mrope.section[" + std::to_string(i) + "]");
    const bool inter = m.contains("interleaved") && get_bool(m["interleaved"], "rope.mrope.interleaved");
    r.mrope = inter ? MropeMode::interleaved : MropeMode::chunked;
  }
  if (j.contains("q_norm")) r.q_norm = parse_norm(j["q_norm"], "rope.q_norm");
  if (j.contains("k_norm")) r.k_norm = parse_norm(j["k_norm"], "rope.k_norm");
  if (j.contains("rotary_offset")) r.rotary_offset = get_small_int(j["rotary_offset"], "rope.rotary_offset");
  if (j.contains("key_layout")) {
    const std::string k = get_string(j["key_layout"], "rope.key_layout");
    if (k == "per_head")
      r.key_layout = KeyLayout::per_head;
    else if (k == "k_pe")
      r.key_layout = KeyLayout::k_pe;
    else
      fail("rope.key_layout", "must be \"per_head\" or \"k_pe\", got \"" + k + "\"");
  }
  return r;
}

SinusoidalSpec parse_sinusoidal(const json& j) {
  const std::string w = "sinusoidal";
  require_object(j, w);
  check_keys(j, w, {"d_model", "base", "layout", "frequencies", "position_offset"});
  SinusoidalSpec s;
  s.d_model = get_small_int(at(j, w, "d_model"), "sinusoidal.d_model");
  if (j.contains("base")) s.base = get_number(j["base"], "sinusoidal.base");
  const std::string layout = get_string(at(j, w, "layout"), "sinusoidal.layout");
  if (layout == "interleaved")
    s.layout = SinusoidalLayout::interleaved;
  else if (layout == "concatenated")
    s.layout = SinusoidalLayout::concatenated;
  else
    fail("sinusoidal.layout", "must be \"interleaved\" or \"concatenated\", got \"" + layout + "\"");
  const std::string freq = get_string(at(j, w, "frequencies"), "sinusoidal.frequencies");
  if (freq == "vaswani")
    s.frequencies = SinusoidalFrequencies::vaswani;
  else if (freq == "half_dim_minus_one")
    s.frequencies = SinusoidalFrequencies::half_dim_minus_one;
  else
    fail("sinusoidal.frequencies", "must be \"vaswani\" or \"half_dim_minus_one\", got \"" + freq + "\"");
  if (j.contains("position_offset")) s.position_offset = get_int(j["position_offset"], "sinusoidal.position_offset");
  return s;
}

}  // namespace

std::string json_excerpt(const json& v, std::size_t max_chars) {
  std::string s;
  excerpt_into(s, v, max_chars + 1, 3);
  if (s.size() > max_chars) s = s.substr(0, max_chars > 3 ? max_chars - 3 : 0) + "...";
  // dump() escapes control characters inside strings; keys and numbers hold none. Belt and braces:
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return s;
}

json parse_json_text(std::string_view text, const std::string& what) {
  // The parser itself is iterative; the depth check runs as it goes, so a deep value is refused
  // before a tree is built (copying or dumping one would recurse once per level).
  const json::parser_callback_t limit = [&](int depth, json::parse_event_t event, json&) -> bool {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      throw SpecError("malformed JSON in '" + what + "': nests deeper than " + std::to_string(kMaxJsonDepth) +
                      " levels");
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), limit);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number overflow (1e999)
    std::string m = e.what();
    if (const auto p = m.find("] "); m.rfind("[json.exception", 0) == 0 && p != std::string::npos) m = m.substr(p + 2);
    throw SpecError("malformed JSON in '" + what + "': " + m);
  }
}

EncodingSpec spec_from_json(const json& j) {
  require_object(j, "(spec)");
  check_keys(j, "", {"name", "family", "source", "notes", "rope", "sinusoidal"});
  EncodingSpec spec;
  spec.name = get_string(at(j, "(spec)", "name"), "name");
  const std::string fam = get_string(at(j, "(spec)", "family"), "family");
  if (fam == "rope") {
    spec.family = Family::rope;
    if (j.contains("sinusoidal")) fail("sinusoidal", "not allowed when family is \"rope\"");
    spec.rope = parse_rope(at(j, "(spec)", "rope"));
  } else if (fam == "sinusoidal") {
    spec.family = Family::sinusoidal;
    if (j.contains("rope")) fail("rope", "not allowed when family is \"sinusoidal\"");
    spec.sinusoidal = parse_sinusoidal(at(j, "(spec)", "sinusoidal"));
  } else {
    fail("family", "must be \"rope\" or \"sinusoidal\", got \"" + fam + "\"");
  }
  if (j.contains("source")) spec.source = get_string(j["source"], "source");
  if (j.contains("notes")) spec.notes = get_string(j["notes"], "notes");
  validate(spec);
  return spec;
}

json spec_to_json(const EncodingSpec& spec) {
  json j;
  j["name"] = spec.name;
  j["family"] = std::string(to_string(spec.family));
  if (!spec.source.empty()) j["source"] = spec.source;
  if (!spec.notes.empty()) j["notes"] = spec.notes;
  if (spec.family == Family::rope) {
    const RopeSpec& r = spec.rope;
    json o;
    o["head_dim"] = r.head_dim;
    o["rotary_dim"] = r.rotary_dim;
    // Written only when set, so every spec without the MLA layout keeps its bytes (pinned golden sets).
    if (r.rotary_offset != 0) o["rotary_offset"] = r.rotary_offset;
    if (r.key_layout != KeyLayout::per_head) o["key_layout"] = std::string(to_string(r.key_layout));
    o["base"] = r.base;
    o["layout"] = std::string(to_string(r.layout));
    o["max_position_embeddings"] = r.max_position_embeddings;
    const RopeScaling& s = r.scaling;
    json sc;
    sc["type"] = std::string(to_string(s.type));
    if (s.factor) sc["factor"] = *s.factor;
    if (s.original_max_position_embeddings) sc["original_max_position_embeddings"] = *s.original_max_position_embeddings;
    if (s.attention_factor) sc["attention_factor"] = *s.attention_factor;
    if (s.type == ScalingType::yarn) {
      sc["beta_fast"] = s.beta_fast;
      sc["beta_slow"] = s.beta_slow;
      if (s.mscale) sc["mscale"] = *s.mscale;
      if (s.mscale_all_dim) sc["mscale_all_dim"] = *s.mscale_all_dim;
      sc["truncate"] = s.truncate;
    }
    if (s.type == ScalingType::llama3) {
      sc["low_freq_factor"] = s.low_freq_factor;
      sc["high_freq_factor"] = s.high_freq_factor;
    }
    if (s.type == ScalingType::longrope) {
      sc["short_factor"] = s.short_factor;
      sc["long_factor"] = s.long_factor;
      if (s.short_mscale) sc["short_mscale"] = *s.short_mscale;
      if (s.long_mscale) sc["long_mscale"] = *s.long_mscale;
    }
    o["scaling"] = sc;
    if (r.mrope != MropeMode::none)
      o["mrope"] = {{"section", r.mrope_section}, {"interleaved", r.mrope == MropeMode::interleaved}};
    // Written only when present, so every spec without the stage keeps its bytes.
    if (r.q_norm) o["q_norm"] = norm_to_json(*r.q_norm);
    if (r.k_norm) o["k_norm"] = norm_to_json(*r.k_norm);
    j["rope"] = o;
  } else {
    const SinusoidalSpec& s = spec.sinusoidal;
    j["sinusoidal"] = {{"d_model", s.d_model},
                       {"base", s.base},
                       {"layout", std::string(to_string(s.layout))},
                       {"frequencies", std::string(to_string(s.frequencies))},
                       {"position_offset", s.position_offset}};
  }
  return j;
}

json read_json_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw SpecError("cannot read '" + path.string() + "': not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SpecError("cannot read '" + path.string() + "': no such file or not readable");
  std::ostringstream buf;
  buf << in.rdbuf();
  return parse_json_text(buf.str(), path.string());
}

EncodingSpec load_spec_file(const std::filesystem::path& path) { return spec_from_json(read_json_file(path)); }

EncodingSpec load_hf_config_file(const std::filesystem::path& path, const HfImportOptions& options,
                                 std::vector<std::string>* ignored) {
  return spec_from_hf_config(read_json_file(path), options, ignored);
}

}  // namespace ropecheck
