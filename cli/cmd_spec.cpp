// `ropecheck spec`: the resolved spec, its frequencies to >= 40 digits, the attention factor.
#include <fmt/core.h>

#include "commands.hpp"
#include "memory_option.hpp"
#include "ropecheck/reference/resolve.hpp"
#include "ropecheck/core/spec_json.hpp"
#include "spec_source.hpp"

namespace ropecheck::cli {
namespace {

struct SpecOptions {
  SpecSource source;
  std::int64_t seq_len = 0;  // 0: not given (the option only accepts >= 1)
  bool json = false;
  int digits = 45;
  std::string max_memory;
};

// What resolving and printing the spec holds at its peak, per frequency: the MPFR value, its decimal
// string, and with --json the JSON tree and its dump (measured: ~270 bytes at 45 digits as text,
// ~1.4 KiB at 200 digits as JSON; this is above both), plus the program itself.
std::uint64_t spec_memory_bytes(const EncodingSpec& spec, int digits) {
  const double n = spec.family == Family::rope ? rope_pairs(spec.rope) : sinusoidal_frequency_count(spec.sinusoidal);
  return static_cast<std::uint64_t>(n * (8.0 * digits + 256) + 64.0 * (1 << 20));
}

void print_text(const ResolvedSpec& r) {
  const EncodingSpec& s = r.spec;
  fmt::print("spec: {} ({})\n", s.name, to_string(s.family));
  if (!s.source.empty()) fmt::print("source: {}\n", s.source);
  if (!s.notes.empty()) fmt::print("notes: {}\n", s.notes);
  if (s.family == Family::rope) {
    const RopeSpec& p = s.rope;
    fmt::print("head_dim {}, rotary_dim {}, base {}, layout {}, max_position_embeddings {}\n", p.head_dim,
               p.rotary_dim, p.base, to_string(p.layout), p.max_position_embeddings);
    const nlohmann::json sc = spec_to_json(s)["rope"]["scaling"];
    std::string scaling;
    for (const auto& [k, v] : sc.items()) {
      if (k == "type") continue;
      std::string val = v.dump();
      if (v.is_array()) val = fmt::format("[{} values]", v.size());
      scaling += fmt::format(" {}={}", k, val);
    }
    fmt::print("scaling: {}{}  (effective factor {})\n", to_string(p.scaling.type), scaling, r.effective_factor);
    if (p.mrope != MropeMode::none)
      fmt::print("mrope: {} sections [{}, {}, {}]\n", to_string(p.mrope), p.mrope_section[0], p.mrope_section[1],
                 p.mrope_section[2]);
    if (r.seq_len) fmt::print("seq_len: {}\n", *r.seq_len);
    if (r.yarn_correction_range)
      fmt::print("yarn correction range: low {} high {}\n", r.yarn_correction_range->first,
                 r.yarn_correction_range->second);
    if (r.llama3_bands)
      fmt::print("llama3 bands: {} kept, {} smoothed, {} divided by factor\n", (*r.llama3_bands)[0],
                 (*r.llama3_bands)[1], (*r.llama3_bands)[2]);
    if (r.longrope_long_factors) fmt::print("longrope factors: {}\n", *r.longrope_long_factors ? "long" : "short");
    fmt::print("attention factor: {}\n", r.attention_factor);
    fmt::print("reference: MPFR at {} bits, {} significant digits\n", r.precision_bits, r.digits);
    fmt::print("inverse frequencies ({} pairs):\n", r.frequencies.size());
  } else {
    const SinusoidalSpec& q = s.sinusoidal;
    fmt::print("d_model {}, base {}, layout {}, frequencies {}, position_offset {}\n", q.d_model, q.base,
               to_string(q.layout), to_string(q.frequencies), q.position_offset);
    fmt::print("reference: MPFR at {} bits, {} significant digits\n", r.precision_bits, r.digits);
    fmt::print("frequencies ({}):\n", r.frequencies.size());
  }
  for (std::size_t j = 0; j < r.frequencies.size(); ++j) fmt::print("  {:>4}  {}\n", j, r.frequencies[j]);
}

}  // namespace

Command add_spec_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("spec", "print the resolved spec, its exact frequencies and attention factor");
  auto opt = std::make_shared<SpecOptions>();
  opt->source.add_options(*cmd);
  cmd->add_option("--seq-len", opt->seq_len, "sequence length seen at run time (dynamic NTK, longrope switch)")
      ->check(CLI::Range(std::int64_t{1}, kMaxPosition));
  cmd->add_option("--digits", opt->digits, "significant digits of every printed value (>= 40)")
      ->capture_default_str()
      ->check(CLI::Range(40, 1000));
  cmd->add_flag("--json", opt->json, "print one JSON object instead of text");
  add_max_memory_option(*cmd, opt->max_memory);
  return {cmd, [opt] {
    const EncodingSpec spec = opt->source.load();
    const std::string size = spec.family == Family::rope ? "head_dim " + std::to_string(spec.rope.head_dim)
                                                         : "d_model " + std::to_string(spec.sinusoidal.d_model);
    io::require_memory(spec_memory_bytes(spec, opt->digits), max_memory_bytes(opt->max_memory),
                           "the frequencies of a spec with " + size + " at --digits " + std::to_string(opt->digits));
    std::optional<std::int64_t> seq;
    if (opt->seq_len != 0) seq = opt->seq_len;
    const ResolvedSpec r = resolve_spec(spec, seq, opt->digits);
    if (opt->json)
      fmt::print("{}\n", r.to_json().dump(2));
    else
      print_text(r);
    return 0;
  }};
}

}  // namespace ropecheck::cli
