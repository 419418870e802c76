#include "ropecheck/golden/golden_merge.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <map>
#include <string>

#include "golden_files.hpp"
#include "golden_values.hpp"
#include "ropecheck/io/atomic_output.hpp"
#include "ropecheck/io/fd_io.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/io/memory_budget.hpp"
#include "ropecheck/io/sha256.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"

namespace ropecheck::golden {
using namespace ropecheck::io;  // tensors and files are this module's material
namespace {

std::string name_of(const std::filesystem::path& p) { return sanitize(p.string()); }

// The identity of the run a shard folder belongs to (golden_files.hpp).
nlohmann::json run_identity(const GoldenSet& g) {
  const std::string& first_file = g.files().front().file;
  return detail::run_identity(g.manifest(), g.shard()->shard.count, first_file.substr(first_file.rfind('.') + 1));
}

using detail::first_difference;

// One shard's file of a group, read front to back while the merged file is written.
struct PartFile {
  std::filesystem::path path;
  std::uint64_t bytes = 0;
  std::string sha256;  // from the part's manifest
  int fd = -1;
  std::uint64_t data_base = 0, cursor = 0;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> offsets;  // data_offsets per tensor
  Sha256 hash;
  ~PartFile() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void io_fail(const std::filesystem::path& p, const char* what) {
  throw InputError(std::string("merge: cannot ") + what + " '" + name_of(p) + "' (" + std::strerror(errno) + ")");
}

// A safetensors group merged without holding it: the merged file is written in file order (header,
// then each tensor's rows shard by shard), hashing its bytes, and every part is read front to back,
// hashing its bytes too (on a second thread): a part that no longer matches its manifest fails.
detail::TensorFileWriter::Finished merge_safetensors_group(std::vector<std::unique_ptr<PartFile>>& parts,
                                                           const std::vector<detail::TensorInfo>& layout,
                                                           const std::vector<std::string>& per_set,
                                                           const std::map<std::string, std::string>& metadata,
                                                           const std::filesystem::path& out) {
  const detail::SafetensorsHeader h = detail::safetensors_header(layout, metadata);
  const int ofd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (ofd < 0) io_fail(out, "write");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{ofd};
  Sha256 merged;
  std::uint64_t written = 0;
  auto emit = [&](std::span<const std::uint8_t> b) {
    merged.update(b);
    write_all(ofd, b, "merge", name_of(out));
    written += b.size();
  };
  emit(h.bytes);
  for (auto& p : parts) {  // each part's header: where its tensors lie
    std::uint8_t len[8];
    read_exact_at(p->fd, len, 0, "merge", name_of(p->path));
    const std::uint64_t n = detail::load_u64(len);
    if (n > (std::uint64_t{100} << 20) || 8 + n > p->bytes) throw InputError("manifest hash mismatch for " + name_of(p->path) + " (its header is not what ropecheck wrote)");
    std::vector<std::uint8_t> head(8 + n);
    read_exact_at(p->fd, head, 0, "merge", name_of(p->path));
    p->hash.update(head);
    p->data_base = p->cursor = 8 + n;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(head.begin() + 8, head.end());
      for (const auto& [k, v] : j.items())
        if (k != "__metadata__") p->offsets[k] = {v.at("data_offsets").at(0).get<std::uint64_t>(), v.at("data_offsets").at(1).get<std::uint64_t>()};
    } catch (const nlohmann::json::exception&) {
      throw InputError("manifest hash mismatch for " + name_of(p->path) + " (its header is not what ropecheck wrote)");
    }
  }
  std::vector<std::uint8_t> a(std::size_t{8} << 20);
  auto copy = [&](PartFile& p, std::uint64_t begin, std::uint64_t end, bool keep = true) {
    if (p.data_base + begin != p.cursor || end < begin || p.data_base + end > p.bytes)
      throw InputError("merge: '" + name_of(p.path) + "' is not laid out as ropecheck writes it");
    for (std::uint64_t at = begin; at < end;) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(end - at, a.size()));
      read_exact_at(p.fd, {a.data(), n}, p.data_base + at, "merge", name_of(p.path));
      const std::span<const std::uint8_t> piece(a.data(), n);
      std::future<void> part_hash = std::async(std::launch::async, [&] { p.hash.update(piece); });
      if (keep) emit(piece);
      part_hash.get();
      at += n;
      p.cursor += n;
    }
  };
  for (std::size_t i : h.order) {
    const detail::TensorInfo& t = layout[i];
    auto range = [&](PartFile& p) {
      const auto it = p.offsets.find(t.name);
      if (it == p.offsets.end()) throw InputError("merge: '" + name_of(p.path) + "' lacks tensor '" + t.name + "'");
      return it->second;
    };
    if (t.name == "positions" && t.shape.size() == 2) {  // [3, tokens]: stream rows, shard by shard
      for (std::int64_t s = 0; s < t.shape[0]; ++s)
        for (auto& p : parts) {
          const auto [b0, e0] = range(*p);
          const std::uint64_t row = (e0 - b0) / static_cast<std::uint64_t>(t.shape[0]);
          copy(*p, b0 + static_cast<std::uint64_t>(s) * row, b0 + static_cast<std::uint64_t>(s + 1) * row);
        }
    } else {
      // A tensor without a token axis (a given scale): the first shard's copy; the others read and hashed.
      const bool once = std::find(per_set.begin(), per_set.end(), t.name) != per_set.end();
      for (auto& p : parts) {
        const auto [b0, e0] = range(*p);
        copy(*p, b0, e0, !once || p == parts.front());
      }
    }
  }
  for (auto& p : parts)
    if (p->cursor != p->bytes || p->hash.hex() != p->sha256)
      throw InputError("manifest hash mismatch for " + name_of(p->path));
  return {written, merged.hex()};
}

