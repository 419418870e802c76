// The values a store (rope_quantize.hpp's StoredTensor) holds, read back as check reads a candidate's
// (checker/src/check_stores.cpp), with one step of the store at each value (ERROR_MODEL.md section 15:
// D + |q| ds + db): what the storage properties (props/) and drift --stores measure against.
#pragma once

#include <cstdint>
#include <vector>

#include "ropecheck/core/quantized_store_spec.hpp"
#include "ropecheck/kernels/rope_quantize.hpp"

namespace ropecheck::kernels {

struct StoredValuesAndSteps {
  std::vector<double> value;  // code times stored scale (plus bias): exact in binary64
  std::vector<double> step;   // D + |q| ds + db at that value
  std::vector<double> scale_step;  // ds alone (the code's weight in the step)
  std::vector<double> scale;       // the stored scale of the element's group (FP8 s, GGML d, MLX scale)
  std::vector<std::int64_t> group;  // group index of each element (a scale group: FP8 scale, GGML block, MLX group)
};

// [tokens, heads, head_dim] stored by quantize_store's layout.
StoredValuesAndSteps dequantize_store(const StoredTensor& t, const quant::StoreSpec& s, std::int64_t tokens,
                                      std::int64_t heads, std::int64_t head_dim);

}  // namespace ropecheck::kernels
