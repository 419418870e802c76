#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <mutex>

#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/io/sha256.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/spec_json.hpp"
#include "golden_set_state.hpp"
#include "sample_check.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"

namespace ropecheck::golden {
using namespace ropecheck::io;  // tensors and files are this module's material

namespace {

// Why a file the manifest lists cannot be read as one: missing, or what else stands there (a FIFO or a
// device would block or never end; a folder is no data file).
std::string not_a_data_file(const std::filesystem::path& p, const std::string& listed) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string name = quote_name(listed);
  switch (fs::status(p, ec).type()) {
    case fs::file_type::not_found: return "missing file " + name + " listed in the manifest";
    case fs::file_type::directory: return name + " listed in the manifest is a folder, not a file";
    case fs::file_type::fifo: return name + " listed in the manifest is a FIFO (named pipe), not a regular file";
    case fs::file_type::character: return name + " listed in the manifest is a character device, not a regular file";
    case fs::file_type::block: return name + " listed in the manifest is a block device, not a regular file";
    case fs::file_type::socket: return name + " listed in the manifest is a socket, not a regular file";
    default: return name + " listed in the manifest is not a regular file (" + (ec ? ec.message() : "unknown type") + ")";
  }
}

[[noreturn]] void fail(const std::string& where, const std::string& problem) {
  throw InputError(where + ": " + problem);
}

std::string manifest_where(const std::filesystem::path& dir) { return sanitize((dir / "manifest.json").string()); }

const nlohmann::json& key(const nlohmann::json& obj, const char* k, const std::string& where, const std::string& ctx) {
  if (!obj.is_object()) fail(where, ctx + " must be a JSON object");
  const auto it = obj.find(k);
  if (it == obj.end()) fail(where, "missing key '" + ctx + (ctx.empty() ? "" : ".") + k + "'");
  return *it;
}

std::string get_string(const nlohmann::json& obj, const char* k, const std::string& where, const std::string& ctx) {
  const nlohmann::json& v = key(obj, k, where, ctx);
  if (!v.is_string()) fail(where, "'" + ctx + (ctx.empty() ? "" : ".") + k + "' must be a string");
  return v.get<std::string>();
}

std::int64_t get_int(const nlohmann::json& obj, const char* k, const std::string& where, const std::string& ctx) {
  const nlohmann::json& v = key(obj, k, where, ctx);
  if (!v.is_number_integer()) fail(where, "'" + ctx + (ctx.empty() ? "" : ".") + k + "' must be an integer");
  return v.get<std::int64_t>();
}

bool plain_file_name(const std::string& f) {
  if (f.empty() || f.size() > 255 || f[0] == '.') return false;
  for (unsigned char c : f)
    if (c == '/' || c == '\\' || c < 0x20 || c == 0x7F || c == ':') return false;
  return true;
}

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::vector<std::int64_t> get_shape(const nlohmann::json& v, const std::string& where, const std::string& ctx) {
  if (!v.is_array() || v.size() > 8) fail(where, ctx + ": 'shape' must be an array of at most 8 integers");
  std::vector<std::int64_t> shape;
  for (const auto& d : v) {
    if (!d.is_number_integer() || d.get<std::int64_t>() < 0) fail(where, ctx + ": 'shape' must hold non-negative integers");
    shape.push_back(d.get<std::int64_t>());
  }
  return shape;
}

}  // namespace

GoldenSet::GoldenSet() : s_(std::make_unique<State>()) {}
GoldenSet::~GoldenSet() = default;
GoldenSet::GoldenSet(GoldenSet&&) noexcept = default;
GoldenSet& GoldenSet::operator=(GoldenSet&&) noexcept = default;

const std::filesystem::path& GoldenSet::dir() const { return s_->dir; }
const nlohmann::json& GoldenSet::manifest() const { return s_->manifest; }
const EncodingSpec& GoldenSet::spec() const { return s_->spec; }
std::optional<std::int64_t> GoldenSet::seq_len() const { return s_->seq_len; }
double GoldenSet::attention_factor() const { return s_->attention_factor; }
const std::string& GoldenSet::attention_factor_text() const { return s_->attention_factor_text; }
std::int64_t GoldenSet::tokens() const { return s_->tokens; }
const std::optional<GoldenShardInfo>& GoldenSet::shard() const { return s_->shard; }
int GoldenSet::heads() const { return s_->heads; }
const std::vector<std::string>& GoldenSet::dtypes() const { return s_->dtypes; }
const std::vector<ManifestFile>& GoldenSet::files() const { return s_->files; }
const std::vector<ManifestTensor>& GoldenSet::tensors() const { return s_->tensors; }