// The shards given, with what merging them needs: in shard order, one run's N shards each once, their
// tokens back to back.
struct ShardSet {
  std::vector<GoldenSet> parts;    // as given (opt.parts)
  std::vector<std::size_t> order;  // indices into parts, in shard order
  std::int64_t tokens = 0;         // the merged set's
  std::uint64_t bytes = 0;         // every part's files together
};

// Every part's manifest (their data is verified as it is copied), each a shard.
ShardSet load_shards(const GoldenMergeOptions& opt) {
  if (opt.parts.empty()) throw SpecError("merge: no parts given");
  ShardSet s;
  for (const std::filesystem::path& p : opt.parts) {
    s.parts.push_back(load_golden_set(p, {.allow_shard = true, .verify_data = false}));
    if (!s.parts.back().shard())
      throw SpecError("merge: " + name_of(p) + " is a whole golden set, not a shard (written without --shard)");
    for (const ManifestFile& f : s.parts.back().files()) s.bytes += f.bytes;
  }
  return s;
}

// Every part must come from the same run.
void check_one_run(const GoldenMergeOptions& opt, const ShardSet& s) {
  const std::vector<GoldenSet>& parts = s.parts;
  const nlohmann::json id = run_identity(parts.front());
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const nlohmann::json other = run_identity(parts[i]);
    if (other == id) continue;
    const std::string what =
        first_difference(id, other) != "shard_count"
            ? detail::quoted_difference(id, other)
            : "'shard_count': " + name_of(opt.parts[0]) + " is shard " + parts[0].shard()->shard.text() + " but " +
                  name_of(opt.parts[i]) + " is shard " + parts[i].shard()->shard.text();
    throw SpecError("merge: " + name_of(opt.parts[0]) + " and " + name_of(opt.parts[i]) +
                    " are shards of different runs: they differ in " + what);
  }
}

