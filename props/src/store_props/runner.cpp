// run_store_cases (runner.hpp): the verdict is fail on a failing case, else not tested when some class
// bound a case read was saturated (its elements are not tested: core/verdict.hpp), else pass.
#include "runner.hpp"

#include <stdexcept>

#include <rapidcheck.h>

namespace ropecheck::props::detail {

namespace {

class Quiet final : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};

}  // namespace

RopeSpec rotation_only(const EncodingSpec& spec) {
  if (spec.family != Family::rope) throw std::invalid_argument("the storage properties need a RoPE spec");
  RopeSpec r = spec.rope;
  r.q_norm.reset(), r.k_norm.reset();
  return r;
}

StorePropertyOutcome run_store_cases(const std::string& property, const std::string& store, const EncodingSpec& spec,
                                     const StorePropsOptions& options, const std::function<void(Ctx&)>& one_case) {
  TargetInfo info;
  info.name = "recipe";
  auto stand_in = make_function_target(info, [](const EncodingSpec&, std::span<const Position>, int, std::span<const double>,
                                                std::span<double>) { return false; });
  Ctx ctx{*stand_in, &spec, options.max_position};
  const CurrentCtx current(ctx);
  rc::detail::TestParams params;
  params.seed = options.seed;
  params.maxSuccess = options.cases;
  params.maxSize = 100;
  params.disableShrinking = true;
  Quiet listener;
  const auto result = rc::detail::checkProperty(
      rc::detail::toProperty([&] {
        if (ctx.counting) ++ctx.cases;
        try {
          one_case(ctx);
        } catch (...) {
          ctx.counting = false;  // later (shrinking) runs are not counted
          throw;
        }
      }),
      rc::detail::TestMetadata{property, property}, params, listener);
  StorePropertyOutcome o;
  o.property = property, o.store = store, o.seed = options.seed;
  o.cases = ctx.cases, o.worst_margin = ctx.worst, o.bounds = ctx.bounds, o.saturated = ctx.saturated;
  rc::detail::FailureResult failure;
  rc::detail::Error error;
  if (result.match(failure)) {
    o.verdict = Verdict::fail;
    o.counterexample = ctx.fail_desc.empty() ? failure.description : ctx.fail_desc;
  } else if (result.match(error)) {
    o.verdict = Verdict::fail;
    o.counterexample = "error: " + error.description;
  } else if (ctx.saturated > 0) {
    o.verdict = Verdict::not_tested;
  }
  return o;
}

}  // namespace ropecheck::props::detail
