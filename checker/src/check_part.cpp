// Mergeable check statistics (check_part.hpp): merging, the report derived from them, and the part
// file's JSON. Doubles in a part are written so that they read back to the same bits (non-finite ones
// as "inf", "-inf", "nan"; sums exactly, ExactSum::to_text).
#include "ropecheck/checker/check_part.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "check_internal.hpp"
#include "check_part_json.hpp"
#include "json_number.hpp"
#include "ropecheck/io/part_file.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"

#ifndef ROPECHECK_VERSION
#define ROPECHECK_VERSION "unknown"
#endif

namespace ropecheck::checker {
// The checker's vocabulary from the modules below it.
using golden::GoldenSet;
using golden::ManifestTensor;
using io::Tensor;
using io::TensorDType;
using io::ExactSum;
using io::PartReader;
using io::exact_number;
using io::order_parts;

using accuracy::AccuracyClass;
using check_detail::g4;
using check_detail::kInf;
using check_detail::note_first;

namespace {

constexpr const char* kPartFormat = "ropecheck-check-part";
constexpr int kPartVersion = 2;  // 2: per-class saturation, worst elements' saturation, declined

bool ranks_before(const ElementReport& a, const ElementReport& b) {
  return a.score != b.score ? a.score > b.score : a.index < b.index;
}

void max_into(double& into, double v) {
  if (v > into) into = v;
}

}  // namespace

void ErrorSums::merge(const ErrorSums& o) {
  n += o.n;
  max_into(max_b, o.max_b);
  max_into(max_u, o.max_u);
  sum_b.merge(o.sum_b);
  sq_b.merge(o.sq_b);
  sum_u.merge(o.sum_u);
  sq_u.merge(o.sq_u);
}

ErrorStats ErrorSums::result() const {
  if (n == 0) return {};
  const double dn = static_cast<double>(n);
  return {n, {max_b, sum_b.value() / dn, std::sqrt(sq_b.value() / dn)}, {max_u, sum_u.value() / dn, std::sqrt(sq_u.value() / dn)}};
}

void TensorStats::merge_counts(const TensorStats& o) {
  elements += o.elements;
  identical += o.identical;
  nan += o.nan;
  inf += o.inf;
  mismatches += o.mismatches;
  finite += o.finite;
  max_into(max_ulps, o.max_ulps);
  max_into(max_abs, o.max_abs);
  max_into(max_rel, o.max_rel);
  max_into(max_pair, o.max_pair);
  sum_ulps.merge(o.sum_ulps);
  sum_pair.merge(o.sum_pair);
  sum_sq_err.merge(o.sum_sq_err);
  sum_sq_truth.merge(o.sum_sq_truth);
  for (std::size_t k = 0; k < classes.size(); ++k) {
    classes[k].violations += o.classes[k].violations;
    if (o.classes[k].first) note_first(classes[k].first, *o.classes[k].first);
    max_into(classes[k].worst, o.classes[k].worst);
    classes[k].saturated += o.classes[k].saturated;
    if (o.classes[k].first_saturated) note_first(classes[k].first_saturated, *o.classes[k].first_saturated);
  }
  violations += o.violations;
  if (o.first) note_first(first, *o.first);
  saturated += o.saturated;
  if (o.first_saturated) note_first(first_saturated, *o.first_saturated);
  max_into(worst_score, o.worst_score);
  for (std::size_t b = 0; b < bins.size(); ++b) {
    BinStats& x = bins[b];
    const BinStats& y = o.bins[b];
    x.elements += y.elements;
    x.violations += y.violations;
    x.saturated += y.saturated;
    max_into(x.max_pair, y.max_pair);
    max_into(x.max_ulps, y.max_ulps);
    x.err.merge(y.err);
  }
  err.merge(o.err);
  passthrough += o.passthrough;
  passthrough_differing += o.passthrough_differing;
  if (o.first_passthrough_differing) note_first(first_passthrough_differing, *o.first_passthrough_differing);
}

void merge_worst(std::vector<ElementReport>& into, const std::vector<ElementReport>& more, std::size_t K) {
  into.insert(into.end(), more.begin(), more.end());
  std::sort(into.begin(), into.end(), ranks_before);
  if (into.size() > K) into.resize(K);
}

TensorReport finalize(const TensorStats& s, const Criterion& cr) {
  TensorReport rep;
  rep.golden_name = s.golden_name;
  rep.candidate_name = s.candidate_name;
  rep.base = s.base;
  rep.dtype = s.dtype;
  rep.shape = s.shape;
  rep.elements = s.elements;
  rep.identical = s.identical;
  rep.nan_count = s.nan;
  rep.inf_count = s.inf;
  rep.nonfinite_mismatches = s.mismatches;
  rep.max_ulps = s.max_ulps;
  rep.max_abs_error = s.max_abs;
  rep.max_rel_error = s.max_rel;
  rep.max_pair_relative = s.max_pair;
  rep.error = s.err.result();
  if (s.finite > 0) {
    rep.mean_ulps = s.sum_ulps.value() / static_cast<double>(s.finite);
    rep.mean_pair_relative = s.sum_pair.value() / static_cast<double>(s.finite);
  }
  const double sq_err = s.sum_sq_err.value(), sq_truth = s.sum_sq_truth.value();
  rep.nmse = s.mismatches > 0 ? kInf : (sq_truth > 0 ? sq_err / sq_truth : (sq_err == 0 ? 0 : kInf));
  for (std::size_t k = 0; k < s.classes.size(); ++k) {
    const ClassStats& c = s.classes[k];
    ClassResult r;
    r.accuracy_class = accuracy::kAccuracyClasses[k];
    r.state = c.violations > 0 ? ClassState::violated : (c.saturated > 0 ? ClassState::not_tested : ClassState::satisfied);
    r.satisfied = r.state == ClassState::satisfied;
    r.violations = c.violations;
    r.first_violating_position = c.first;
    r.saturated = c.saturated;
    r.first_saturated_position = c.first_saturated;
    r.worst_margin = c.worst;
    rep.classes.push_back(r);
  }
  rep.saturated = s.saturated;
  rep.first_saturated_position = s.first_saturated;
  if (s.violations > 0) {
    rep.verdict = ropecheck::Verdict::fail;
    rep.reason = fmt::format("{} element{} violate {} (first at position {})", s.violations, s.violations == 1 ? "" : "s",
                             cr.to_string(), s.first.value_or(-1));
  } else if (s.saturated > 0) {
    rep.verdict = ropecheck::Verdict::not_tested;
    rep.reason = fmt::format("{} of {} elements not discriminated by {} (saturated: bound >= the pair's magnitude, an "
                             "all-zero output passes) from position {}; {}",
                             s.saturated, rep.elements, cr.to_string(), s.first_saturated.value_or(-1),
                             ropecheck::kSaturationAdvice);
  }
  if (s.passthrough > 0) {
    rep.passthrough = TensorReport::Passthrough{s.passthrough, s.passthrough_differing, s.first_passthrough_differing};
    // A copied channel is exact in every dtype (bf16-exact inputs): any difference is a failure, whatever
    // the criterion (ERROR_MODEL.md, "Pass-through channels of an MLA head").
    if (s.passthrough_differing > 0) {
      rep.verdict = ropecheck::Verdict::fail;
      rep.reason = fmt::format("{} pass-through element{} differ from the input (must be bit-exact; first at position {})",
                               s.passthrough_differing, s.passthrough_differing == 1 ? "" : "s",
                               s.first_passthrough_differing.value_or(-1)) +
                   (s.violations > 0 ? "; " + rep.reason : "");
    }
  }
  rep.pass = rep.verdict == ropecheck::Verdict::pass;
  rep.violations = s.violations;
  rep.first_violating_position = s.first;
  rep.worst_score = s.worst_score;
  for (std::size_t b = 0; b < s.bins.size(); ++b) {
    const BinStats& x = s.bins[b];
    if (x.elements == 0) continue;
    PositionBin pb;
    pb.lo = b == 0 ? 0 : std::int64_t{1} << (b - 1);
    pb.hi = b == 0 ? 1 : (b < 63 ? std::int64_t{1} << b : std::numeric_limits<std::int64_t>::max());
    pb.elements = x.elements;
    pb.max_pair_relative = x.max_pair;
    pb.max_ulps = x.max_ulps;
    pb.violations = x.violations;
    pb.error = x.err.result();
    pb.saturated = x.saturated;
    rep.bins.push_back(pb);
  }
  rep.worst = s.worst;
  return rep;
}

CheckReport finalize(const CheckPart& part) {
  CheckReport rep = part.header;
  rep.tensors.clear();
  rep.verdict = ropecheck::Verdict::pass;
  rep.reason.clear();
  std::int64_t saturated_tensors = 0;
  std::string why_stores;
  for (const TensorStats& s : part.tensors) {
    rep.tensors.push_back(finalize(s, rep.criterion));
    rep.verdict = ropecheck::combine(rep.verdict, rep.tensors.back().verdict);
    saturated_tensors += rep.tensors.back().verdict == ropecheck::Verdict::not_tested;
  }
  if (!rep.not_tested.empty()) rep.verdict = ropecheck::combine(rep.verdict, ropecheck::Verdict::not_tested);
  rep.scores = part.scores;
  if (rep.scores) rep.verdict = ropecheck::combine(rep.verdict, rep.scores->verdict);
  rep.attention = part.attention;
  for (const AttentionOutputsReport& a : rep.attention) rep.verdict = ropecheck::combine(rep.verdict, a.verdict);
  rep.stores = part.stores;
  if (rep.stores) rep.verdict = ropecheck::combine(rep.verdict, rep.stores->verdict);
  if (rep.verdict == ropecheck::Verdict::fail) {
    std::int64_t failing = 0;
    for (const TensorReport& t : rep.tensors) failing += t.verdict == ropecheck::Verdict::fail;
    rep.reason = fmt::format("{} of {} tensors fail {}", failing, rep.tensors.size(), rep.criterion.to_string());
    if (rep.scores && rep.scores->verdict == ropecheck::Verdict::fail) rep.reason += "; " + rep.scores->reason;
    for (const AttentionOutputsReport& a : rep.attention)
      if (a.verdict == ropecheck::Verdict::fail) rep.reason += "; " + a.golden_name + ": " + a.reason;
    if (rep.stores && rep.stores->verdict == ropecheck::Verdict::fail) rep.reason += "; " + rep.stores->reason;
  } else if (rep.verdict == ropecheck::Verdict::not_tested) {
    if (rep.scores && rep.scores->verdict == ropecheck::Verdict::not_tested) ++saturated_tensors;
    for (const AttentionOutputsReport& a : rep.attention) saturated_tensors += a.verdict == ropecheck::Verdict::not_tested;
    if (rep.stores && rep.stores->verdict == ropecheck::Verdict::not_tested) why_stores = rep.stores->reason;
    std::vector<std::string> why;
    if (!rep.declined.empty())
      why.push_back("the kernel declined every output asked for (" + check_detail::join(rep.not_tested, 8) +
                    "): " + rep.declined);
    else if (!rep.not_tested.empty())
      why.push_back("no candidate tensor for " + std::to_string(rep.not_tested.size()) + " asked-for golden output" +
                    (rep.not_tested.size() == 1 ? "" : "s") + " (" + check_detail::join(rep.not_tested, 8) +
                    "; name what the kernel produces with --only)");
    if (saturated_tensors > 0)
      why.push_back(std::to_string(saturated_tensors) + " tensor" + (saturated_tensors == 1 ? "" : "s") +
                    " with saturated bounds (" + std::string(ropecheck::kSaturationAdvice) + ")");
    if (!why_stores.empty()) why.push_back(why_stores);
    for (const std::string& w : why) rep.reason += (rep.reason.empty() ? "" : "; ") + w;
  }
  rep.pass = rep.verdict == ropecheck::Verdict::pass;
  return rep;
}

// ---- JSON ---------------------------------------------------------------------------------------------

namespace {

using part_json::tensor_from;
using part_json::tensor_json;


// The part's header: what a run's parts share, apart from the golden set's path.
nlohmann::json header_json(const CheckPart& p) {
  return {{"spec", p.header.spec_name},
          {"golden_fingerprint", p.header.golden_fingerprint},
          {"criterion", p.header.criterion.to_json()},
          {"worst_count", p.worst_count},
          {"ignored_candidate", p.header.ignored_candidate},
          {"unchecked_golden", p.header.unchecked_golden},
          {"not_tested", p.header.not_tested},
          {"declined", p.header.declined}};
}

Criterion criterion_from(const PartReader& r, const nlohmann::json& j) {
  const std::string kind = r.str(j, "kind");
  if (kind == "class") {
    const std::optional<AccuracyClass> c = accuracy::parse_accuracy_class(r.str(j, "class"));
    if (!c) r.bad("unknown class in 'criterion'");
    return Criterion::of_class(*c);
  }
  if (kind == "max-ulp") return Criterion::of_max_ulp(r.dbl(j, "max_ulp"));
  if (kind == "tolerance") return Criterion::of_tolerance(r.dbl(j, "atol"), r.dbl(j, "rtol"));
  r.bad("unknown criterion kind '" + kind + "'");
}

}  // namespace

nlohmann::json part_to_json(const CheckPart& part, const nlohmann::json& run, const nlohmann::json& source) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const TensorStats& s : part.tensors) tensors.push_back(tensor_json(s));
  return {{"format", kPartFormat},
          {"format_version", kPartVersion},
          {"ropecheck_version", ROPECHECK_VERSION},
          {"command", "check"},
          {"shard", {{"index", part.shard.index}, {"count", part.shard.count}}},
          {"tokens", {{"first", part.first_token}, {"last", part.last_token}, {"total", part.total_tokens}}},
          {"golden", part.header.golden_dir},
          {"header", header_json(part)},
          {"run", run},
          {"candidate_source", source},
          {"golden_files", {{"read", part.files_read}, {"hashed", part.files_hashed}}},
          {"tensors", tensors}};
}

