// io/hf_config_file.hpp: a Hugging Face config recorded in the spec by its file name and SHA-256, never
// by the path that reached it (the CLI's --hf-config and Python's Spec.from_hf_config share it).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ropecheck/core/spec.hpp"
#include "ropecheck/io/hf_config_file.hpp"
#include "ropecheck/io/sha256.hpp"
#include "temp_root.hpp"

namespace ropecheck::io {
namespace {

namespace fs = std::filesystem;

constexpr const char* kConfig = R"({
  "model_type": "llama",
  "hidden_size": 2048,
  "num_attention_heads": 32,
  "max_position_embeddings": 8192,
  "rope_theta": 500000.0,
  "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "not_a_rope_key": 1}
})";

TEST(RecordedHfConfig, RecordsTheFileNameAndHashNotThePath) {
  const testing_support::TempRoot root("ropecheck_hf_config_file_");
  const fs::path path = root.path() / "config.json";
  std::ofstream(path) << kConfig;
  std::vector<std::string> ignored;
  const EncodingSpec spec = load_recorded_hf_config(path, {}, &ignored);
  EXPECT_EQ(spec.name, "config.json");
  const std::string tail = ", file config.json with sha256 " + sha256_file(path);
  ASSERT_GE(spec.source.size(), tail.size());
  EXPECT_EQ(spec.source.substr(spec.source.size() - tail.size()), tail);
  EXPECT_EQ(spec.source.find(root.path().string()), std::string::npos);  // no local path recorded
  ASSERT_EQ(ignored.size(), 1u);  // the import's warnings come back as load_hf_config_file gives them
  EXPECT_NE(ignored[0].find("not_a_rope_key"), std::string::npos) << ignored[0];

  // The same file reached by a relative path: the same spec.
  const fs::path cwd = fs::current_path();
  fs::current_path(root.path());
  const EncodingSpec relative = load_recorded_hf_config("config.json", {}, nullptr);
  fs::current_path(cwd);
  EXPECT_EQ(relative.source, spec.source);
  EXPECT_EQ(relative.rope.base, spec.rope.base);

  HfImportOptions strict;
  strict.strict = true;
  EXPECT_THROW(load_recorded_hf_config(path, strict, nullptr), SpecError);
  EXPECT_THROW(load_recorded_hf_config(root.path() / "missing.json", {}, nullptr), SpecError);
}

}  // namespace
}  // namespace ropecheck::io
