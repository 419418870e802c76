// One check, start to verdict: the entry point `ropecheck check`, `ropecheck merge` of check parts and
// Python's ropecheck.check() call, so that what passes is decided here and nowhere else.
//
// The verdict of a run is the report's (checker.hpp), failed by a kernel call that failed (a plugin that
// crashed, hung, exited or broke its buffers: its outputs read as NaN) or by an error that grew past
// --max-growth against a baseline (baseline.hpp). A failing check is diagnosed (diagnose.hpp) unless
// asked not to; a kernel failure's NaNs are never diagnosed.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/checker/baseline.hpp"
#include "ropecheck/checker/candidate_source.hpp"
#include "ropecheck/checker/check_part.hpp"
#include "ropecheck/checker/checker.hpp"
#include "ropecheck/checker/diagnose.hpp"
#include "ropecheck/checker/kernel_blocks.hpp"
#include "ropecheck/checker/kernel_run.hpp"
#include "ropecheck/core/verdict.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/kut/kernel_under_test.hpp"

namespace ropecheck::checker {

// The criterion from its options, validated (the one place): at most one of a class name, a max-ulp, or
// atol with rtol; none is the default class. `python` names the options as the Python package does
// (cls, max_ulp) rather than as the CLI does (--class, --max-ulp) in messages. InputError otherwise.
Criterion parse_criterion(const std::optional<std::string>& accuracy_class, std::optional<double> max_ulp,
                          std::optional<double> atol, std::optional<double> rtol, bool python = false);

// --map's GOLDEN=CANDIDATE items as the checker's name map (CheckOptions::name_map). InputError for an item
// without a name on each side of '=', or a golden output mapped twice.
std::map<std::string, std::string> parse_name_map(const std::vector<std::string>& items);

// What is checked: tensors (from a file, a kernel run on the golden inputs, or Python arrays) and where
// they came from. The check reads `blocks` when set (a block of tokens at a time: candidate_source.hpp),
// else `tensors`.
struct Candidate {
  std::vector<io::Tensor> tensors;
  std::shared_ptr<CandidateSource> blocks;
  std::shared_ptr<KernelBlocks> kernel;  // a kernel run by blocks (also `blocks`): the check writes its header
  std::string kernel_title;
  nlohmann::json source;               // the report's candidate_source
  std::vector<std::string> header;     // lines the text report starts with (the kernel, its notes and failures)
  std::vector<KernelFailure> failures;  // kernel calls that failed
  std::filesystem::path file;          // a file candidate's path (its SHA-256 identifies a sharded run)
  // The kernel declined every output (KernelRun::declined): its reason. The check is then not tested
  // (exit 3), as props and drift --compare judge a spec the kernel declines; never unusable input.
  std::string declined;
  bool kernel_failed() const { return !failures.empty(); }
};

// A tensor file by its extension (io/tensor_file.hpp); an .npz member larger than any tensor of the set
// is refused before it is inflated.
Candidate read_candidate_file(const std::filesystem::path& path, const golden::GoldenSet& golden);
// The kernel run on the golden inputs (kernel_run.hpp); `title` and `source` say which kernel it is.
Candidate run_kernel_candidate(kut::KernelUnderTest& kernel, const std::string& title, nlohmann::json source,
                               const golden::GoldenSet& golden);
// The same two read a block of tokens at a time during the check (what `check` and Python's check() do):
// the file read in pieces, the kernel run on each block of the golden inputs (kernel_blocks.hpp; its
// header lines and failures are known once the check has run).
Candidate open_candidate_file(const std::filesystem::path& path, const golden::GoldenSet& golden);
Candidate kernel_candidate(std::shared_ptr<kut::KernelUnderTest> kernel, const std::string& title, nlohmann::json source);

struct CheckRequest {
  CheckOptions options;
  CandidateLayout layout = CandidateLayout::thd;
  enum class Diagnose { if_failing, always, never };
  Diagnose diagnose = Diagnose::if_failing;
  std::optional<CheckBaseline> baseline;  // --baseline: read, and of the same set and criterion
  double max_growth = 2;
};

struct CheckOutcome {
  CheckReport report;
  nlohmann::json source;
  std::vector<std::string> header;
  bool kernel_failed = false;
  std::optional<Diagnosis> diagnosis;
  std::optional<BaselineComparison> baseline;
  Verdict verdict = Verdict::fail;  // the run's: the report's, failed by a kernel failure or a regression

  nlohmann::json to_json() const;  // the --report JSON (checker/CHECK_REPORT.md)
  std::string summary() const;     // the terminal report: header, per tensor, diagnosis, baseline, verdict
};

// InputError when the request cannot be run on this set (an unusable criterion, a baseline of another set
// or criterion): called by run_check, and before a candidate is made so that a kernel is not run for nothing.
void check_request(const golden::GoldenSet& golden, const CheckRequest& request);

// Checks `candidate` against `golden` (its layout applied first), a block of tokens at a time within
// request.options.max_memory; the golden files it reads are hashed meanwhile and verified before it
// returns. InputError for unusable input (a baseline of another set or criterion, mismatched names or
// shapes, a file whose hash differs from the manifest's): nothing is judged. A declined candidate is not
// tested: nothing compared, not diagnosed, not compared with the baseline. A failing check's diagnosis
// reads the candidate and the golden tensors whole: when they need more than max_memory it is not made
// (Diagnosis::applicable false, saying why).
CheckOutcome run_check(const golden::GoldenSet& golden, Candidate candidate, const CheckRequest& request);

// The outcome of merged check parts (`ropecheck merge`): their report, source, whether a part's kernel
// failed, and the diagnosis merge made again, if any.
CheckOutcome merged_outcome(CheckReport report, nlohmann::json source, bool kernel_failed,
                            std::optional<Diagnosis> diagnosis);

// One shard of a check (`check --shard I/N`): the part `ropecheck merge` joins and the terminal text.
// `run_options` is what every part of one run shares besides the set, the criterion and the candidate
// (the CLI's --only, --map and --layout as given).
struct CheckPartOutcome {
  nlohmann::json part;
  std::string summary;
  Verdict verdict = Verdict::fail;  // on this part's tokens only (a kernel failure fails it)
};
CheckPartOutcome run_check_part(const golden::GoldenSet& golden, Candidate candidate, const CheckRequest& request,
                                const Shard& shard, const nlohmann::json& run_options);

}  // namespace ropecheck::checker
