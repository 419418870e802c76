#include "ropecheck/golden/golden_shared.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "golden_files.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/core/spec_json.hpp"
#include "ropecheck/io/atomic_output.hpp"

namespace ropecheck::golden {
using namespace ropecheck::io;  // tensors and files are this module's material
namespace {

namespace fs = std::filesystem;

constexpr const char* kRecordFormat = "ropecheck-golden-shared-shard";

[[noreturn]] void fail(const std::string& message) { throw SpecError(message); }

std::string errno_text() { return std::strerror(errno); }

// A JSON file of the staging folder; nullopt when it cannot be read or parsed.
std::optional<nlohmann::json> read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

bool is_record_name(const std::string& name) { return name.starts_with("shard-") && name.ends_with(".json"); }

}  // namespace

fs::path shared_staging_folder(const fs::path& out, const std::string& option) {
  fs::path p = output_folder_path(out, option);
  p += ".staging";
  return p;
}

std::string shard_record_name(const Shard& shard) {
  return "shard-" + std::to_string(shard.index) + "-of-" + std::to_string(shard.count) + ".json";
}

fs::path join_shared_staging(const fs::path& out, const nlohmann::json& identity, const Shard& shard, bool overwrite) {
  const std::string option = "--shared-out";
  const fs::path dest = output_folder_path(out, option), staging = shared_staging_folder(out, option);
  std::error_code ec;
  if (fs::exists(fs::symlink_status(dest, ec)) && !overwrite)
    fail(option + ": '" + out.string() + "' already exists (use --overwrite to replace it)");
  fs::create_directories(staging, ec);
  if (ec) fail(option + ": cannot create the staging folder '" + staging.string() + "' (" + ec.message() + ")");
  // The first shard publishes the run's identity with one link(), which never replaces a file: of
  // shards of different runs starting together, exactly one owns the folder.
  const fs::path run = staging / "run.json";
  const nlohmann::json mine = nlohmann::json::parse(identity.dump());
  write_file_durably(run, mine.dump(2) + "\n", option, /*replace=*/false);
  const std::optional<nlohmann::json> theirs = read_json(run);
  if (!theirs) fail(option + ": '" + run.string() + "' is not a run identity written by ropecheck; remove '" + staging.string() + "'");
  if (*theirs != mine)
    fail(option + ": the staging folder '" + staging.string() + "' belongs to another run: it differs in " +
         detail::quoted_difference(*theirs, mine) + "; finish it with `ropecheck merge --shared " + dest.string() +
         "` or remove it");
  const fs::path set = staging / "set";
  if (::mkdir(set.c_str(), 0777) == 0) {
    // A new set: records left from an earlier one (a merge killed after moving its set) no longer hold.
    for (fs::directory_iterator it(staging, ec), end; !ec && it != end; it.increment(ec))
      if (is_record_name(it->path().filename().string())) fs::remove(it->path(), ec);
  } else if (errno != EEXIST) {
    fail(option + ": cannot create '" + set.string() + "' (" + errno_text() + ")");
  }
  // This shard's old record, if any, does not hold while it writes its ranges again.
  fs::remove(staging / shard_record_name(shard), ec);
  return set;
}

void write_shard_record(const fs::path& out, const Shard& shard, const nlohmann::json& record) {
  const std::string option = "--shared-out";
  nlohmann::json r = record;
  r["format"] = kRecordFormat;
  write_file_durably(shared_staging_folder(out, option) / shard_record_name(shard), r.dump(2) + "\n", option,
                     /*replace=*/true);
}

namespace {

// merge --shared; JSON errors in run.json or a record are reported by the caller.
nlohmann::json finalize(const SharedMergeOptions& opt) {
  const std::string option = "--shared";
  const fs::path dest = output_folder_path(opt.out, option), staging = shared_staging_folder(opt.out, option);
  const std::string where = "merge --shared " + opt.out.string();
  std::error_code ec;
  if (!fs::is_directory(staging, ec) || !fs::is_directory(staging / "set", ec))
    fail(where + ": no staging folder '" + staging.string() + "' (written by `golden --shard I/N --shared-out " +
         opt.out.string() + "`)");
  // Refuses an existing DIR (without --overwrite) before any work.
  OutputFolder folder(dest, {.overwrite = opt.overwrite, .create_parents = true, .option = option, .command = "merge"},
                      staging / "set");
  const std::optional<nlohmann::json> id = read_json(staging / "run.json");
  if (!id || !id->contains("shard_count") || !(*id)["shard_count"].is_number_integer())
    fail(where + ": '" + (staging / "run.json").string() + "' is missing or not a run identity written by ropecheck");
  const int n = (*id)["shard_count"].get<int>();

  // The completion records: one per shard, each of this run.
  std::map<int, std::pair<std::string, nlohmann::json>> records;
  for (fs::directory_iterator it(staging, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!is_record_name(name)) continue;
    const std::optional<nlohmann::json> r = read_json(it->path());
    if (!r || r->value("format", "") != kRecordFormat || !r->contains("run") || !r->contains("shard"))
      fail(where + ": '" + name + "' is not a shard record written by ropecheck");
    if ((*r)["run"] != *id)
      fail(where + ": '" + name + "' is a shard of another run: it differs in " +
           detail::quoted_difference(*id, (*r)["run"]));
    const int index = (*r)["shard"].value("index", 0);
    const auto [at, fresh] = records.emplace(index, std::pair{name, *r});
    if (!fresh)
      fail(where + ": shard " + std::to_string(index) + "/" + std::to_string(n) + " is recorded twice: '" +
           at->second.first + "' and '" + name + "'");
  }
  if (ec) fail(where + ": cannot read '" + staging.string() + "' (" + ec.message() + ")");
  const MissingShards missing = missing_shards(n, [&](int i) { return records.contains(i); });
  if (missing.count > 0)
    fail(where + ": " + std::to_string(missing.count) + " of " + std::to_string(n) +
         " shards have no completion record (" + missing.listed +
         "): not run, still running, or killed; run them (again)");
  for (const auto& [index, named] : records)
    if (index < 1 || index > n) fail(where + ": '" + named.first + "' names a shard outside 1.." + std::to_string(n));

  // The shards tile the set's tokens in order.
  std::int64_t next = 0, set_tokens = 0;
  detail::GoldenMeta meta;
  meta.positions_argument = (*id)["positions"]["argument"].get<std::string>();
  bool first_record = true;
  for (const auto& [index, named] : records) {
    const nlohmann::json& r = named.second;
    const nlohmann::json& s = r["shard"];
    set_tokens = s.at("set_tokens").get<std::int64_t>();
    if (s.at("first_token").get<std::int64_t>() != next)
      fail(where + ": '" + named.first + "' holds tokens from " + s["first_token"].dump() + ", expected " +
           std::to_string(next) + ": an edited record?");
    next += s.at("tokens").get<std::int64_t>();
    const std::int64_t lo = r.at("positions").at("min").get<std::int64_t>(), hi = r["positions"].at("max").get<std::int64_t>();
    meta.min_pos = first_record ? lo : std::min(meta.min_pos, lo);
    meta.max_pos = first_record ? hi : std::max(meta.max_pos, hi);
    first_record = false;
    meta.fast_values += r.at("reference").at("fast_path_values").get<std::int64_t>();
    meta.fallback_values += r["reference"].at("mpfr_fallback_values").get<std::int64_t>();
  }
  if (next != set_tokens)
    fail(where + ": the shards hold " + std::to_string(next) + " tokens, the set has " + std::to_string(set_tokens));

  const EncodingSpec spec = spec_from_json((*id)["spec"]);
  const bool rope = spec.family == Family::rope;
  if (rope) {
    meta.seq_len = (*id)["seq_len"].get<std::int64_t>();
    meta.attention_factor = (*id)["attention_factor"].get<std::string>();
  }
  meta.seed = (*id)["generator"]["seed"].get<std::uint64_t>();
  std::vector<DType> dtypes;
  for (const auto& d : (*id)["dtypes"]) dtypes.push_back(*parse_dtype(d.get<std::string>()));
  const FileFormat format = (*id)["file_format"] == "npz" ? FileFormat::npz : FileFormat::safetensors;
  detail::GoldenFiles files(staging / "set", where, spec, set_tokens, (*id)["generator"]["heads"].get<int>(), dtypes,
                            format, detail::FilesMode::shared_finish);
  if (format == FileFormat::npz) {
    // Each member's CRC-32 from the ranges the shards wrote (their records), without reading the data.
    for (std::size_t g = 0; g < files.groups(); ++g) {
      detail::TensorFileWriter& w = files.group(g);
      for (std::size_t j = 0; j < w.tensors().size(); ++j) {
        const detail::TensorInfo& t = w.tensors()[j];
        std::vector<detail::CrcRange> ranges;
        for (const auto& [index, named] : records) {
          const nlohmann::json& c = named.second.value("crc32", nlohmann::json::object());
          if (!c.contains(files.file_name(g)) || !c[files.file_name(g)].contains(t.name)) continue;
          for (const auto& r : c[files.file_name(g)][t.name])
            ranges.push_back({r.at(0).get<std::uint64_t>(), r.at(1).get<std::uint64_t>(), r.at(2).get<std::uint32_t>()});
        }
        const std::optional<std::uint32_t> crc = detail::combine_crc_ranges(std::move(ranges), t.data_bytes());
        if (!crc)
          fail(where + ": the shards' records do not cover tensor '" + t.name + "' of " + files.file_name(g) +
               " exactly: an edited record?");
        w.set_data_crc(j, *crc);
      }
    }
  }
  nlohmann::json manifest = files.finish(meta);
  folder.write("manifest.json", manifest.dump(2) + "\n");
  folder.commit();
  fs::remove_all(staging, ec);  // run.json and the records: the set is in place
  return manifest;
}

}  // namespace

nlohmann::json finalize_shared_golden_set(const SharedMergeOptions& opt) {
  try {
    return finalize(opt);
  } catch (const nlohmann::json::exception& e) {
    fail("merge --shared " + opt.out.string() + ": the staging folder's run.json or records are not what ropecheck writes (" +
         e.what() + ")");
  }
}

}  // namespace ropecheck::golden
