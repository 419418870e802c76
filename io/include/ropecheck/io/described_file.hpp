// A tensor file described by the module that computes it, for a writer that does not know its content:
// how attention/ hands a golden set its scores and attention blocks (golden/GOLDEN_FORMAT.md,
// "Attached files") without golden/ knowing what a score is.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/io/tensor.hpp"

namespace ropecheck::io {

struct DescribedTensor {
  Tensor tensor;
  std::string meaning;  // one sentence: the manifest's "meaning"
};

struct DescribedFile {
  std::string stem;  // the file's name without extension; also the manifest key of `record`
  std::string role;  // the manifest role of every tensor in it
  std::vector<DescribedTensor> tensors;
  nlohmann::json record;  // what the manifest says about the file as a whole
};

}  // namespace ropecheck::io
