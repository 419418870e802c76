// The recipe catalogue (recipe.hpp): names, one-line descriptions, table dtypes.
#include "ropecheck/kernels/recipe.hpp"

#include <array>
#include <stdexcept>

namespace ropecheck::kernels {

namespace {

constexpr std::array<RecipeInfo, 11> kRecipes{{
    {Recipe::accurate, "accurate",
     "binary64 w and angle, Cody-Waite reduction, f32 sin/cos polynomials and rotation (f64 storage: all binary64)",
     false},
    {Recipe::hf, "hf", "Hugging Face Llama: f32 w and angle, f32 cos/sin, table and rotation in the storage dtype",
     false},
    {Recipe::meta, "meta", "Meta's reference: f32 w and angle, polar() in complex64, complex multiply in f32", false},
    {Recipe::ggml, "ggml", "ggml / llama.cpp: angle by the f32 recurrence theta *= powf(base, -2/R), f32 rotation",
     false},
    {Recipe::bf16_table, "bf16-table", "hf, cos/sin cast to bf16 and the rotation done in bf16", true},
    {Recipe::f16_table, "f16-table", "hf, cos/sin cast to f16 and the rotation done in f16 (GPT-NeoX fp16 cache)",
     true},
    {Recipe::bf16_inv_freq, "bf16-inv-freq", "hf with the inverse frequencies cast to bf16 (transformers #29496)", true},
    {Recipe::f16_inv_freq, "f16-inv-freq", "hf with the inverse frequencies cast to f16 (OpenVINO #35674)", true},
    {Recipe::bf16_positions, "bf16-positions", "hf with positions held in bf16 (1409 distinct below 131072)", true},
    {Recipe::f16_positions, "f16-positions", "hf with positions held in f16 (infinite, so NaN, from 65520)", true},
    {Recipe::fast_sincos, "fast-sincos", "hf's angle, sin/cos by the CUDA fast-math __sinf/__cosf model", true},
}};

}  // namespace

std::span<const RecipeInfo> recipes() { return kRecipes; }

const RecipeInfo& recipe_info(Recipe r) {
  for (const RecipeInfo& info : kRecipes)
    if (info.recipe == r) return info;
  throw std::invalid_argument("ropecheck::kernels: unknown recipe value");
}

std::string_view to_string(Recipe r) { return recipe_info(r).name; }

std::optional<Recipe> parse_recipe(std::string_view name) {
  for (const RecipeInfo& info : kRecipes)
    if (info.name == name) return info.recipe;
  return std::nullopt;
}

DType table_dtype(Recipe r, DType storage) {
  switch (r) {
    case Recipe::hf: return storage;
    case Recipe::bf16_table: return DType::bf16;
    case Recipe::f16_table: return DType::f16;
    case Recipe::accurate: return storage == DType::f64 ? DType::f64 : DType::f32;
    default: return DType::f32;
  }
}

}  // namespace ropecheck::kernels