const ManifestTensor* GoldenSet::find(std::string_view name) const { return s_->find(name); }

std::vector<std::string> GoldenSet::output_names() const {
  std::vector<std::string> out;
  for (const ManifestTensor& t : s_->tensors)
    if (t.role == "output") out.push_back(t.name);
  return out;
}

const Tensor& GoldenSet::tensor(std::string_view name) const {
  const TensorRef ref = locate(name);  // its file's tensors checked against the manifest
  std::lock_guard<std::mutex> lock(s_->mutex);
  if (!s_->loaded_files.count(ref.file->file)) {
    // Every tensor of the file copied out of its reader, then what was read hashed: a file changed
    // after it was verified is refused, not loaded, and named as changed even when its reader
    // refused it first (an .npz member's CRC).
    std::vector<Tensor> ts;
    std::exception_ptr unreadable;
    try {
      for (std::size_t i = 0; i < ref.reader->tensors().size(); ++i) {
        const io::TensorReader::Entry& e = ref.reader->tensors()[i];
        std::vector<std::uint8_t> buffer;
        const std::span<const std::uint8_t> b = ref.reader->elements(i, 0, e.numel, buffer);
        ts.push_back({e.name, e.dtype, e.shape, {b.begin(), b.end()}});
        ref.reader->release(i, 0, e.numel);
      }
    } catch (const InputError&) {
      unreadable = std::current_exception();
    }
    if (sha256_mapped(ref.reader->file()) != ref.file->sha256)
      throw InputError("manifest hash mismatch for " + sanitize((s_->dir / ref.file->file).string()) +
                       " (the file changed after it was verified)");
    if (unreadable) std::rethrow_exception(unreadable);
    for (Tensor& t : ts) {
      std::string n = t.name;
      s_->loaded.insert_or_assign(std::move(n), std::move(t));
    }
    s_->loaded_files.insert(ref.file->file);
  }
  return s_->loaded.find(name)->second;
}

const std::vector<Position>& GoldenSet::positions() const {
  const Tensor& t = tensor("positions");  // locks and unlocks
  std::lock_guard<std::mutex> lock(s_->mutex);
  if (!s_->positions) {
    const std::int64_t T = s_->tokens;
    std::vector<Position> v(static_cast<std::size_t>(T));
    for (std::int64_t i = 0; i < T; ++i) {
      Position p;
      if (s_->streams == 3) {
        p = {t.int_value(i), t.int_value(T + i), t.int_value(2 * T + i)};
      } else {
        p = Position::uniform(t.int_value(i));
      }
      for (std::int64_t x : {p.t, p.h, p.w})
        if (x > kMaxPosition || x < -kMaxPosition)
          fail(sanitize(s_->dir.string()), "position " + std::to_string(x) + " is beyond 2^53");
      v[static_cast<std::size_t>(i)] = p;
    }
    s_->positions = std::move(v);
  }
  return *s_->positions;
}

namespace {

// Reads a set's manifest.json into `s`, phase by phase, each validating what it reads; errors name the
// folder (dwhere) or the manifest (where).
struct ManifestReader {
  detail::ManifestContents& s;
  const GoldenLoadOptions& options;
  std::string dwhere = sanitize(s.dir.string());
  std::string where = manifest_where(s.dir);

  bool rope() const { return s.spec.family == Family::rope; }