// Shards 1..N, each exactly once, holding the set's tokens in order: s.order and s.tokens.
void order_shards(const GoldenMergeOptions& opt, ShardSet& s) {
  const std::vector<GoldenSet>& parts = s.parts;
  const int n = parts.front().shard()->shard.count;
  std::map<int, std::size_t> by_index;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const int index = parts[i].shard()->shard.index;
    const auto [it, fresh] = by_index.emplace(index, i);
    if (!fresh)
      throw SpecError("merge: shard " + parts[i].shard()->shard.text() + " is given twice: " + name_of(opt.parts[it->second]) +
                      " and " + name_of(opt.parts[i]));
  }
  const MissingShards missing = missing_shards(n, [&](int i) { return by_index.contains(i); });
  if (missing.count > 0)
    throw SpecError("merge: " + std::to_string(missing.count) + " of " + std::to_string(n) + " shards missing (" +
                    missing.listed + ")");
  const std::int64_t set_tokens = parts.front().shard()->set_tokens;
  for (const auto& [index, i] : by_index) {
    const GoldenShardInfo& info = *parts[i].shard();
    if (info.first_token != s.tokens || info.set_tokens != set_tokens)
      throw SpecError("merge: " + name_of(opt.parts[i]) + " (shard " + info.shard.text() + ") holds tokens from " +
                      std::to_string(info.first_token) + ", expected " + std::to_string(s.tokens) + ": an edited manifest?");
    s.tokens += parts[i].tokens();
    s.order.push_back(i);
  }
  if (s.tokens != set_tokens)
    throw SpecError("merge: the shards hold " + std::to_string(s.tokens) + " tokens, the set has " + std::to_string(set_tokens));
}

// safetensors parts are copied through a small buffer; .npz parts are loaded one shard at a time.
void check_resources(const GoldenMergeOptions& opt, const ShardSet& s) {
  const bool npz = s.parts.front().files().front().file.ends_with(".npz");
  std::uint64_t largest = 0;
  for (std::size_t i : s.order) {
    std::uint64_t b = 0;
    for (const ManifestFile& f : s.parts[i].files()) b += f.bytes;
    largest = std::max(largest, b);
  }
  require_memory((npz ? largest : 0) + (std::uint64_t{64} << 20), opt.max_memory,
                 "merging " + std::to_string(s.parts.size()) + " shards (" + format_bytes(s.bytes) + " in all)");
  require_disk(s.bytes, opt.out, "merge: the merged set");
}

// The merged manifest's record besides the files: the first shard's, with the positions' range and
// the rounding paths' counts over every shard.
detail::GoldenMeta merged_meta(const ShardSet& s) {
  const GoldenSet& g0 = s.parts.front();
  const nlohmann::json& m0 = g0.manifest();
  detail::GoldenMeta meta;
  meta.positions_argument = m0["positions"]["argument"].get<std::string>();
  meta.min_pos = m0["positions"]["min"].get<std::int64_t>();
  meta.max_pos = m0["positions"]["max"].get<std::int64_t>();
  for (std::size_t i : s.order) {
    const nlohmann::json& m = s.parts[i].manifest();
    meta.min_pos = std::min(meta.min_pos, m["positions"]["min"].get<std::int64_t>());
    meta.max_pos = std::max(meta.max_pos, m["positions"]["max"].get<std::int64_t>());
    meta.fast_values += m["reference"]["fast_path_values"].get<std::int64_t>();
    meta.fallback_values += m["reference"]["mpfr_fallback_values"].get<std::int64_t>();
  }
  if (g0.is_rope()) {
    meta.seq_len = *g0.seq_len();
    meta.attention_factor = g0.attention_factor_text();
  }
  meta.seed = m0["generator"]["seed"].get<std::uint64_t>();
  return meta;
}

// safetensors: each group's file streamed from the parts' files (merge_safetensors_group).
void merge_safetensors_files(const ShardSet& s, detail::GoldenFiles& files, const std::vector<std::string>& per_set) {
  for (std::size_t g = 0; g < files.groups(); ++g) {
    std::vector<std::unique_ptr<PartFile>> pf;
    for (std::size_t i : s.order) {
      const ManifestFile& mf = s.parts[i].files().at(g);
      auto p = std::make_unique<PartFile>();
      p->path = s.parts[i].dir() / mf.file;
      p->bytes = mf.bytes;
      p->sha256 = mf.sha256;
      p->fd = ::open(p->path.c_str(), O_RDONLY | O_CLOEXEC);
      if (p->fd < 0) io_fail(p->path, "read");
      pf.push_back(std::move(p));
    }
    files.set_finished(g, merge_safetensors_group(pf, files.layout(g), per_set, files.metadata(), files.path(g)));
  }
}

