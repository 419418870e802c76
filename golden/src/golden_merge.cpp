#include "ropecheck/golden/golden_merge.hpp"

#include <algorithm>
#include <map>
#include <string>

#include "golden_content.hpp"
#include "ropecheck/golden/atomic_output.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/golden/memory_budget.hpp"
#include "ropecheck/golden/tensor.hpp"
#include "tensor_io_detail.hpp"

namespace ropecheck::golden {
namespace {

std::string name_of(const std::filesystem::path& p) { return detail::sanitize(p.string()); }

// What every shard of one run shares: the manifest without what differs between shards.
nlohmann::json run_identity(const GoldenSet& g) {
  nlohmann::json id = g.manifest();
  for (const char* k : {"files", "tensors", "shard"}) id.erase(k);
  for (const char* k : {"tokens", "min", "max"}) id["positions"].erase(k);
  for (const char* k : {"fast_path_values", "mpfr_fallback_values"}) id["reference"].erase(k);
  id["shard_count"] = g.shard()->shard.count;
  const std::string& first_file = g.files().front().file;
  id["file_format"] = first_file.substr(first_file.rfind('.') + 1);
  return id;
}

// The key that tells the user most: the version and the run's definition before its consequences.
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

}  // namespace

nlohmann::json merge_golden_shards(const GoldenMergeOptions& opt) {
  if (opt.parts.empty()) throw SpecError("merge: no parts given");
  std::vector<GoldenSet> parts;
  std::uint64_t bytes = 0;
  for (const std::filesystem::path& p : opt.parts) {
    parts.push_back(load_golden_set(p, {.allow_shard = true}));
    if (!parts.back().shard())
      throw SpecError("merge: " + name_of(p) + " is a whole golden set, not a shard (written without --shard)");
    for (const ManifestFile& f : parts.back().files()) bytes += f.bytes;
  }
  // Every part must come from the same run.
  const nlohmann::json id = run_identity(parts.front());
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const nlohmann::json other = run_identity(parts[i]);
    if (other != id) {
      const std::string k = first_difference(id, other);
      std::string detail;
      if (k == "shard_count")
        detail = ": " + name_of(opt.parts[0]) + " is shard " + parts[0].shard()->shard.text() + " but " +
                 name_of(opt.parts[i]) + " is shard " + parts[i].shard()->shard.text();
      else if (id.contains(k) && other.contains(k) && id[k].is_primitive() && other[k].is_primitive())
        detail = " (" + id[k].dump() + " vs " + other[k].dump() + ")";
      throw SpecError("merge: " + name_of(opt.parts[0]) + " and " + name_of(opt.parts[i]) +
                      " are shards of different runs: they differ in '" + k + "'" + detail);
    }
  }
  // Shards 1..N, each exactly once.
  const int n = parts.front().shard()->shard.count;
  std::map<int, std::size_t> by_index;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const int index = parts[i].shard()->shard.index;
    const auto [it, fresh] = by_index.emplace(index, i);
    if (!fresh)
      throw SpecError("merge: shard " + parts[i].shard()->shard.text() + " is given twice: " + name_of(opt.parts[it->second]) +
                      " and " + name_of(opt.parts[i]));
  }
  std::string missing;
  int n_missing = 0;
  for (int i = 1; i <= n; ++i)
    if (!by_index.contains(i) && n_missing++ < 8) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
  if (n_missing > 0)
    throw SpecError("merge: " + std::to_string(n_missing) + " of " + std::to_string(n) + " shards missing (" + missing +
                    (n_missing > 8 ? ", ..." : "") + ")");
  std::vector<const GoldenSet*> sets;
  std::int64_t next = 0;
  for (const auto& [index, i] : by_index) {
    const GoldenShardInfo& s = *parts[i].shard();
    if (s.first_token != next || s.set_tokens != parts.front().shard()->set_tokens)
      throw SpecError("merge: " + name_of(opt.parts[i]) + " (shard " + s.shard.text() + ") holds tokens from " +
                      std::to_string(s.first_token) + ", expected " + std::to_string(next) + ": an edited manifest?");
    next += parts[i].tokens();
    sets.push_back(&parts[i]);
  }
  if (next != parts.front().shard()->set_tokens)
    throw SpecError("merge: the shards hold " + std::to_string(next) + " tokens, the set has " +
                    std::to_string(parts.front().shard()->set_tokens));
  // One shard's files at a time are held (the reader loads a file whole); the merged files are written
  // piece by piece.
  std::uint64_t largest = 0;
  for (const GoldenSet* g : sets) {
    std::uint64_t b = 0;
    for (const ManifestFile& f : g->files()) b += f.bytes;
    largest = std::max(largest, b);
  }
  require_memory(largest + (std::uint64_t{64} << 20), opt.max_memory,
                 "merging " + std::to_string(parts.size()) + " shards (" + format_bytes(bytes) + " in all)");

  // Refuse an existing destination before the work.
  OutputFolder folder(opt.out, {.overwrite = opt.overwrite, .create_parents = true, .option = "--out", .command = "merge"});

  const GoldenSet& g0 = parts.front();
  const nlohmann::json& m0 = g0.manifest();
  detail::GoldenMeta meta;
  meta.positions_argument = m0["positions"]["argument"].get<std::string>();
  meta.min_pos = m0["positions"]["min"].get<std::int64_t>();
  meta.max_pos = m0["positions"]["max"].get<std::int64_t>();
  for (const GoldenSet* g : sets) {
    meta.min_pos = std::min(meta.min_pos, g->manifest()["positions"]["min"].get<std::int64_t>());
    meta.max_pos = std::max(meta.max_pos, g->manifest()["positions"]["max"].get<std::int64_t>());
    meta.fast_values += g->manifest()["reference"]["fast_path_values"].get<std::int64_t>();
    meta.fallback_values += g->manifest()["reference"]["mpfr_fallback_values"].get<std::int64_t>();
  }
  if (g0.is_rope()) {
    meta.seq_len = *g0.seq_len();
    meta.attention_factor = g0.attention_factor_text();
  }
  meta.seed = m0["generator"]["seed"].get<std::uint64_t>();
  std::vector<DType> dtypes;
  for (const std::string& d : g0.dtypes()) dtypes.push_back(*parse_dtype(d));
  const std::int64_t T = next;
  const FileFormat format = g0.files().front().file.ends_with(".npz") ? FileFormat::npz : FileFormat::safetensors;
  detail::GoldenFiles files(folder, g0.spec(), T, g0.heads(), dtypes, format);

  // Shard by shard, every tensor's rows go to their place in the merged files.
  for (const auto& [index, i] : by_index) {
    const std::int64_t first = parts[i].shard()->first_token, tokens = parts[i].tokens();
    for (std::size_t g = 0; g < files.groups(); ++g) {
      const detail::TensorFileWriter& w = files.group(g);
      for (std::size_t j = 0; j < w.tensors().size(); ++j) {
        const detail::TensorInfo& info = w.tensors()[j];
        const Tensor& t = parts[i].tensor(info.name);
        if (info.name == "positions" && info.shape.size() == 2) {  // [3, tokens]: stream rows
          const std::size_t row = static_cast<std::size_t>(tokens) * 8;
          for (std::int64_t s = 0; s < info.shape[0]; ++s)
            w.write(j, static_cast<std::uint64_t>(s * T + first) * 8,
                    {t.data.data() + static_cast<std::size_t>(s) * row, row});
        } else {
          const std::uint64_t row = t.data.size() / static_cast<std::uint64_t>(tokens);
          w.write(j, static_cast<std::uint64_t>(first) * row, {t.data.data(), t.data.size()});
        }
      }
    }
    parts[i] = GoldenSet();  // frees its tensors
  }
  nlohmann::json manifest = files.finish(meta);
  folder.commit();
  return manifest;
}

}  // namespace ropecheck::golden
