// Internal: the property table shared by the runner (suite.cpp) and run_property_case.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ropecheck/props/target.hpp"

namespace ropecheck::props::detail {

// What one property run accumulates across its cases.
struct Ctx {
  Ctx(Target& t, const EncodingSpec* f, std::int64_t mx) : target(t), fixed(f), max_position(mx) {}
  Target& target;
  const EncodingSpec* fixed;
  std::int64_t max_position;
  bool counting = true;  // false once a case failed (shrinking runs are not counted)
  int cases = 0, skipped = 0;
  double worst = 0;
  std::string fail_desc, fail_spec_json;
  std::optional<std::int64_t> fail_position;
  std::set<std::string> notes;
  // uniqueness: smallest separation seen and the first colliding pair
  double min_separation = -1;
  std::optional<std::pair<std::int64_t, std::int64_t>> first_collision;

  // Records a sub-check's margin (error / bound); RC_FAIL()s with desc when it exceeds 1 (or is NaN).
  void check(double margin, const std::string& desc, std::optional<std::int64_t> position, const EncodingSpec& spec);
  // The case does not apply to this target (unsupported spec) or to the fixed spec.
  void skip() {
    if (counting) ++skipped;
  }
};

struct PropertyDef {
  const char* name;
  const char* statement;
  const char* tolerance;
  void (*run)(Ctx&);
};

const std::vector<PropertyDef>& property_defs();

// Deterministic scans the runner adds for a fixed spec (notes only; never fail on their own).
std::vector<std::string> collision_scan(Target& target, const EncodingSpec& spec, std::int64_t max_position);
std::vector<std::string> cosine_sum_report(const EncodingSpec& spec, std::int64_t max_position);
std::vector<std::string> roformer_envelope_report(const EncodingSpec& spec);

std::string describe_spec(const EncodingSpec& spec);

}  // namespace ropecheck::props::detail
