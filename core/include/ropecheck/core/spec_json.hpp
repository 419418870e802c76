// Spec JSON in and out (core/SPEC_FORMAT.md), and import of a Hugging Face config.json.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ropecheck/core/spec.hpp"

namespace ropecheck {

// Parses and validates; throws SpecError naming the key and value on any problem.
EncodingSpec spec_from_json(const nlohmann::json& j);
nlohmann::json spec_to_json(const EncodingSpec& spec);

struct HfImportOptions {
  std::string name = "hf-config";
  // Overrides the layout inferred from model_type (half_split for most HF models).
  std::optional<RopeLayout> layout;
  // For configs whose rope_parameters are nested by layer type (Gemma 3 in transformers v5):
  // which entry to take; default "full_attention".
  std::string layer_type = "full_attention";
  // A key of the RoPE section (or a top-level key that may concern RoPE) that the import does not
  // use is an error (SpecError naming it) instead of an entry in `ignored`.
  bool strict = false;
};

// Hugging Face config.json -> spec, following current transformers (v5 / G4) semantics:
// rope_parameters (or rope_scaling + rope_theta), head_dim (or hidden_size / num_attention_heads),
// partial_rotary_factor, max_position_embeddings, top-level original_max_position_embeddings (Phi-3).
// Keys that may concern RoPE but were not used (unknown, or not read by the rope type) are listed in
// `ignored`, one message per key ("'rope_scaling.foo': not understood by ropecheck, ignored"); the
// caller shows them (the CLI as warnings on stderr). With options.strict they throw instead.
EncodingSpec spec_from_hf_config(const nlohmann::json& config, const HfImportOptions& options = {},
                                 std::vector<std::string>* ignored = nullptr);

// The deepest nesting any JSON input may have. Specs nest 4 levels, Hugging Face configs 4, a golden
// manifest 5; the limit stops a hostile file (200,000 `[`) before anything recurses over it.
inline constexpr int kMaxJsonDepth = 64;

// Parses `text`, refusing nesting deeper than kMaxJsonDepth; malformed or too deep JSON becomes a
// one-line SpecError "malformed JSON in '<what>': ...".
nlohmann::json parse_json_text(std::string_view text, const std::string& what);

// A short one-line rendering of a value for error messages: at most `max_chars` characters, containers
// shown only to a few levels, control characters escaped, invalid UTF-8 replaced. Never recurses deeper
// than a few levels, so it is safe on any value.
std::string json_excerpt(const nlohmann::json& v, std::size_t max_chars = 60);

// File helpers: read, parse (malformed JSON becomes a one-line SpecError naming the file).
nlohmann::json read_json_file(const std::filesystem::path& path);
EncodingSpec load_spec_file(const std::filesystem::path& path);
EncodingSpec load_hf_config_file(const std::filesystem::path& path, const HfImportOptions& options = {},
                                 std::vector<std::string>* ignored = nullptr);

}  // namespace ropecheck
