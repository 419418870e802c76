// A check part's tensor statistics as JSON and back (check_part_json.cpp). Private to the checker.
#pragma once

#include <nlohmann/json.hpp>

#include "ropecheck/checker/check_part.hpp"
#include "ropecheck/io/part_file.hpp"

namespace ropecheck::checker::part_json {

nlohmann::json tensor_json(const TensorStats& s);
// InputError (PartReader::bad) on anything a check cannot have written: missing keys, wrong types,
// negative counts, counts above the elements, position bins that do not add up.
TensorStats tensor_from(const io::PartReader& r, const nlohmann::json& j);

}  // namespace ropecheck::checker::part_json