  // The folder and its manifest.json, parsed (depth-limited, at most 64 MiB).
  void read_json() {
    std::error_code ec;
    if (!std::filesystem::is_directory(s.dir, ec)) fail(dwhere, "not a folder (expected a golden set written by `ropecheck golden`)");
    const std::filesystem::path mpath = s.dir / "manifest.json";
    if (!std::filesystem::is_regular_file(mpath, ec))
      fail(dwhere, "no manifest.json: not a golden set, or an interrupted write");
    const std::vector<std::uint8_t> bytes = detail::read_file(mpath);
    if (bytes.size() > (std::size_t{64} << 20)) fail(where, "manifest larger than 64 MiB");
    try {  // depth-limited: a manifest nests 5 levels, a hostile one must not reach a recursive dump or copy
      s.manifest = parse_json_text(
          std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), "manifest.json");
    } catch (const SpecError& e) {
      const std::string m = e.what();
      fail(where, m.find("nests deeper") != std::string::npos ? "malformed JSON: nests deeper than " +
                                                                    std::to_string(kMaxJsonDepth) + " levels"
                                                              : "malformed JSON");
    }
  }

  // The format (a whole set, or a shard where options allow one) and its version.
  void read_format() {
    const nlohmann::json& m = s.manifest;
    if (!m.is_object()) fail(where, "the manifest must be a JSON object");
    const std::string format = get_string(m, "format", where, "");
    if (format == "ropecheck-golden-shard") {
      // A shard holds a slice of the tokens: read as a whole set it would check a fraction and call it all.
      const nlohmann::json& sh = key(m, "shard", where, "");
      GoldenShardInfo info;
      const std::int64_t index = get_int(sh, "index", where, "shard"), count = get_int(sh, "count", where, "shard");
      info.first_token = get_int(sh, "first_token", where, "shard");
      info.set_tokens = get_int(sh, "set_tokens", where, "shard");
      if (count < 1 || count > kMaxShards || index < 1 || index > count)
        fail(where, "'shard' is not I/N with 1 <= I <= N <= " + std::to_string(kMaxShards));
      info.shard = {static_cast<int>(index), static_cast<int>(count)};
      if (!options.allow_shard)
        fail(dwhere, "is shard " + info.shard.text() + " of a golden set, not a whole set; join the shards first: "
                     "ropecheck merge PART... --out DIR");
      s.shard = info;
    } else if (format != "ropecheck-golden") {
      fail(where, "'format' is not \"ropecheck-golden\"");
    }
    const std::int64_t version = get_int(m, "format_version", where, "");
    if (version != 1) fail(where, "unsupported format_version " + std::to_string(version) + " (this reader knows 1)");
  }

  // The spec, and for RoPE what its frequencies were resolved with.
  void read_spec() {
    const nlohmann::json& m = s.manifest;
    try {
      s.spec = spec_from_json(key(m, "spec", where, ""));
    } catch (const SpecError& e) {
      fail(where, std::string("spec: ") + e.what());
    }
    if (!rope()) return;
    const std::int64_t seq = get_int(m, "seq_len", where, "");
    if (seq < 1) fail(where, "'seq_len' must be positive");
    s.seq_len = seq;
    s.attention_factor_text = get_string(m, "attention_factor", where, "");
    const char* begin = s.attention_factor_text.c_str();
    char* end = nullptr;
    errno = 0;
    s.attention_factor = std::strtod(begin, &end);
    if (end == begin || *end != '\0' || errno != 0 || !std::isfinite(s.attention_factor) || s.attention_factor <= 0)
      fail(where, "'attention_factor' is not a positive decimal number: " + quote_name(s.attention_factor_text));
  }

