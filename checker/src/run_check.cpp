// One check, start to verdict (run_check.hpp).
#include "ropecheck/checker/run_check.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "ropecheck/io/memory_budget.hpp"
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

std::map<std::string, std::string> parse_name_map(const std::vector<std::string>& items) {
  std::map<std::string, std::string> m;
  for (const std::string& item : items) {
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      throw InputError("--map '" + item + "': expected GOLDEN_NAME=CANDIDATE_NAME (e.g. q_rot.bf16=query_out)");
    if (!m.emplace(item.substr(0, eq), item.substr(eq + 1)).second)
      throw InputError("--map: golden output '" + item.substr(0, eq) + "' is mapped twice");
  }
  return m;
}

Candidate read_candidate_file(const std::filesystem::path& path, const golden::GoldenSet& golden) {
  Candidate c;
  c.tensors = io::read_tensor_file(path, "--candidate", largest_candidate_member(golden));
  c.source = {{"kind", "file"}, {"path", path.string()}};
  c.file = path;
  return c;
}

namespace {

// The header lines and candidate_source of a kernel's run: its title and output count, its notes, the
// calls that failed.
void describe_kernel_run(Candidate& c, const std::string& title, std::size_t outputs, const std::vector<std::string>& notes,
                         std::vector<KernelFailure> run_failures, std::string declined) {
  c.header.clear();
  c.header.push_back(fmt::format("{}: {} output tensors", title, outputs));
  for (const std::string& n : notes) c.header.push_back("note: " + n);
  nlohmann::json failures = nlohmann::json::array();
  for (const KernelFailure& f : run_failures) {
    c.header.push_back("KERNEL FAILURE: " + f.message);
    failures.push_back({{"outputs", f.outputs}, {"message", f.message}});
  }
  c.failures = std::move(run_failures);
  c.declined = std::move(declined);
  if (!c.declined.empty()) c.header.push_back("DECLINED: " + c.declined);
  c.source["notes"] = notes;
  if (c.source.contains("failures") || c.kernel_failed()) c.source["failures"] = failures;
}

// What the check reads: the candidate's blocks, or its tensors viewed in place; --layout applied.
std::shared_ptr<CandidateSource> source_of(Candidate& c, CandidateLayout layout) {
  std::shared_ptr<CandidateSource> s = c.blocks ? c.blocks : memory_candidate(std::move(c.tensors));
  return with_layout(std::move(s), layout);
}

// After the check: the kernel's run ended (KernelBlocks::finish: late writes, a host stopped) and its
// header written (its failures are known now).
void finish_candidate(Candidate& c) {
  if (!c.kernel) return;
  c.kernel->finish();
  describe_kernel_run(c, c.kernel_title, c.kernel->tensors().size(), c.kernel->notes(), c.kernel->failures(),
                      c.kernel->declined());
}

// The check's part: a candidate declined up front (Python's `declined`) is not read; a kernel that
// declines the set says so when the check prepares it (stream_check_part).
CheckPart check_part_of(const golden::GoldenSet& golden, Candidate& candidate, CandidateSource* source,
                        const CheckRequest& request, const Shard& shard) {
  if (!candidate.declined.empty()) return declined_check_part(golden, request.options, shard, candidate.declined);
  CheckOptions options = request.options;
  options.diagnose_scores = options.diagnose_scores && request.diagnose != CheckRequest::Diagnose::never;
  CheckPart part = check_detail::stream_check_part(golden, *source, options, shard);
  finish_candidate(candidate);
  return part;
}

// The candidate and the golden tensors the diagnosis reads, whole, when they fit in the budget.
std::optional<Diagnosis> diagnose_within(const golden::GoldenSet& golden, CandidateSource& source, const CheckReport& report,
                                         const CheckRequest& request) {
  std::uint64_t need = check_detail::kProcessReserve;
  for (const CandidateTensor& t : source.tensors()) need += static_cast<std::uint64_t>(t.numel()) * io::dtype_size(t.dtype);
  for (const golden::ManifestFile& f : golden.files()) need += f.bytes;  // every file a diagnosis may load
  const std::uint64_t limit = request.options.max_memory ? request.options.max_memory : kDefaultMaxMemory;
  if (need > limit) {
    Diagnosis d;
    d.applicable = false;
    d.not_applicable_reason = "the diagnosis reads the candidate and the golden set whole: about " + io::format_bytes(need) +
                              ", more than the --max-memory limit of " + io::format_bytes(limit);
    d.conclusion = "no diagnosis: " + d.not_applicable_reason;
    return d;
  }
  DiagnoseOptions dopt;
  dopt.threads = request.options.threads;
  return checker::diagnose(golden, source.whole(golden), report, dopt, request.diagnose == CheckRequest::Diagnose::always);
}

}  // namespace

Candidate run_kernel_candidate(kut::KernelUnderTest& kernel, const std::string& title, nlohmann::json source,
                               const golden::GoldenSet& golden) {
  KernelRun run = run_kernel(kernel, golden);
  Candidate c;
  c.source = std::move(source);
  describe_kernel_run(c, title, run.tensors.size(), run.notes, std::move(run.failures), std::move(run.declined));
  c.tensors = std::move(run.tensors);
  return c;
}

Candidate open_candidate_file(const std::filesystem::path& path, const golden::GoldenSet& golden) {
  Candidate c;
  c.blocks = file_candidate(path, largest_candidate_member(golden));
  c.source = {{"kind", "file"}, {"path", path.string()}};
  c.file = path;
  return c;
}

Candidate kernel_candidate(std::shared_ptr<kut::KernelUnderTest> kernel, const std::string& title, nlohmann::json source) {
  Candidate c;
  c.kernel = std::make_shared<KernelBlocks>(std::move(kernel));
  c.blocks = c.kernel;
  c.kernel_title = title;
  c.source = std::move(source);
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
  const std::shared_ptr<CandidateSource> source = candidate.declined.empty() ? source_of(candidate, request.layout) : nullptr;
  CheckOutcome o;
  o.report = finalize(check_part_of(golden, candidate, source.get(), request, Shard{}));
  o.source = std::move(candidate.source);
  o.header = std::move(candidate.header);
  o.kernel_failed = candidate.kernel_failed();
  if (!candidate.declined.empty()) {  // not tested: nothing to diagnose or to compare with a baseline
    o.verdict = o.kernel_failed ? Verdict::fail : o.report.verdict;
    return o;
  }
  using D = CheckRequest::Diagnose;
  const bool diagnose = request.diagnose == D::always || (request.diagnose == D::if_failing && o.report.verdict == Verdict::fail);
  if (!o.kernel_failed && diagnose)  // a failed kernel's NaNs are not a mistake to explain
    o.diagnosis = diagnose_within(golden, *source, o.report, request);
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
  const std::shared_ptr<CandidateSource> source = candidate.declined.empty() ? source_of(candidate, request.layout) : nullptr;
  // A file's identity is its content: hashed while the check reads it.
  std::optional<io::BackgroundHashes> file_hash;
  if (!candidate.file.empty()) {
    std::shared_ptr<const io::MappedFile> f = source ? source->file() : nullptr;
    file_hash.emplace(std::vector{f ? f : io::MappedFile::open(candidate.file, candidate.file.string())}, 1);
  }
  const CheckPart part = check_part_of(golden, candidate, source.get(), request, shard);
  // What every part of one run shares besides the set and the criterion: the candidate's identity (a
  // file's content, not its path; a kernel's source without what its run noted) and the options.
  nlohmann::json id = candidate.source;
  if (file_hash) id = {{"kind", "file"}, {"sha256", file_hash->wait().front()}};
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
