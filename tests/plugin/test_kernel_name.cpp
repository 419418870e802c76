// The one kernel grammar (plugin/kernel_name.hpp): every form `check --kernel`, `props --kernel`,
// `drift --recipes` and Python read, the old spellings with their note, and one-line errors.
#include <gtest/gtest.h>

#include <string>

#include "ropecheck/core/input_error.hpp"
#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/plugin/kernel_name.hpp"

namespace ropecheck::plugin {
namespace {

namespace k = ropecheck::kernels;

std::string error_of(const std::string& name, const char* option = "--kernel") {
  try {
    (void)parse_kernel_name(name, option);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(KernelName, EveryRecipeInBothSourcesRoundTrips) {
  for (const k::RecipeInfo& r : k::recipes()) {
    for (const std::string prefix : {"builtin:", "cuda:"}) {
      const KernelName n = parse_kernel_name(prefix + std::string(r.name));
      EXPECT_EQ(n.kind, prefix == "builtin:" ? KernelName::Kind::builtin : KernelName::Kind::cuda);
      EXPECT_EQ(n.recipe, r.recipe);
      EXPECT_EQ(n.canonical(), prefix + std::string(r.name));
      EXPECT_TRUE(n.deprecation.empty()) << n.deprecation;
      EXPECT_TRUE(n.is_recipe());
    }
  }
}

TEST(KernelName, PluginsWithAndWithoutPrefixAndOptions) {
  const KernelName a = parse_kernel_name("plugin:./libmyrope.so:fast=1");
  EXPECT_EQ(a.kind, KernelName::Kind::plugin);
  EXPECT_EQ(a.library, "./libmyrope.so:fast=1");  // the options are the plugin client's to split
  EXPECT_EQ(a.canonical(), "plugin:./libmyrope.so:fast=1");
  const KernelName b = parse_kernel_name("/opt/k/librope.so");
  EXPECT_EQ(b.kind, KernelName::Kind::plugin);
  EXPECT_EQ(b.library, "/opt/k/librope.so");
  EXPECT_TRUE(b.deprecation.empty());
  EXPECT_FALSE(b.is_recipe());
}

// The names made from a recipe or a path are the ones parsing their canonical spelling gives; a library
// named like a recipe stays a library.
TEST(KernelName, MadeNamesEqualParsedOnes) {
  for (const k::RecipeInfo& r : k::recipes()) {
    const KernelName n = builtin_kernel(r.recipe);
    const KernelName p = parse_kernel_name(n.canonical());
    EXPECT_EQ(n.kind, p.kind);
    EXPECT_EQ(n.recipe, p.recipe);
    EXPECT_EQ(n.given, "builtin:" + std::string(r.name));
    EXPECT_TRUE(n.deprecation.empty());
  }
  const KernelName lib = plugin_kernel("hf");
  EXPECT_EQ(lib.kind, KernelName::Kind::plugin);
  EXPECT_EQ(lib.library, "hf");
  EXPECT_EQ(lib.canonical(), "plugin:hf");
  EXPECT_EQ(parse_kernel_name(lib.canonical()).library, "hf");
}

// A kernel's short label for tables: its canonical name (a plugin's is tested in test_plugin_kernel).
TEST(KernelName, OpenedBuiltinIsLabelledByItsCanonicalName) {
  const OpenedKernel o = open_kernel(builtin_kernel(k::Recipe::hf));
  EXPECT_EQ(o.label, "builtin:hf");
  EXPECT_EQ(o.source["name"], "builtin:hf");
}

TEST(KernelName, OldSpellingsWorkWithANote) {
  const KernelName cuda = parse_kernel_name("builtin-cuda:hf");
  EXPECT_EQ(cuda.kind, KernelName::Kind::cuda);
  EXPECT_EQ(cuda.canonical(), "cuda:hf");
  EXPECT_NE(cuda.deprecation.find("'builtin-cuda:hf' is spelled 'cuda:hf' now"), std::string::npos) << cuda.deprecation;

  const KernelName props_target = parse_kernel_name("kernel:accurate-bf16out", "--target");
  EXPECT_EQ(props_target.kind, KernelName::Kind::builtin);
  EXPECT_EQ(props_target.recipe, k::Recipe::accurate);
  EXPECT_EQ(props_target.storage, DType::bf16);
  EXPECT_NE(props_target.deprecation.find("'builtin:accurate' now with --dtype bf16"), std::string::npos)
      << props_target.deprecation;
  EXPECT_EQ(parse_kernel_name("kernel:hf").storage, DType::f32);

  const KernelName bare = parse_kernel_name("bf16-positions", "--recipes");
  EXPECT_EQ(bare.kind, KernelName::Kind::builtin);
  EXPECT_EQ(bare.recipe, k::Recipe::bf16_positions);
  EXPECT_FALSE(bare.deprecation.empty());
  EXPECT_EQ(bare.deprecation.find('\n'), std::string::npos);
}

TEST(KernelName, UnusableNamesAreOneLineErrors) {
  const std::string unknown = error_of("builtin:fast");
  EXPECT_NE(unknown.find("--kernel builtin:fast: unknown built-in recipe 'fast' (known: accurate, hf"), std::string::npos)
      << unknown;
  EXPECT_NE(error_of("cuda:nope").find("unknown CUDA recipe 'nope'"), std::string::npos);
  EXPECT_NE(error_of("plugin:").find("needs a library path"), std::string::npos);
  EXPECT_NE(error_of("").find("empty kernel name"), std::string::npos);
  const std::string typo = error_of("hff", "--recipes");
  EXPECT_NE(typo.find("--recipes hff: neither a recipe"), std::string::npos) << typo;
  for (const std::string& e : {unknown, typo}) EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_EQ(error_of("./hff"), "");  // a path is a library: whether it loads is open_kernel's to say
}

}  // namespace
}  // namespace ropecheck::plugin