  // The tokens (inside the shard's range for a shard), the position streams, the dtypes.
  void read_positions_and_dtypes() {
    const nlohmann::json& m = s.manifest;
    const nlohmann::json& pos = key(m, "positions", where, "");
    s.tokens = get_int(pos, "tokens", where, "positions");
    const std::int64_t streams = get_int(pos, "streams", where, "positions");
    if (s.tokens < 1) fail(where, "'positions.tokens' must be positive");
    if (s.shard && (s.shard->first_token < 0 || s.shard->set_tokens < s.tokens ||
                    s.shard->first_token > s.shard->set_tokens - s.tokens))
      fail(where, "'shard' tokens [first_token, first_token + positions.tokens) lie outside [0, set_tokens)");
    if (streams != 1 && streams != 3) fail(where, "'positions.streams' must be 1 or 3");
    if (streams == 3 && (!rope() || s.spec.rope.mrope == MropeMode::none))
      fail(where, "'positions.streams' is 3 but the spec is not multimodal RoPE");
    s.streams = static_cast<int>(streams);

    const nlohmann::json& dts = key(m, "dtypes", where, "");
    if (!dts.is_array() || dts.empty()) fail(where, "'dtypes' must be a non-empty array");
    for (const auto& d : dts) {
      if (!d.is_string() || !parse_dtype(d.get<std::string>())) fail(where, "'dtypes' holds an unknown dtype");
      if (std::find(s.dtypes.begin(), s.dtypes.end(), d.get<std::string>()) != s.dtypes.end())
        fail(where, "'dtypes' lists " + d.get<std::string>() + " twice");
      s.dtypes.push_back(d.get<std::string>());
    }
    if (std::find(s.dtypes.begin(), s.dtypes.end(), "f64") == s.dtypes.end())
      fail(where, "'dtypes' must include f64 (the float64 copy every check compares with)");
  }

  // Files: listed, plain names, a size and a well-formed hash each.
  void read_files() {
    const nlohmann::json& files = key(s.manifest, "files", where, "");
    if (!files.is_array() || files.empty()) fail(where, "'files' must be a non-empty array");
    for (const auto& f : files) {
      ManifestFile mf;
      mf.file = get_string(f, "file", where, "files[]");
      const nlohmann::json& b = key(f, "bytes", where, "files[]");
      if (!b.is_number_unsigned()) fail(where, "'files[].bytes' must be a non-negative integer");
      mf.bytes = b.get<std::uint64_t>();
      mf.sha256 = get_string(f, "sha256", where, "files[]");
      if (!plain_file_name(mf.file)) fail(where, "file name " + quote_name(mf.file) + " is not a plain name inside the folder");
      if (!is_hex64(mf.sha256)) fail(where, "'sha256' of " + quote_name(mf.file) + " is not 64 lowercase hex digits");
      for (const ManifestFile& o : s.files)
        if (o.file == mf.file) fail(where, "file " + quote_name(mf.file) + " is listed twice");
      s.files.push_back(std::move(mf));
    }
  }

  // Tensors: each in a listed file, once.
  void read_tensors() {
    const nlohmann::json& tensors = key(s.manifest, "tensors", where, "");
    if (!tensors.is_array() || tensors.empty()) fail(where, "'tensors' must be a non-empty array");
    for (const auto& t : tensors) {
      ManifestTensor mt;
      mt.name = get_string(t, "name", where, "tensors[]");
      const std::string ctx = "tensor " + quote_name(mt.name);
      mt.file = get_string(t, "file", where, "tensors[]");
      const std::string dt = get_string(t, "dtype", where, "tensors[]");
      const auto tdt = parse_tensor_dtype(dt);
      if (!tdt) fail(where, ctx + ": unknown dtype " + quote_name(dt));
      mt.dtype = *tdt;
      mt.shape = get_shape(key(t, "shape", where, "tensors[]"), where, ctx);
      mt.role = get_string(t, "role", where, "tensors[]");
      if (mt.role != "input" && mt.role != "output" && mt.role != "score" && mt.role != "attention" && mt.role != "kv_cache" &&
          mt.role != "store")
        fail(where, ctx + ": 'role' must be \"input\", \"output\", \"score\", \"attention\", \"kv_cache\" or \"store\"");
      if (t.contains("meaning") && t["meaning"].is_string()) mt.meaning = t["meaning"].get<std::string>();
      if (t.contains("attention_factor_folded")) {
        if (!t["attention_factor_folded"].is_boolean()) fail(where, ctx + ": 'attention_factor_folded' must be a boolean");
        mt.attention_factor_folded = t["attention_factor_folded"].get<bool>();
      }
      if (std::none_of(s.files.begin(), s.files.end(), [&](const ManifestFile& f) { return f.file == mt.file; }))
        fail(where, ctx + ": file " + quote_name(mt.file) + " is not listed in 'files'");
      if (!s.by_name.emplace(mt.name, s.tensors.size()).second) fail(where, ctx + " is listed twice");
      s.tensors.push_back(std::move(mt));
    }
  }

