// Hugging Face config.json import, following current transformers (v5, "G4" in variants.md 1.0):
// an explicit factor wins; it is derived from max_position_embeddings / original only when absent;
// Phi-3's top-level original_max_position_embeddings takes priority for longrope.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "ropecheck/core/spec_json.hpp"

namespace ropecheck {
namespace {

using nlohmann::json;

[[noreturn]] void config_fail(const std::string& key, const std::string& why) {
  throw SpecError("invalid Hugging Face config: '" + key + "': " + why);
}

const json* find(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return (it == obj.end() || it->is_null()) ? nullptr : &*it;
}

double number(const json& v, const std::string& key) {
  if (!v.is_number()) config_fail(key, "must be a number, got " + json_excerpt(v));
  const double d = v.get<double>();
  if (!std::isfinite(d)) config_fail(key, "must be finite, got " + json_excerpt(v));
  return d;
}

std::int64_t integer(const json& v, const std::string& key) {
  const double d = number(v, key);
  if (d != std::floor(d) || std::fabs(d) > 9e15) config_fail(key, "must be an integer, got " + json_excerpt(v));
  return static_cast<std::int64_t>(d);
}

// An integer that must fit an `int` field (rotary_dim, mrope_section): never narrowed silently.
int small_integer(const json& v, const std::string& key) {
  const std::int64_t i = integer(v, key);
  if (i < -(std::int64_t{1} << 30) || i > (std::int64_t{1} << 30))
    config_fail(key, "out of range (|value| must be <= 2^30), got " + v.dump());
  return static_cast<int>(i);
}

std::vector<double> numbers(const json& v, const std::string& key) {
  if (!v.is_array()) config_fail(key, "must be a list of numbers, got " + json_excerpt(v));
  std::vector<double> out;
  for (std::size_t i = 0; i < v.size(); ++i) out.push_back(number(v[i], key + "[" + std::to_string(i) + "]"));
  return out;
}

// Model types whose Hugging Face implementation pairs channels (2j, 2j+1).
RopeLayout layout_for_model_type(const std::string& mt) {
  static const std::set<std::string> interleaved = {"gptj",        "codegen",     "glm",       "glm4",
                                                    "chatglm",     "cohere",      "cohere2",   "deepseek_v2",
                                                    "deepseek_v3", "llama4",      "llama4_text", "roformer"};
  return interleaved.count(mt) ? RopeLayout::interleaved : RopeLayout::half_split;
}

// The rope parameter dict: v5 rope_parameters (possibly nested by layer type) or legacy rope_scaling.
json rope_dict(const json& cfg, const HfImportOptions& opt, std::string& where) {
  where = "rope_parameters";
  const json* rp = find(cfg, "rope_parameters");
  if (!rp) {
    where = "rope_scaling";
    rp = find(cfg, "rope_scaling");
  }
  if (!rp) return json::object();
  if (!rp->is_object()) config_fail(where, "must be an object, got " + json_excerpt(*rp));
  const bool nested = !rp->empty() && std::all_of(rp->begin(), rp->end(), [](const json& v) { return v.is_object(); });
  if (nested) {
    const json* sub = find(*rp, opt.layer_type.c_str());
    if (!sub) config_fail(where, "is nested by layer type and has no entry \"" + opt.layer_type + "\" (use --layer-type)");
    where += "." + opt.layer_type;
    return *sub;
  }
  return *rp;
}

// Keys of the rope dict each rope type reads; any other key in it is reported as ignored.
const std::set<std::string>& rope_keys_used(ScalingType t) {
  static const std::map<ScalingType, std::set<std::string>> used = {
      {ScalingType::none, {}},
      {ScalingType::linear, {"factor"}},
      {ScalingType::dynamic, {"factor"}},
      {ScalingType::yarn,
       {"factor", "attention_factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale",
        "mscale_all_dim", "truncate"}},
      {ScalingType::llama3, {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}},
      {ScalingType::longrope,
       {"factor", "attention_factor", "original_max_position_embeddings", "short_factor", "long_factor",
        "short_mscale", "long_mscale"}},
      {ScalingType::proportional, {"factor"}},
  };
  return used.at(t);
}

// Top-level keys the importer reads (some only for one rope type, checked separately).
const std::set<std::string>& top_level_keys_used() {
  static const std::set<std::string> used = {
      "rope_theta", "rotary_emb_base", "rope_scaling", "rope_parameters", "rope_local_base_freq",
      "partial_rotary_factor", "rotary_pct", "rotary_dim", "max_position_embeddings", "n_positions",
      "qk_rope_head_dim", "rope_interleave", "original_max_position_embeddings"};
  return used;
}

// A top-level key that may change the rotation: its name mentions rope, rotary, theta or positions.
bool may_affect_rope(const std::string& key) {
  for (const char* w : {"rope", "rotary", "theta", "position", "pos_emb"})
    if (key.find(w) != std::string::npos) return true;
  return false;
}

// A key as it may be shown in a one-line message: control bytes as '?', at most 80 bytes.
std::string shown(const std::string& key) {
  std::string out = key.substr(0, 80);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return key.size() > 80 ? out + "..." : out;
}

// The keys of the config that this import did not use although they may concern RoPE.
std::vector<std::string> ignored_keys(const json& full_cfg, const json& cfg, const json& rp, const std::string& where,
                                      bool rp_is_config_dict, ScalingType type, const std::string& type_name) {
  std::vector<std::string> out;
  const json* text = find(full_cfg, "text_config");
  if (text && !text->is_object()) out.push_back("'text_config': not an object, ignored (the top level is used)");
  const std::string prefix = &cfg == &full_cfg ? "" : "text_config.";
  if (&cfg != &full_cfg)
    for (const auto& [k, v] : full_cfg.items())
      if (may_affect_rope(k) && !v.is_null()) out.push_back("'" + shown(k) + "': ignored, text_config is used");
  for (const auto& [k, v] : cfg.items()) {
    if (!may_affect_rope(k)) continue;
    if (!top_level_keys_used().count(k)) {
      out.push_back("'" + prefix + shown(k) + "': not understood by ropecheck, ignored");
    } else if (k == "rope_scaling" && find(cfg, "rope_parameters") && !v.is_null()) {
      out.push_back("'" + prefix + k + "': ignored, rope_parameters is used");
    } else if (k == "original_max_position_embeddings" && type != ScalingType::longrope && !v.is_null()) {
      out.push_back("'" + prefix + k + "': not used by rope type \"" + type_name + "\", ignored");
    }
  }
  if (!rp_is_config_dict) return out;
  static const std::set<std::string> common = {"rope_type", "type", "rope_theta", "partial_rotary_factor",
                                               "mrope_section", "mrope_interleaved"};
  for (const auto& [k, v] : rp.items()) {
    if (common.count(k) || rope_keys_used(type).count(k) || v.is_null()) continue;
    static const std::set<std::string> known = {"factor",          "attention_factor", "original_max_position_embeddings",
                                                "beta_fast",       "beta_slow",        "mscale",
                                                "mscale_all_dim",  "truncate",         "low_freq_factor",
                                                "high_freq_factor", "short_factor",    "long_factor",
                                                "short_mscale",    "long_mscale"};
    out.push_back("'" + where + "." + shown(k) + "': " +
                  (known.count(k) ? "not used by rope type \"" + type_name + "\", ignored"
                                  : std::string("not understood by ropecheck, ignored")));
  }
  return out;
}

// The rope parameter dict the import reads, and its key path in messages.
struct RopeSource {
  json rp;
  std::string where;
  bool is_config_dict = true;  // false when built here (legacy Gemma 3 sliding layers)
};

RopeSource rope_source(const json& cfg, const HfImportOptions& opt) {
  RopeSource src;
  src.rp = rope_dict(cfg, opt, src.where);
  const bool nested = src.where.find('.') != std::string::npos;
  if (!nested && opt.layer_type != "full_attention") {
    // Legacy Gemma 3 configs: sliding layers use rope_local_base_freq with no scaling.
    const json* local = find(cfg, "rope_local_base_freq");
    if (opt.layer_type != "sliding_attention" || !local)
      config_fail("rope_parameters", "has no per-layer entry for layer type \"" + opt.layer_type + "\"");
    src.rp = json{{"rope_type", "default"}, {"rope_theta", *local}};
    src.where = "rope_local_base_freq";
    src.is_config_dict = false;
  }
  return src;
}

// Base: inside rope_parameters (v5), else top level; GPT-NeoX calls it rotary_emb_base.
double read_base(const json& cfg, const RopeSource& src) {
  if (const json* v = find(src.rp, "rope_theta")) return number(*v, src.where + ".rope_theta");
  if (const json* t = find(cfg, "rope_theta")) return number(*t, "rope_theta");
  if (const json* b = find(cfg, "rotary_emb_base")) return number(*b, "rotary_emb_base");
  return 10000.0;
}

// The rope type as the config names it, and the key it is under (for messages).
struct RopeTypeName {
  std::string type = "default";
  std::string key;
};

RopeTypeName read_rope_type(const RopeSource& src) {
  RopeTypeName t{"default", src.where + ".rope_type"};
  if (const json* v = find(src.rp, "rope_type")) {
    t.type = v->is_string() ? v->get<std::string>() : json_excerpt(*v);
  } else if (const json* v2 = find(src.rp, "type")) {
    t.type = v2->is_string() ? v2->get<std::string>() : json_excerpt(*v2);
    t.key = src.where + ".type";
  }
  if (t.type == "mrope") t.type = "default";  // Qwen2-VL: mrope changes pairing of streams, not frequencies
  return t;
}

// head_dim: explicit, else hidden_size / num_attention_heads (GPT-J: n_embd / n_head).
std::int64_t read_head_dim(const json& cfg) {
  std::int64_t head_dim = 0;
  if (const json* q = find(cfg, "qk_rope_head_dim")) {
    // DeepSeek-V2/V3: only the decoupled rope part is rotated; transformers sets head_dim to it.
    head_dim = integer(*q, "qk_rope_head_dim");
  } else if (const json* v = find(cfg, "head_dim")) {
    head_dim = integer(*v, "head_dim");
  } else {
    const json* hidden = find(cfg, "hidden_size");
    if (!hidden) hidden = find(cfg, "n_embd");
    const json* heads = find(cfg, "num_attention_heads");
    if (!heads) heads = find(cfg, "n_head");
    if (!hidden || !heads)
      config_fail("head_dim", "missing required key (and no hidden_size + num_attention_heads to derive it)");
    const std::int64_t h = integer(*heads, "num_attention_heads");
    if (h <= 0) config_fail("num_attention_heads", "must be > 0, got " + json_excerpt(*heads));
    head_dim = integer(*hidden, "hidden_size") / h;
  }
  if (head_dim <= 0) config_fail("head_dim", "must be > 0, got " + std::to_string(head_dim));
  if (head_dim > (1 << 20)) config_fail("head_dim", "too large: " + std::to_string(head_dim) + " (must be in [1, 2^20] = [1, 1048576])");
  return head_dim;
}

double read_partial_rotary_factor(const json& cfg, const RopeSource& src) {
  double prf = 1.0;
  if (const json* v = find(src.rp, "partial_rotary_factor"))
    prf = number(*v, src.where + ".partial_rotary_factor");
  else if (const json* v2 = find(cfg, "partial_rotary_factor"))
    prf = number(*v2, "partial_rotary_factor");
  else if (const json* v3 = find(cfg, "rotary_pct"))
    prf = number(*v3, "rotary_pct");
  if (!(prf > 0 && prf <= 1)) config_fail("partial_rotary_factor", "must be in (0, 1], got " + std::to_string(prf));
  return prf;
}

// The channels rotated (head_dim, rotary_dim) and max_position_embeddings; returns the partial rotary factor.
double read_dimensions(const json& cfg, const RopeSource& src, RopeSpec& r) {
  const std::int64_t head_dim = read_head_dim(cfg);
  r.head_dim = static_cast<int>(head_dim);
  const double prf = read_partial_rotary_factor(cfg, src);
  if (const json* v = find(cfg, "rotary_dim"))  // GPT-J / CodeGen
    r.rotary_dim = small_integer(*v, "rotary_dim");
  else
    r.rotary_dim = static_cast<int>(std::floor(static_cast<double>(head_dim) * prf));
  if (const json* v = find(cfg, "max_position_embeddings"))
    r.max_position_embeddings = integer(*v, "max_position_embeddings");
  else if (const json* v2 = find(cfg, "n_positions"))
    r.max_position_embeddings = integer(*v2, "n_positions");
  return prf;
}

// The pairing of channels: the model type's, rope_interleave's, or the caller's; returns the model type.
std::string read_layout(const json& cfg, const HfImportOptions& opt, RopeSpec& r) {
  std::string model_type;
  if (const json* v = find(cfg, "model_type"); v && v->is_string()) model_type = v->get<std::string>();
  r.layout = layout_for_model_type(model_type);
  // DeepSeek-V3 in transformers: rope_interleave picks the interleaved (true) or rotate_half (false) form.
  if (const json* v = find(cfg, "rope_interleave")) {
    if (!v->is_boolean()) config_fail("rope_interleave", "must be true or false, got " + v->dump().substr(0, 60));
    r.layout = v->get<bool>() ? RopeLayout::interleaved : RopeLayout::half_split;
  }
  if (opt.layout) r.layout = *opt.layout;
  return model_type;
}

void read_scaling_type(const RopeTypeName& name, double prf, RopeSpec& r) {
  const std::string& type = name.type;
  RopeScaling& s = r.scaling;
  if (type == "default") {
    s.type = ScalingType::none;
  } else if (type == "linear") {
    s.type = ScalingType::linear;
  } else if (type == "dynamic") {
    s.type = ScalingType::dynamic;
  } else if (type == "yarn") {
    s.type = ScalingType::yarn;
  } else if (type == "llama3") {
    s.type = ScalingType::llama3;
  } else if (type == "longrope" || type == "su") {
    s.type = ScalingType::longrope;
  } else if (type == "proportional") {
    s.type = ScalingType::proportional;
    // rope_angles = int(partial_rotary_factor * head_dim // 2); the rest of the pairs get frequency 0.
    r.rotary_dim = 2 * static_cast<int>(std::floor(prf * static_cast<double>(r.head_dim) / 2.0));
  } else {
    config_fail(name.key, "unknown rope type \"" + type +
                              "\" (known: default, linear, dynamic, yarn, llama3, longrope, proportional, mrope)");
  }
}

void read_longrope(const json& cfg, const json& rp, const std::string& w, RopeScaling& s) {
  if (const json* v = find(cfg, "original_max_position_embeddings"))  // Phi-3 keeps it at top level
    s.original_max_position_embeddings = integer(*v, "original_max_position_embeddings");
  if (const json* v = find(rp, "short_factor")) s.short_factor = numbers(*v, w + "short_factor");
  if (const json* v = find(rp, "long_factor")) s.long_factor = numbers(*v, w + "long_factor");
  // Phi-3.5-MoE (model_type phimoe): the attention factor per list; HF PhimoeRotaryEmbedding and vLLM
  // apply it instead of the derived sqrt(1 + ln f / ln L_orig) (1.2432 vs 1.1902 for that model).
  if (const json* v = find(rp, "short_mscale")) s.short_mscale = number(*v, w + "short_mscale");
  if (const json* v = find(rp, "long_mscale")) s.long_mscale = number(*v, w + "long_mscale");
  if (s.short_factor.empty()) config_fail(w + "short_factor", "missing required key for longrope");
  if (s.long_factor.empty()) config_fail(w + "long_factor", "missing required key for longrope");
}

void read_yarn(const json& rp, const std::string& w, RopeSpec& r) {
  RopeScaling& s = r.scaling;
  // transformers reads `get("beta_fast") or 32`: a stored 0 means the default too.
  if (const json* v = find(rp, "beta_fast"); v && number(*v, w + "beta_fast") != 0) s.beta_fast = v->get<double>();
  if (const json* v = find(rp, "beta_slow"); v && number(*v, w + "beta_slow") != 0) s.beta_slow = v->get<double>();
  if (const json* v = find(rp, "mscale")) s.mscale = number(*v, w + "mscale");
  if (const json* v = find(rp, "mscale_all_dim")) s.mscale_all_dim = number(*v, w + "mscale_all_dim");
  if (const json* v = find(rp, "truncate")) {
    if (!v->is_boolean()) config_fail(w + "truncate", "must be true or false, got " + json_excerpt(*v));
    s.truncate = v->get<bool>();
  }
  if (!s.original_max_position_embeddings && r.max_position_embeddings > 0)
    s.original_max_position_embeddings = r.max_position_embeddings;
}

void read_llama3(const json& rp, const std::string& w, RopeScaling& s) {
  if (const json* v = find(rp, "low_freq_factor")) s.low_freq_factor = number(*v, w + "low_freq_factor");
  else config_fail(w + "low_freq_factor", "missing required key for llama3");
  if (const json* v = find(rp, "high_freq_factor")) s.high_freq_factor = number(*v, w + "high_freq_factor");
  else config_fail(w + "high_freq_factor", "missing required key for llama3");
}

// The scaling's parameters: those every type may carry, then the type's own.
void read_scaling_parameters(const json& cfg, const RopeSource& src, const std::string& type, RopeSpec& r) {
  RopeScaling& s = r.scaling;
  const json& rp = src.rp;
  const std::string w = src.where + ".";
  if (const json* v = find(rp, "factor")) s.factor = number(*v, w + "factor");
  if (const json* v = find(rp, "attention_factor")) s.attention_factor = number(*v, w + "attention_factor");
  if (const json* v = find(rp, "original_max_position_embeddings"))
    s.original_max_position_embeddings = integer(*v, w + "original_max_position_embeddings");
  if (s.type == ScalingType::longrope) read_longrope(cfg, rp, w, s);
  if (s.type == ScalingType::yarn) read_yarn(rp, w, r);
  if (s.type == ScalingType::llama3) read_llama3(rp, w, s);
  if ((s.type == ScalingType::linear || s.type == ScalingType::dynamic || s.type == ScalingType::llama3) && !s.factor)
    config_fail(w + "factor", "missing required key for rope type \"" + type + "\"");
}

void read_mrope(const RopeSource& src, RopeSpec& r) {
  const json& rp = src.rp;
  const std::string w = src.where + ".";
  const json* sec = find(rp, "mrope_section");
  if (!sec) return;
  if (!sec->is_array() || sec->size() != 3) config_fail(w + "mrope_section", "must be a list of 3 integers");
  for (std::size_t i = 0; i < 3; ++i)
    r.mrope_section[i] = small_integer((*sec)[i], w + "mrope_section[" + std::to_string(i) + "]");
  bool inter = false;
  if (const json* v = find(rp, "mrope_interleaved")) {
    if (!v->is_boolean()) config_fail(w + "mrope_interleaved", "must be true or false, got " + json_excerpt(*v));
    inter = v->get<bool>();
  }
  r.mrope = inter ? MropeMode::interleaved : MropeMode::chunked;
}

// The Q/K RMSNorm stage of the model types that apply one before the rotation, with the config's
// rms_norm_eps (transformers' default 1e-6): Qwen3 (Qwen3RMSNorm, times w) and Gemma 3 (Gemma3RMSNorm,
// times 1 + w). The weights are not in config.json: golden generates them from the seed.
void read_qk_norm(const json& cfg, const std::string& model_type, RopeSpec& r) {
  const bool qwen3 = model_type == "qwen3" || model_type == "qwen3_moe";
  const bool gemma3 = model_type.rfind("gemma3", 0) == 0 && model_type.rfind("gemma3n", 0) != 0;
  if (!qwen3 && !gemma3) return;
  RmsNormStage n;
  if (const json* v = find(cfg, "rms_norm_eps")) {
    if (!v->is_number()) config_fail("rms_norm_eps", "must be a number, got " + json_excerpt(*v));
    n.eps = v->get<double>();
  }
  n.weight_form = gemma3 ? NormWeightForm::one_plus_w : NormWeightForm::w;
  r.q_norm = n;
  r.k_norm = n;
}

}  // namespace

EncodingSpec spec_from_hf_config(const json& full_cfg, const HfImportOptions& opt, std::vector<std::string>* ignored) {
  if (!full_cfg.is_object()) config_fail("(config)", "must be a JSON object");
  // Multimodal configs (Qwen3-VL, Gemma 3 multimodal) keep the language model under text_config.
  const json* text = find(full_cfg, "text_config");
  const json& cfg = (text && text->is_object()) ? *text : full_cfg;
  const RopeSource src = rope_source(cfg, opt);

  EncodingSpec spec;
  spec.name = opt.name;
  spec.family = Family::rope;
  RopeSpec& r = spec.rope;
  r.base = read_base(cfg, src);
  const RopeTypeName type = read_rope_type(src);
  const double prf = read_dimensions(cfg, src, r);
  const std::string model_type = read_layout(cfg, opt, r);
  read_scaling_type(type, prf, r);
  read_scaling_parameters(cfg, src, type.type, r);
  read_mrope(src, r);
  read_qk_norm(cfg, model_type, r);

  spec.source = "imported from a Hugging Face config.json (model_type \"" + model_type + "\")";
  validate(spec);
  std::vector<std::string> unused = ignored_keys(full_cfg, cfg, src.rp, src.where, src.is_config_dict, r.scaling.type,
                                                 type.type == "default" ? "default" : type.type);
  if (opt.strict && !unused.empty()) {
    std::string first = unused.front();
    if (first.ends_with(", ignored")) first.resize(first.size() - 9);
    throw SpecError("invalid Hugging Face config (--strict): " + first +
                    (unused.size() > 1 ? " (and " + std::to_string(unused.size() - 1) + " more)" : ""));
  }
  if (ignored) *ignored = std::move(unused);
  return spec;
}

}  // namespace ropecheck