// .npz: shard by shard through the reader (which verifies each file's hash as it loads it), every
// tensor's rows to their place in the merged files; one shard's files are held at a time.
void merge_npz_files(const ShardSet& s, detail::GoldenFiles& files, const std::vector<std::string>& per_set) {
  const std::int64_t T = s.tokens;
  for (std::size_t i : s.order) {
    const std::int64_t first = s.parts[i].shard()->first_token, tokens = s.parts[i].tokens();
    GoldenSet part = load_golden_set(s.parts[i].dir(), {.allow_shard = true});
    for (std::size_t g = 0; g < files.groups(); ++g) {
      const detail::TensorFileWriter& w = files.group(g);
      for (std::size_t j = 0; j < w.tensors().size(); ++j) {
        const detail::TensorInfo& info = w.tensors()[j];
        const Tensor& t = part.tensor(info.name);
        if (info.name == "positions" && info.shape.size() == 2) {  // [3, tokens]: stream rows
          const std::size_t row = static_cast<std::size_t>(tokens) * 8;
          for (std::int64_t st = 0; st < info.shape[0]; ++st)
            w.write(j, static_cast<std::uint64_t>(st * T + first) * 8, {t.data.data() + static_cast<std::size_t>(st) * row, row});
        } else if (std::find(per_set.begin(), per_set.end(), info.name) != per_set.end()) {
          if (first == 0) w.write(j, 0, {t.data.data(), t.data.size()});  // no token axis: written once
        } else {
          const std::uint64_t row = t.data.size() / static_cast<std::uint64_t>(tokens);
          w.write(j, static_cast<std::uint64_t>(first) * row, {t.data.data(), t.data.size()});
        }
      }
    }
  }
}

}  // namespace

nlohmann::json merge_golden_shards(const GoldenMergeOptions& opt) {
  ShardSet shards = load_shards(opt);
  check_one_run(opt, shards);
  order_shards(opt, shards);
  check_resources(opt, shards);
  // Refuse an existing destination before the work.
  OutputFolder folder(opt.out, {.overwrite = opt.overwrite, .create_parents = true, .option = "--out", .command = "merge"});

  const GoldenSet& g0 = shards.parts.front();
  detail::GoldenMeta meta = merged_meta(shards);
  std::vector<DType> dtypes;
  for (const std::string& d : g0.dtypes()) dtypes.push_back(*parse_dtype(d));
  const FileFormat format = g0.files().front().file.ends_with(".npz") ? FileFormat::npz : FileFormat::safetensors;
  const bool fast = format == FileFormat::safetensors;
  // --stores: the stores file, the shards' last (no other attached file is written by shards).
  std::vector<io::DescribedFile> attached;
  std::vector<std::string> per_set;
  if (g0.is_rope()) {
    const ManifestTensor* q = g0.find("q");
    if (q == nullptr) throw InputError("merge: " + name_of(opt.parts[0]) + " holds no tensor 'q'");
    if (auto m = detail::merged_stores(g0.manifest(), shards.tokens, q->shape.at(1), q->shape.at(2))) {
      attached.push_back(std::move(m->layout));
      per_set = std::move(m->per_set);
    }
  }
  detail::GoldenFiles files(folder.tmp(), folder.out().string(), g0.spec(), shards.tokens, g0.heads(), dtypes, format,
                            fast ? detail::FilesMode::caller_writes : detail::FilesMode::create, attached);
  for (std::size_t f = 0; f < attached.size(); ++f) {
    meta.attached[attached[f].stem] = attached[f].record;
    meta.attached[attached[f].stem]["file"] = files.file_name(1 + dtypes.size() + f);
  }
  if (fast)
    merge_safetensors_files(shards, files, per_set);
  else
    merge_npz_files(shards, files, per_set);
  nlohmann::json manifest = files.finish(meta);
  folder.write("manifest.json", manifest.dump(2) + "\n");
  folder.commit();
  return manifest;
}

}  // namespace ropecheck::golden
