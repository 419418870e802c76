#include <mpfr.h>

#include "golden_files.hpp"
#include "ropecheck/core/spec_json.hpp"
#include "ropecheck/golden/input_generator.hpp"

#ifndef ROPECHECK_VERSION
#define ROPECHECK_VERSION "unknown"
#endif

namespace ropecheck::golden::detail {
using namespace ropecheck::io;  // tensors and files are this module's material
using namespace ropecheck::io::detail;  // the tensor files\' layout and writer

GoldenFiles::GoldenFiles(std::filesystem::path dir, std::string context, const EncodingSpec& spec, std::int64_t tokens,
                         int heads, std::vector<DType> dtypes, FileFormat format, FilesMode mode, std::span<const DescribedFile> attached)
    : dir_(std::move(dir)), spec_(spec), heads_(heads), dtypes_(std::move(dtypes)), format_(format) {
  const bool rope = spec.family == Family::rope;
  const std::string ext = format == FileFormat::safetensors ? ".safetensors" : ".npz";
  metadata_ = {{"producer", "ropecheck " ROPECHECK_VERSION}, {"spec", spec.name}};
  std::vector<TensorInfo> inputs;
  if (rope && spec.rope.mrope != MropeMode::none)
    inputs.push_back({"positions", TensorDType::i64, {3, tokens}});
  else
    inputs.push_back({"positions", TensorDType::i64, {tokens}});
  if (rope) {
    const std::int64_t D = spec.rope.head_dim;
    inputs.push_back({"q", TensorDType::f32, {tokens, heads, D}});
    if (spec.rope.key_layout == KeyLayout::k_pe)  // MLA: one key per token, no head axis
      inputs.push_back({"k_pe", TensorDType::f32, {tokens, spec.rope.rotary_dim}});
    else
      inputs.push_back({"k", TensorDType::f32, {tokens, heads, D}});
  }
  names_.push_back("inputs" + ext);
  layout_.push_back(std::move(inputs));
  for (DType d : dtypes_) {
    const std::string s(to_string(d));
    const TensorDType t = tensor_dtype(d);
    std::vector<TensorInfo> group;
    if (rope) {
      const std::int64_t D = spec.rope.head_dim, P = rope_pairs(spec.rope);
      group = {{"cos." + s, t, {tokens, P}},
               {"sin." + s, t, {tokens, P}},
               {"q_rot." + s, t, {tokens, heads, D}},
               spec.rope.key_layout == KeyLayout::k_pe ? TensorInfo{"k_pe_rot." + s, t, {tokens, spec.rope.rotary_dim}}
                                                       : TensorInfo{"k_rot." + s, t, {tokens, heads, D}}};
    } else {
      group = {{"pe." + s, t, {tokens, spec.sinusoidal.d_model}}};
    }
    names_.push_back("outputs_" + s + ext);
    layout_.push_back(std::move(group));
  }
  for (const DescribedFile& f : attached) {  // after the rotation's files: their group numbers stay
    std::vector<TensorInfo> group;
    std::vector<std::string> meanings;
    for (const DescribedTensor& t : f.tensors) {
      group.push_back({t.tensor.name, t.tensor.dtype, t.tensor.shape});
      meanings.push_back(t.meaning);
    }
    names_.push_back(f.stem + ext);
    layout_.push_back(std::move(group));
    attached_.push_back({f.role, std::move(meanings)});
  }
  finished_.resize(layout_.size());
  using Mode = TensorFileWriter::Mode;
  if (mode != FilesMode::caller_writes) {
    const Mode m = mode == FilesMode::create         ? Mode::create
                   : mode == FilesMode::shared_write ? Mode::shared_write
                                                     : Mode::shared_finish;
    for (std::size_t g = 0; g < layout_.size(); ++g)
      writers_.push_back(std::make_unique<TensorFileWriter>(path(g), layout_[g], format, metadata_, context, m));
  }
}

std::filesystem::path GoldenFiles::path(std::size_t g) const { return dir_ / names_.at(g); }

void GoldenFiles::write_attached(std::span<const DescribedFile> attached) {
  for (std::size_t f = 0; f < attached.size(); ++f)
    for (std::size_t j = 0; j < attached[f].tensors.size(); ++j)
      group(1 + dtypes_.size() + f).write(j, 0, attached[f].tensors[j].tensor.data);
}

nlohmann::json GoldenFiles::finish(const GoldenMeta& meta) {
  if (!writers_.empty()) {  // read back and hashed in parallel, largest file first (tensor_file_writer.hpp)
    std::vector<TensorFileWriter*> writers;
    for (const auto& w : writers_) writers.push_back(w.get());
    finished_ = finish_in_parallel(writers);
  }
  nlohmann::json files = nlohmann::json::array();
  for (std::size_t g = 0; g < layout_.size(); ++g)
    files.push_back({{"file", names_[g]}, {"bytes", finished_[g].bytes}, {"sha256", finished_[g].sha256}});
  return manifest(meta, std::move(files));
}

nlohmann::json GoldenFiles::manifest(const GoldenMeta& meta, nlohmann::json files) const {
  const bool rope = spec_.family == Family::rope;
  nlohmann::json tensors = nlohmann::json::array();
  auto describe = [&](const TensorInfo& t, const std::string& file, const std::string& role, const std::string& meaning,
                      bool folded) {
    nlohmann::json j = {{"name", t.name},          {"file", file},       {"dtype", std::string(to_string(t.dtype))},
                        {"shape", t.shape},        {"role", role},       {"meaning", meaning},
                        {"attention_factor_folded", folded}};
    if (format_ == FileFormat::npz && t.dtype == TensorDType::bf16) j["npy_storage"] = "uint16 bit patterns";
    if (t.dtype == TensorDType::e4m3fn || t.dtype == TensorDType::e5m2) {  // .npy has no FP8 type
      j["ml_dtypes"] = t.dtype == TensorDType::e4m3fn ? "float8_e4m3fn" : "float8_e5m2";
      if (format_ == FileFormat::npz) j["npy_storage"] = "uint8 bit patterns";
    }
    tensors.push_back(j);
  };
  std::int64_t tokens = 0;
  for (std::size_t g = 0; g < layout_.size(); ++g) {
    const std::string& file = names_[g];
    if (const std::size_t a = 1 + dtypes_.size(); g >= a) {
      const Attached& at = attached_[g - a];
      for (std::size_t j = 0; j < layout_[g].size(); ++j) describe(layout_[g][j], file, at.role, at.meanings[j], false);
      continue;
    }
    for (const TensorInfo& t : layout_[g]) {
      if (g == 0) {
        if (t.name == "positions") {
          tokens = t.shape.back();
          describe(t, file, "input",
                   t.shape.size() == 2 ? "position of each token, streams (t, h, w) x tokens" : "position of each token",
                   false);
        } else {
          describe(t, file, "input",
                   "input " + t.name + (t.name == "k_pe" ? " [tokens, rotary_dim] (no head axis)" : " [tokens, heads, head_dim]") +
                       " from " + kGeneratorName + " v" +
                       std::to_string(kGeneratorVersion) + ", exactly representable in bf16",
                   false);
        }
        continue;
      }
      const std::string base = t.name.substr(0, t.name.find('.'));
      const std::string rounding = ", correctly rounded once to " + std::string(to_string(dtypes_[g - 1]));
      if (base == "cos" || base == "sin")
        describe(t, file, "output", base + " of the angle of each pair (frequency order), no attention factor" + rounding,
                 false);
      else if (base == "pe")
        describe(t, file, "output", "sinusoidal encoding row of each token's position" + rounding, false);
      else if (base == "k_pe_rot")
        describe(t, file, "output",
                 "k_pe (the key shared by every head) rotated by RoPE, attention factor folded in" + rounding, true);
      else
        describe(t, file, "output",
                 base.substr(0, 1) + " rotated by RoPE, attention factor folded into the rotated channels, "
                                     "pass-through channels copied" + rounding,
                 true);
    }
  }

  std::vector<std::string> dtype_names;
  for (DType d : dtypes_) dtype_names.emplace_back(to_string(d));
  nlohmann::json m = {
      {"format", meta.shard.is_null() ? "ropecheck-golden" : "ropecheck-golden-shard"},
      {"format_version", 1},
      {"ropecheck_version", ROPECHECK_VERSION},
      {"spec", spec_to_json(spec_)},
      {"seq_len", rope ? nlohmann::json(meta.seq_len) : nlohmann::json(nullptr)},
      {"attention_factor", rope ? nlohmann::json(meta.attention_factor) : nlohmann::json(nullptr)},
      {"positions",
       {{"argument", meta.positions_argument},
        {"tokens", tokens},
        {"streams", rope && spec_.rope.mrope != MropeMode::none ? 3 : 1},
        {"min", meta.min_pos},
        {"max", meta.max_pos}}},
      {"generator",
       {{"name", kGeneratorName}, {"version", kGeneratorVersion}, {"seed", meta.seed}, {"heads", rope ? heads_ : 0}}},
      {"reference",
       {{"backend", "MPFR via Boost.Multiprecision"},
        {"mpfr_version", mpfr_get_version()},
        {"rounding", "round-to-nearest-even, once, from the exact value"},
        {"method",
         "double-double evaluation with a proven error bound; values whose rounding is in doubt are recomputed "
         "with MPFR at increasing precision (Ziv)"},
        {"fast_path_values", meta.fast_values},
        {"mpfr_fallback_values", meta.fallback_values}}},
      {"dtypes", dtype_names},
      {"files", files},
      {"tensors", tensors}};
  if (!meta.shard.is_null()) m["shard"] = meta.shard;
  for (const auto& [key, record] : meta.attached.items()) m[key] = record;
  return m;
}

nlohmann::json run_identity(nlohmann::json id, int shard_count, const std::string& file_format) {
  for (const char* k : {"files", "tensors", "shard"}) id.erase(k);
  for (const char* k : {"tokens", "min", "max"}) id["positions"].erase(k);
  for (const char* k : {"fast_path_values", "mpfr_fallback_values"}) id["reference"].erase(k);
  id["shard_count"] = shard_count;
  id["file_format"] = file_format;
  return id;
}

std::string first_difference(const nlohmann::json& a, const nlohmann::json& b) {
  for (const char* k : {"ropecheck_version", "format_version", "spec", "positions", "generator", "dtypes", "file_format",
                        "shard_count", "seq_len", "attention_factor", "reference"})
    if (a.contains(k) != b.contains(k) || (a.contains(k) && a[k] != b[k])) return k;
  for (const auto& [k, v] : a.items())
    if (!b.contains(k) || b[k] != v) return k;
  for (const auto& [k, v] : b.items())
    if (!a.contains(k)) return k;
  return "?";
}

std::string quoted_difference(const nlohmann::json& a, const nlohmann::json& b) {
  const std::string k = first_difference(a, b);
  std::string s = "'" + k + "'";
  if (a.contains(k) && b.contains(k) && a[k].is_primitive() && b[k].is_primitive())
    s += " (" + a[k].dump() + " vs " + b[k].dump() + ")";
  return s;
}

}  // namespace ropecheck::golden::detail
