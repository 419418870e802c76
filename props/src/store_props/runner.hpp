// Internal: one storage property through RapidCheck (explicit seed and case count, no shrinking: a case
// holds a whole head of drawn values and its counterexample names them), in a Ctx whose target is a
// stand-in (the recipe is called directly), so the bound helpers count saturated bounds as everywhere.
#pragma once

#include <functional>
#include <string>

#include "../properties.hpp"
#include "ropecheck/props/store_properties.hpp"

namespace ropecheck::props::detail {

StorePropertyOutcome run_store_cases(const std::string& property, const std::string& store, const EncodingSpec& spec,
                                     const StorePropsOptions& options, const std::function<void(Ctx&)>& one_case);

// The spec's RoPE without its norm stages (the rotation the recipes compute after the norm).
RopeSpec rotation_only(const EncodingSpec& spec);

}  // namespace ropecheck::props::detail