  void require(const std::string& name, TensorDType dt, const std::vector<std::int64_t>& shape, const char* role) const {
    const ManifestTensor* t = s.find(name);
    if (t == nullptr) fail(where, "missing tensor " + quote_name(name));
    if (t->dtype != dt || t->shape != shape || t->role != role)
      fail(where, "tensor " + quote_name(name) + " is " + std::string(to_string(t->dtype)) + " " +
                      io::shape_for_message(t->shape) + " (" + t->role + ") but the spec and positions need " +
                      std::string(to_string(dt)) + " " + io::shape_for_message(shape) + " (" + role + ")");
  }

  // The tensors the spec and positions need, with their dtypes and shapes; RoPE's heads from q.
  void require_tensors() {
    const std::int64_t T = s.tokens;
    require("positions", TensorDType::i64, s.streams == 3 ? std::vector<std::int64_t>{3, T} : std::vector<std::int64_t>{T},
            "input");
    if (!rope()) {
      for (const std::string& d : s.dtypes)
        require("pe." + d, *parse_tensor_dtype(d), {T, s.spec.sinusoidal.d_model}, "output");
      return;
    }
    const ManifestTensor* q = s.find("q");
    if (q == nullptr) fail(where, "missing tensor 'q'");
    if (q->shape.size() != 3 || q->shape[1] < 1) fail(where, "tensor 'q' must have shape [tokens, heads, head_dim]");
    s.heads = static_cast<int>(std::min<std::int64_t>(q->shape[1], 1 << 20));
    const std::int64_t H = s.heads, D = s.spec.rope.head_dim, P = rope_pairs(s.spec.rope);
    require("q", TensorDType::f32, {T, H, D}, "input");
    // MLA's k_pe key has no head axis: [tokens, rotary_dim] (GOLDEN_FORMAT.md).
    const bool k_pe = s.spec.rope.key_layout == KeyLayout::k_pe;
    const std::string key = k_pe ? "k_pe" : "k";
    const std::vector<std::int64_t> key_shape = k_pe ? std::vector<std::int64_t>{T, s.spec.rope.rotary_dim}
                                                     : std::vector<std::int64_t>{T, H, D};
    require(key, TensorDType::f32, key_shape, "input");
    for (const std::string& d : s.dtypes) {
      const TensorDType tdt = *parse_tensor_dtype(d);
      require("cos." + d, tdt, {T, P}, "output");
      require("sin." + d, tdt, {T, P}, "output");
      require("q_rot." + d, tdt, {T, H, D}, "output");
      require(key + "_rot." + d, tdt, key_shape, "output");
    }
  }

  // Every listed file: present, the declared size, the declared hash (streamed, constant memory).
  void check_files() const {
    std::error_code ec;
    for (const ManifestFile& f : s.files) {
      const std::filesystem::path p = s.dir / f.file;
      if (!std::filesystem::is_regular_file(p, ec)) fail(dwhere, not_a_data_file(p, f.file));
      const std::uintmax_t size = std::filesystem::file_size(p, ec);
      if (ec || size != f.bytes)
        throw InputError("manifest hash mismatch for " + sanitize(p.string()) + ": " + std::to_string(size) +
                          " bytes on disk, the manifest says " + std::to_string(f.bytes));
      if (options.verify_data && options.hash_files && sha256_file(p) != f.sha256)
        throw InputError("manifest hash mismatch for " + sanitize(p.string()));
    }
  }
};

}  // namespace

GoldenSet load_golden_set(const std::filesystem::path& dir, const GoldenLoadOptions& options) {
  GoldenSet set;
  set.s_->dir = dir;
  ManifestReader reader{*set.s_, options};
  reader.read_json();
  reader.read_format();
  reader.read_spec();
  reader.read_positions_and_dtypes();
  reader.read_files();
  reader.read_tensors();
  reader.require_tensors();
  reader.check_files();
  // The hashes do not cover manifest.json: its spec must reproduce a sample of the stored values.
  if (options.verify_data) detail::verify_sample(set, options.hash_files);
  return set;
}

}  // namespace ropecheck::golden
