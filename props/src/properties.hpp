// Internal: the property table shared by the runner (suite.cpp) and run_property_case.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ropecheck/accuracy/error_model.hpp"
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

  // Bounds of the target's class evaluated while counting, and the saturated ones (ClassBound::
  // saturated: the element is not tested), with the smallest |position| where that happened.
  std::int64_t bounds = 0, saturated = 0;
  std::optional<std::int64_t> first_saturated;
  void note_bound(const accuracy::ClassBound& b, const accuracy::PairAngle& a, std::int64_t position) {
    note_saturation(b.saturated(a), position);
  }
  // A bound of a derived quantity (a score: accuracy::ScoreBound::saturated), counted the same way.
  void note_saturation(bool is_saturated, std::int64_t position) {
    if (!counting) return;
    ++bounds;
    if (is_saturated) {
      ++saturated;
      if (!first_saturated || std::llabs(position) < std::llabs(*first_saturated)) first_saturated = position;
    }
  }

  // Records a sub-check's margin (error / bound); RC_FAIL()s with desc when it exceeds 1 (or is NaN).
  void check(double margin, const std::string& desc, std::optional<std::int64_t> position, const EncodingSpec& spec);
  // The case does not apply to this target (unsupported spec) or to the fixed spec.
  void skip() {
    if (counting) ++skipped;
  }
  // The target declined a call (unsupported spec or capability): a skipped case that was asked
  // for, unlike a property that does not apply to the spec at all.
  int declined = 0;
  void decline() {
    if (counting) ++declined;
  }
};

struct PropertyDef {
  const char* name;
  const char* statement;
  const char* tolerance;
  void (*run)(Ctx&);
};

const std::vector<PropertyDef>& property_defs();

// The Ctx of the property running on this thread (set by the runner; nullptr outside a run): where
// the bound helpers count saturated bounds without threading the Ctx through every property.
Ctx*& current_ctx();
struct CurrentCtx {
  explicit CurrentCtx(Ctx& c) : prev(current_ctx()) { current_ctx() = &c; }
  ~CurrentCtx() { current_ctx() = prev; }
  CurrentCtx(const CurrentCtx&) = delete;
  CurrentCtx& operator=(const CurrentCtx&) = delete;
  Ctx* prev;
};

// Deterministic scans the runner adds for a fixed spec (notes only; never fail on their own).
std::vector<std::string> collision_scan(Target& target, const EncodingSpec& spec, std::int64_t max_position);
std::vector<std::string> cosine_sum_report(const EncodingSpec& spec, std::int64_t max_position);
std::vector<std::string> roformer_envelope_report(const EncodingSpec& spec);

std::string describe_spec(const EncodingSpec& spec);

}  // namespace ropecheck::props::detail