MergedCheck merge_check_parts(const std::vector<nlohmann::json>& parts, const std::vector<std::string>& names) {
  struct Read {
    CheckPart part;
    nlohmann::json run, source;
    std::string name;
  };
  std::vector<Read> read;
  std::vector<Shard> shards;
  std::vector<nlohmann::json> identity;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const PartReader r{names[i], "check part"};
    const nlohmann::json& j = parts[i];
    Read x;
    x.name = names[i];
    x.part.shard = r.header(j, kPartFormat, kPartVersion);
    const nlohmann::json& tok = r.at(j, "tokens");
    x.part.first_token = r.i64(tok, "first");
    x.part.last_token = r.i64(tok, "last");
    x.part.total_tokens = r.i64(tok, "total");
    const nlohmann::json& h = r.at(j, "header");
    x.part.header.golden_dir = r.str(j, "golden");
    x.part.header.spec_name = r.str(h, "spec");
    x.part.header.golden_fingerprint = r.str(h, "golden_fingerprint");
    x.part.header.criterion = criterion_from(r, r.at(h, "criterion"));
    x.part.worst_count = static_cast<int>(r.i64(h, "worst_count"));
    x.part.header.ignored_candidate = r.strings(h, "ignored_candidate");
    x.part.header.unchecked_golden = r.strings(h, "unchecked_golden");
    x.part.header.not_tested = r.strings(h, "not_tested");
    x.part.header.declined = r.str(h, "declined");
    const nlohmann::json& ts = r.at(j, "tensors");
    if (!ts.is_array()) r.bad("'tensors' is not a list");
    for (const nlohmann::json& t : ts) x.part.tensors.push_back(tensor_from(r, t));
    x.run = r.at(j, "run");
    x.source = r.at(j, "candidate_source");
    const nlohmann::json& files = r.at(j, "golden_files");
    x.part.files_read = r.strings(files, "read");
    x.part.files_hashed = r.strings(files, "hashed");
    shards.push_back(x.part.shard);
    // A kernel that failed in one part only (a flaky runner) is part of the result, not another run.
    nlohmann::json same_run = x.run;
    if (same_run.is_object()) same_run.erase("kernel_failed");
    identity.push_back({{"ropecheck_version", r.str(j, "ropecheck_version")},
                        {"command", r.str(j, "command")},
                        {"total_tokens", x.part.total_tokens},
                        {"header", h},
                        {"run", same_run},
                        {"run_golden_files", x.part.files_read}});
    read.push_back(std::move(x));
  }
  std::vector<Read> ordered;
  for (std::size_t i : order_parts(shards, identity, names)) ordered.push_back(std::move(read[i]));
  read = std::move(ordered);
  const Read& first = read.front();
  MergedCheck m;
  m.whole = first.part;
  m.whole.shard = {1, 1};
  m.whole.first_token = 0;
  m.whole.last_token = first.part.total_tokens;
  m.run = first.run;
  m.source = first.source;
  // The run failed if any part's kernel did; the failing parts' KERNEL FAILURE lists are kept, in order.
  bool kernel_failed = false;
  nlohmann::json failures = nlohmann::json::array();
  for (const Read& x : read) {
    if (x.run.is_object() && x.run.value("kernel_failed", false)) kernel_failed = true;
    if (x.source.is_object() && x.source.contains("failures") && x.source["failures"].is_array())
      for (const nlohmann::json& f : x.source["failures"]) failures.push_back(f);
  }
  if (m.run.is_object() && (kernel_failed || m.run.contains("kernel_failed"))) m.run["kernel_failed"] = kernel_failed;
  if (m.source.is_object() && (kernel_failed || m.source.contains("failures"))) m.source["failures"] = failures;
  for (const Read& x : read) {
    const auto [lo, hi] = shard_range(x.part.total_tokens, x.part.shard, "tokens");
    if (x.part.first_token != lo || x.part.last_token != hi || x.part.tensors.size() != first.part.tensors.size())
      PartReader{x.name, "check part"}.bad("its tokens are not shard " + x.part.shard.text() + "'s");
    if (&x == &first) continue;
    for (std::size_t t = 0; t < m.whole.tensors.size(); ++t) {
      TensorStats& into = m.whole.tensors[t];
      const TensorStats& s = x.part.tensors[t];
      if (s.golden_name != into.golden_name || s.candidate_name != into.candidate_name || s.shape != into.shape ||
          s.dtype != into.dtype)
        PartReader{x.name, "check part"}.bad("its tensors differ from " + sanitize(first.name) + "'s");
      into.merge_counts(s);
      merge_worst(into.worst, s.worst, static_cast<std::size_t>(std::max(0, first.part.worst_count)));
    }
  }
  // Each golden file the run read was hashed by one part (files_hashed_by), before that part wrote anything.
  std::map<std::string, int> hashed;
  for (const Read& x : read)
    for (const std::string& f : x.part.files_hashed) ++hashed[f];
  for (const std::string& f : first.part.files_read)
    if (hashed[f] != 1)
      throw InputError("merge: the parts verified the hash of golden file " + quote_name(f) + " " + std::to_string(hashed[f]) +
                       " times, not once (parts of different ropecheck builds?)");
  m.whole.files_hashed = m.whole.files_read;
  for (const TensorStats& s : m.whole.tensors) {
    std::int64_t n = 1;
    for (std::int64_t d : s.shape) n *= d;
    if (s.elements != n)
      throw InputError("merge: the parts check " + std::to_string(s.elements) + " of the " + std::to_string(n) +
                        " elements of " + s.golden_name);
  }
  return m;
}

}  // namespace ropecheck::checker
