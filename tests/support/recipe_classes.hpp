// ropecheck's own recipes with the class each lands in (kernels/RECIPES.md) and the attention arithmetic
// of that class (accuracy/ERROR_MODEL.md 16.2: accumulation in binary64 or f32, intermediates held in
// `mid`; what kernels::attention_arithmetic must say). One table for the attention tests and the score
// check's tests.
#pragma once

#include <vector>

#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/kernels/recipe.hpp"

namespace ropecheck::testing_support {

struct RecipeClass {
  kernels::Recipe recipe;
  DType dt;
  accuracy::AccuracyClass cls;
  bool f64_acc;
  DType mid;
};

inline const std::vector<RecipeClass>& recipe_classes() {
  using accuracy::AccuracyClass;
  using kernels::Recipe;
  static const std::vector<RecipeClass> cases = {
      {Recipe::accurate, DType::f32, AccuracyClass::f32_reduced, false, DType::f32},
      {Recipe::accurate, DType::bf16, AccuracyClass::fp64_angle, true, DType::f64},
      {Recipe::hf, DType::f32, AccuracyClass::fp32_angle, false, DType::f32},
      {Recipe::hf, DType::bf16, AccuracyClass::bf16_table, false, DType::bf16},
      {Recipe::meta, DType::f32, AccuracyClass::fp32_angle, false, DType::f32},
      {Recipe::meta, DType::bf16, AccuracyClass::fp32_angle, false, DType::f32},
      {Recipe::ggml, DType::f32, AccuracyClass::fp32_angle, false, DType::f32},
      {Recipe::bf16_table, DType::f32, AccuracyClass::bf16_table, false, DType::bf16},
      {Recipe::f16_table, DType::f32, AccuracyClass::f16_table, false, DType::f16},
      {Recipe::f16_table, DType::f16, AccuracyClass::f16_table, false, DType::f16},
  };
  return cases;
}

}  // namespace ropecheck::testing_support
