#include "ropecheck/plugin/client.hpp"

#include <cmath>
#include <system_error>

#include "client_state.hpp"

namespace ropecheck::plugin {

namespace {

// The ABI's fixed layouts (x86-64 / AArch64 LP64): a change here is an ABI change.
static_assert(sizeof(void*) != 8 || sizeof(ropecheck_rope_params) == 152, "kernel ABI v1: ropecheck_rope_params layout changed");
static_assert(sizeof(void*) != 8 || sizeof(ropecheck_rope_problem) == 232, "kernel ABI v1: ropecheck_rope_problem layout changed");
static_assert(sizeof(void*) != 8 || sizeof(ropecheck_table_problem) == 224, "kernel ABI v1: ropecheck_table_problem layout changed");
static_assert(sizeof(ropecheck_sinusoidal_params) == 32, "kernel ABI v1: ropecheck_sinusoidal_params layout changed");
static_assert(sizeof(void*) != 8 || sizeof(ropecheck_sinusoidal_problem) == 88, "kernel ABI v1: ropecheck_sinusoidal_problem layout changed");
// Revision 2's additions (new structs; version 1's above unchanged).
static_assert(sizeof(void*) != 8 || sizeof(ropecheck_attention_params) == 48, "kernel ABI r2: ropecheck_attention_params layout changed");
static_assert(sizeof(void*) != 8 || sizeof(ropecheck_rope_attention_problem) == 296, "kernel ABI r2: ropecheck_rope_attention_problem layout changed");
// Revision 3's (new structs again).
static_assert(sizeof(ropecheck_store_params) == 32, "kernel ABI r3: ropecheck_store_params layout changed");
static_assert(sizeof(void*) != 8 || sizeof(ropecheck_rope_quantize_problem) == 304, "kernel ABI r3: ropecheck_rope_quantize_problem layout changed");
static_assert(sizeof(void*) != 8 || sizeof(ropecheck_kv_cache_params) == 80, "kernel ABI r3: ropecheck_kv_cache_params layout changed");
static_assert(sizeof(void*) != 8 || sizeof(ropecheck_rope_append_kv_problem) == 320, "kernel ABI r3: ropecheck_rope_append_kv_problem layout changed");

}  // namespace

KernelPlugin::KernelPlugin() = default;
KernelPlugin::~KernelPlugin() = default;
KernelPlugin::KernelPlugin(KernelPlugin&&) noexcept = default;
KernelPlugin& KernelPlugin::operator=(KernelPlugin&&) noexcept = default;

const std::filesystem::path& KernelPlugin::path() const { return s_->path; }
const std::string& KernelPlugin::name() const { return s_->name; }
std::string KernelPlugin::who() const { return s_->who(); }
std::uint32_t KernelPlugin::abi_version() const { return s_->abi_version; }
bool KernelPlugin::has_rope_apply() const { return s_->rope_apply; }
bool KernelPlugin::has_rope_cos_sin() const { return s_->rope_cos_sin; }
bool KernelPlugin::has_sinusoidal() const { return s_->sinusoidal; }
bool KernelPlugin::has_rope_attention() const { return s_->rope_attention; }
bool KernelPlugin::has_rope_quantize() const { return s_->rope_quantize; }
bool KernelPlugin::has_rope_append_kv() const { return s_->rope_append_kv; }
bool KernelPlugin::isolated() const { return !s_->options.in_process; }
std::uint64_t KernelPlugin::capabilities() const { return s_->capabilities; }
bool KernelPlugin::declares_dtype(std::int32_t d) const {
  const std::uint64_t all = ROPECHECK_CAP_OUT_F64 | ROPECHECK_CAP_OUT_F32 | ROPECHECK_CAP_OUT_F16 | ROPECHECK_CAP_OUT_BF16;
  if ((s_->capabilities & all) == 0) return true;
  return d >= 0 && d <= 3 && (s_->capabilities & ROPECHECK_CAP_OUT_DTYPE(d)) != 0;
}
void KernelPlugin::forgive() {
  if (s_->gave_up_for_good) return;
  s_->gave_up.clear();
  s_->consecutive = 0;
}
kut::RunEnd KernelPlugin::finish() { return s_->finish(); }
std::int64_t KernelPlugin::failed_calls() const { return s_->failed; }
std::int64_t KernelPlugin::calls() const { return s_->calls; }
const std::string& KernelPlugin::first_failure() const { return s_->first_failure; }

std::span<const std::uint8_t> KernelPlugin::output(int i) const {
  const auto& o = s_->last_outputs.at(static_cast<std::size_t>(i));
  return {s_->arena.base() + o.first, o.second};
}

KernelCall KernelPlugin::rope_apply(const RopeInputs& in, const char* input_name, std::int32_t heads, std::span<const float> x,
                                    std::int32_t out_dtype, std::size_t out_bytes, std::string_view what) {
  Layout l;
  pp::Request q;
  q.entry = pp::Entry::rope_apply;
  ropecheck_rope_problem& p = q.p.rope;
  const std::string json(in.spec_json);  // outlives the call: the layout copies it into the arena then
  place_header(l, p, out_dtype, json);
  place_rope(l, p, in);
  p.input_name = offset_ptr<const char>(l.input(input_name, std::strlen(input_name) + 1));
  p.heads = heads;
  p.x = offset_ptr<const float>(l.input(x.data(), x.size_bytes()));
  p.out = offset_ptr<void>(l.output("out", out_bytes));
  const std::size_t msg = place_message(l, p);
  return s_->call(q, l, msg, what);
}

KernelCall KernelPlugin::rope_cos_sin(const RopeInputs& in, std::int32_t out_dtype, std::size_t table_bytes, std::string_view what) {
  Layout l;
  pp::Request q;
  q.entry = pp::Entry::rope_cos_sin;
  ropecheck_table_problem& p = q.p.table;
  const std::string json(in.spec_json);  // outlives the call: the layout copies it into the arena then
  place_header(l, p, out_dtype, json);
  place_rope(l, p, in);
  p.cos = offset_ptr<void>(l.output("cos", table_bytes));
  p.sin = offset_ptr<void>(l.output("sin", table_bytes));
  const std::size_t msg = place_message(l, p);
  return s_->call(q, l, msg, what);
}

KernelCall KernelPlugin::sinusoidal(std::string_view spec_json, const ropecheck_sinusoidal_params& params,
                                    std::span<const std::int64_t> positions, std::int32_t out_dtype, std::size_t out_bytes,
                                    std::string_view what) {
  Layout l;
  pp::Request q;
  q.entry = pp::Entry::sinusoidal;
  ropecheck_sinusoidal_problem& p = q.p.sinusoidal;
  const std::string json(spec_json);  // outlives the call: the layout copies it into the arena then
  place_header(l, p, out_dtype, json);
  p.sinusoidal = params;
  p.tokens = static_cast<std::int64_t>(positions.size());
  p.positions = offset_ptr<const std::int64_t>(l.input(positions.data(), positions.size_bytes()));
  p.out = offset_ptr<void>(l.output("out", out_bytes));
  const std::size_t msg = place_message(l, p);
  return s_->call(q, l, msg, what);
}

std::pair<std::filesystem::path, std::string> split_kernel_options(const std::string& name) {
  std::error_code ec;
  if (std::filesystem::exists(name, ec)) return {name, ""};
  const std::size_t slash = name.rfind('/');
  const std::size_t colon = name.find(':', slash == std::string::npos ? 0 : slash + 1);
  if (colon == std::string::npos) return {name, ""};
  return {name.substr(0, colon), name.substr(colon + 1)};
}

KernelPlugin load_kernel_plugin(const std::filesystem::path& name, const PluginClientOptions& options) {
  const auto [library, kernel_options] = split_kernel_options(name.string());
  const std::string where = "kernel library " + sanitize(library.string());
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(library, ec);
  if (ec || !std::filesystem::exists(st)) input_error(where, "no such file");
  if (!std::filesystem::is_regular_file(st)) input_error(where, "not a regular file");
  if (!(options.timeout_s > 0) || !std::isfinite(options.timeout_s))
    throw InputError("--kernel-timeout: must be a positive number of seconds");
  auto s = std::make_unique<KernelPlugin::State>();
  s->path = name;
  s->kernel_options = kernel_options;
  s->absolute = std::filesystem::absolute(library, ec);
  if (ec) input_error(where, "cannot resolve the path: " + ec.message());
  s->options = options;
  s->arena.open();
  s->arena.reserve(detail::page_size());
  if (options.in_process) {
    std::string dl;
    const std::string problem = pp::open_kernel_library(s->absolute.c_str(), s->kernel_options, s->in_process, dl);
    if (!problem.empty()) input_error(where, problem + (dl.empty() ? std::string() : sanitize(dl, 400)));
    s->abi_version = s->in_process.abi_version;
    s->name = s->in_process.name;
    s->rope_apply = s->in_process.rope_apply != nullptr;
    s->rope_cos_sin = s->in_process.rope_cos_sin != nullptr;
    s->sinusoidal = s->in_process.sinusoidal != nullptr;
    s->rope_attention = s->in_process.rope_attention != nullptr;
    s->rope_quantize = s->in_process.rope_quantize != nullptr;
    s->rope_append_kv = s->in_process.rope_append_kv != nullptr;
    s->capabilities = s->in_process.capabilities;
  } else {
    const std::string why = s->start_host();
    if (!why.empty()) {
      // The library cannot even be loaded without killing its process: every call fails with that.
      s->broken = why;
      s->rope_apply = s->rope_cos_sin = s->sinusoidal = s->rope_attention = s->rope_quantize = s->rope_append_kv = true;
      s->abi_version = ROPECHECK_KERNEL_ABI_VERSION;
    }
  }
  s->name = sanitize(s->name, 128);
  if (s->name.empty()) s->name = library.filename().string();
  KernelPlugin k;
  k.s_ = std::move(s);
  return k;
}

}  // namespace ropecheck::plugin
