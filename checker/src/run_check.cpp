// One check, start to verdict (run_check.hpp).
#include "ropecheck/checker/run_check.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "ropecheck/io/sha256.hpp"
#include "ropecheck/io/tensor_file.hpp"

namespace ropecheck::checker {
namespace {

std::string class_names() {
  std::string s;
  for (accuracy::AccuracyClass c : accuracy::kAccuracyClasses) s += (s.empty() ? "" : ", ") + std::string(accuracy::to_string(c));
  return s;
}

// A candidate tensor larger than the golden set's largest tensor can never match one, so an .npz member
// declaring more is refused before it is inflated (plus room for the .npy header).
std::uint64_t largest_candidate_member(const golden::GoldenSet& g) {
  std::uint64_t largest = 0;
  for (const golden::ManifestTensor& t : g.tensors()) {
    double n = static_cast<double>(io::dtype_size(t.dtype));
    for (std::int64_t d : t.shape) n *= static_cast<double>(d);
    largest = std::max(largest, static_cast<std::uint64_t>(std::min(n, 0x1p62)));
  }
  return largest + (std::uint64_t{1} << 16);
}



}  // namespace

void validate(const Criterion& c) {
  if (c.kind == Criterion::Kind::max_ulp && !(c.max_ulp >= 0))
    throw InputError("--max-ulp: must be a non-negative number, got " + fmt::format("{}", c.max_ulp));
  if (c.kind == Criterion::Kind::tolerance && !(c.atol >= 0 && std::isfinite(c.atol)))
    throw InputError("--atol: must be a finite non-negative number");
  if (c.kind == Criterion::Kind::tolerance && !(c.rtol >= 0 && std::isfinite(c.rtol)))
    throw InputError("--rtol: must be a finite non-negative number");
}

Criterion parse_criterion(const std::optional<std::string>& cls, std::optional<double> max_ulp, std::optional<double> atol,
                          std::optional<double> rtol, bool python) {
  const auto name = [python](const char* cli, const char* py) { return std::string(python ? py : cli); };
  if ((cls ? 1 : 0) + (max_ulp ? 1 : 0) + (atol || rtol ? 1 : 0) > 1)
    throw InputError(python ? "give one criterion: cls, max_ulp, or atol with rtol"
                            : "give one criterion: --class, --max-ulp, or --atol with --rtol");
  if (atol.has_value() != rtol.has_value())
    throw InputError(name("--atol and --rtol", "atol and rtol") + " go together");
  Criterion c = Criterion::of_class(accuracy::kDefaultAccuracyClass);
  if (cls) {
    const std::optional<accuracy::AccuracyClass> k = accuracy::parse_accuracy_class(*cls);
    if (!k) throw InputError(name("--class", "cls") + ": unknown class '" + *cls + "' (known: " + class_names() + ")");
    c = Criterion::of_class(*k);
  } else if (max_ulp) {
    c = Criterion::of_max_ulp(*max_ulp);
  } else if (atol) {
    c = Criterion::of_tolerance(*atol, *rtol);
  }
  try {
    validate(c);
  } catch (const InputError& e) {
    if (!python) throw;
    std::string m = e.what();  // the CLI's wording, the option spelled as Python spells it
    for (const auto& [cli, py] : {std::pair{"--max-ulp", "max_ulp"}, std::pair{"--atol", "atol"}, std::pair{"--rtol", "rtol"}})
      if (m.starts_with(cli)) m = py + m.substr(std::string_view(cli).size());
    throw InputError(m);
  }
  return c;
}

Candidate read_candidate_file(const std::filesystem::path& path, const golden::GoldenSet& golden) {
  Candidate c;
  c.tensors = io::read_tensor_file(path, "--candidate", largest_candidate_member(golden));
  c.source = {{"kind", "file"}, {"path", path.string()}};
  c.file = path;
  return c;
}

Candidate run_kernel_candidate(kut::KernelUnderTest& kernel, const std::string& title, nlohmann::json source,
                               const golden::GoldenSet& golden) {
  KernelRun run = run_kernel(kernel, golden);
  Candidate c;
  c.header.push_back(fmt::format("{}: {} output tensors", title, run.tensors.size()));
  for (const std::string& n : run.notes) c.header.push_back("note: " + n);
  nlohmann::json failures = nlohmann::json::array();
  for (const KernelFailure& f : run.failures) {
    c.header.push_back("KERNEL FAILURE: " + f.message);
    failures.push_back({{"outputs", f.outputs}, {"message", f.message}});
  }
  c.failures = std::move(run.failures);
  c.declined = std::move(run.declined);
  if (!c.declined.empty()) c.header.push_back("DECLINED: " + c.declined);
  c.source = std::move(source);
  c.source["notes"] = run.notes;
  if (c.source.contains("failures") || c.kernel_failed()) c.source["failures"] = failures;
  c.tensors = std::move(run.tensors);
  return c;
}

CheckOutcome merged_outcome(CheckReport report, nlohmann::json source, bool kernel_failed, std::optional<Diagnosis> diagnosis) {
  CheckOutcome o;
  o.report = std::move(report);
  o.source = std::move(source);
  o.kernel_failed = kernel_failed;
  o.diagnosis = std::move(diagnosis);
  o.verdict = kernel_failed ? Verdict::fail : o.report.verdict;
  return o;
}

void check_request(const golden::GoldenSet& golden, const CheckRequest& request) {
  validate(request.options.criterion);
  if (request.baseline) require_same_setup(*request.baseline, golden::golden_fingerprint(golden), request.options.criterion);
}

CheckOutcome run_check(const golden::GoldenSet& golden, Candidate candidate, const CheckRequest& request) {
  check_request(golden, request);
  apply_candidate_layout(candidate.tensors, request.layout);
  CheckOutcome o;
  o.source = std::move(candidate.source);
  o.header = std::move(candidate.header);
  o.kernel_failed = candidate.kernel_failed();
  if (!candidate.declined.empty()) {
    o.report = finalize(declined_check_part(golden, request.options, Shard{}, candidate.declined));
    o.verdict = o.kernel_failed ? Verdict::fail : o.report.verdict;
    return o;
  }
  o.report = check_candidate(golden, candidate.tensors, request.options);
  using D = CheckRequest::Diagnose;
  const bool diagnose = request.diagnose == D::always || (request.diagnose == D::if_failing && o.report.verdict == Verdict::fail);
  if (!o.kernel_failed && diagnose) {  // a failed kernel's NaNs are not a mistake to explain
    DiagnoseOptions dopt;
    dopt.threads = request.options.threads;
    o.diagnosis = checker::diagnose(golden, candidate.tensors, o.report, dopt, request.diagnose == D::always);
  }
  if (request.baseline) o.baseline = compare_with_baseline(o.report, *request.baseline, {request.max_growth, 1.0});
  o.verdict = o.kernel_failed || (o.baseline && !o.baseline->pass()) ? Verdict::fail : o.report.verdict;
  return o;
}

nlohmann::json CheckOutcome::to_json() const {
  nlohmann::json j = report.to_json();
  j["candidate_source"] = source;
  if (baseline) j["baseline"] = baseline->to_json();
  if (diagnosis) j["diagnosis"] = diagnosis->to_json();
  if (kernel_failed) {  // a regression alone keeps the report's own verdict: the "baseline" block says it failed
    j["pass"] = false;
    j["verdict"] = "fail";
  }
  return j;
}

std::string CheckOutcome::summary() const {
  std::string s;
  for (const std::string& line : header) s += line + "\n";
  if (!header.empty()) s += "\n";
  s += report.summary();
  if (diagnosis) s += diagnosis->summary();
  if (baseline) s += baseline->summary();
  if (kernel_failed && report.verdict != Verdict::fail)  // merged parts have no header: their failures are in the parts
    s += header.empty() ? "FAIL: the kernel failed (see the parts' KERNEL FAILURE)\n"
                        : "FAIL: the kernel failed (see KERNEL FAILURE above)\n";
  return s;
}

CheckPartOutcome run_check_part(const golden::GoldenSet& golden, Candidate candidate, const CheckRequest& request,
                                const Shard& shard, const nlohmann::json& run_options) {
  check_request(golden, request);
  apply_candidate_layout(candidate.tensors, request.layout);
  const CheckPart part = candidate.declined.empty()
                             ? check_candidate_part(golden, candidate.tensors, request.options, shard)
                             : declined_check_part(golden, request.options, shard, candidate.declined);
  // What every part of one run shares besides the set and the criterion: the candidate's identity (a
  // file's content, not its path; a kernel's source without what its run noted) and the options.
  nlohmann::json id = candidate.source;
  if (!candidate.file.empty()) id = {{"kind", "file"}, {"sha256", io::sha256_file(candidate.file)}};
  id.erase("notes");
  id.erase("failures");
  nlohmann::json run = {{"candidate", id}};
  for (const auto& [key, value] : run_options.items()) run[key] = value;
  run["kernel_failed"] = candidate.kernel_failed();
  CheckPartOutcome o;
  o.part = part_to_json(part, run, candidate.source);
  const CheckReport prep = finalize(part);
  for (const std::string& line : candidate.header) o.summary += line + "\n";
  if (!candidate.header.empty()) o.summary += "\n";
  o.summary += prep.summary();
  o.summary += fmt::format("PART {}: tokens [{}, {}) of {}; not a verdict on the whole run: `ropecheck merge` the {} parts\n",
                           shard.text(), part.first_token, part.last_token, part.total_tokens, shard.count);
  o.verdict = candidate.kernel_failed() ? Verdict::fail : prep.verdict;
  return o;
}

}  // namespace ropecheck::checker
