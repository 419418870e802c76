// check_candidate: which candidate tensor answers which golden output (same name, base name with
// the candidate's dtype, or --map), what was asked for (--only), and the set's verdict from the
// per-tensor checks.
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "check_internal.hpp"
#include "ropecheck/checker/check_part.hpp"
#include "ropecheck/checker/baseline.hpp"
#include "ropecheck/checker/diagnose.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"

namespace ropecheck::checker {
// The checker's vocabulary from the modules below it.
using golden::GoldenSet;
using golden::ManifestTensor;
using io::Tensor;
using io::TensorDType;

using accuracy::AccuracyClass;
using check_detail::base_of;
using check_detail::float_dtype;
using check_detail::join;

std::optional<AccuracyClass> TensorReport::best_class() const {
  for (const ClassResult& c : classes)
    if (c.satisfied) return c.accuracy_class;
  return std::nullopt;
}

std::string_view to_string(ClassState s) {
  return s == ClassState::satisfied ? "satisfied" : (s == ClassState::violated ? "violated" : "not-tested");
}

std::vector<AccuracyClass> CheckReport::not_tested_classes() const {
  std::vector<AccuracyClass> out;
  for (AccuracyClass c : accuracy::kAccuracyClasses) {
    bool violated = false, untested = false;
    for (const TensorReport& t : tensors)
      for (const ClassResult& r : t.classes)
        if (r.accuracy_class == c) {
          violated = violated || r.state == ClassState::violated;
          untested = untested || r.state == ClassState::not_tested;
        }
    if (untested && !violated) out.push_back(c);
  }
  return out;
}

std::vector<AccuracyClass> CheckReport::satisfied_classes() const {
  std::vector<AccuracyClass> out;
  for (AccuracyClass c : accuracy::kAccuracyClasses) {
    bool all = !tensors.empty();
    for (const TensorReport& t : tensors)
      for (const ClassResult& r : t.classes)
        if (r.accuracy_class == c && !r.satisfied) all = false;
    if (all) out.push_back(c);
  }
  return out;
}

namespace check_detail {

std::vector<std::string> judged_names(const GoldenSet& golden) {
  std::vector<std::string> out = golden.output_names();
  for (const std::string& s : score_outputs(golden)) out.push_back(s);
  for (const std::string& s : attention_output_names(golden)) out.push_back(s);
  for (const std::string& s : store_outputs(golden)) out.push_back(s);
  return out;
}

// What was asked for (CheckOptions::only). The f64 copy of each output is the truth every check
// compares with, written whatever --dtypes said: asked for only when matched, named exactly, or when
// f64 is the set's only dtype. InputError for an --only item the set does not have.
std::set<std::string> asked_outputs(const GoldenSet& golden, const CheckOptions& options,
                                    const std::map<std::string, std::size_t>& match) {
  const std::vector<std::string> outputs = judged_names(golden);
  const std::set<std::string> output_set(outputs.begin(), outputs.end());
  std::set<std::string> bases;
  for (const std::string& o : outputs) bases.insert(base_of(o));
  const bool f64_only = golden.dtypes().size() == 1;
  auto truth_copy = [&](const std::string& o) { return !f64_only && o == base_of(o) + ".f64" && !match.count(o); };
  std::set<std::string> asked;
  if (options.only.empty()) {
    for (const std::string& o : outputs)
      if (!truth_copy(o)) asked.insert(o);
    return asked;
  }
  for (const std::string& item : options.only) {
    if (output_set.count(item)) {
      asked.insert(item);
    } else if (bases.count(item)) {
      for (const std::string& o : outputs)
        if (base_of(o) == item && !truth_copy(o)) asked.insert(o);
    } else {
      throw InputError("--only " + sanitize(item) + ": the golden set has no output or base " + quote_name(item) +
                        " (outputs: " + join(outputs) + ")");
    }
  }
  return asked;
}

// The part's header: the set, the criterion and the shard's tokens.
CheckPart part_header(const GoldenSet& golden, const CheckOptions& options, const Shard& shard) {
  CheckPart part;
  part.shard = shard;
  part.total_tokens = golden.tokens();
  std::tie(part.first_token, part.last_token) = shard_range(part.total_tokens, shard, "tokens of the golden set");
  part.worst_count = options.worst_count;
  CheckReport& rep = part.header;
  rep.golden_dir = golden.dir().string();
  rep.spec_name = golden.spec().name;
  rep.golden_fingerprint = golden_fingerprint(golden);
  rep.criterion = options.criterion;
  return part;
}

}  // namespace check_detail

CheckPart declined_check_part(const GoldenSet& golden, const CheckOptions& options, const Shard& shard,
                              const std::string& reason) {
  validate(options.criterion);
  const std::set<std::string> asked = check_detail::asked_outputs(golden, options, {});
  CheckPart part = check_detail::part_header(golden, options, shard);
  for (const std::string& o : check_detail::judged_names(golden)) {
    part.header.unchecked_golden.push_back(o);
    if (asked.count(o)) part.header.not_tested.push_back(o);
  }
  part.header.declined = reason.empty() ? "it gave no reason" : reason;
  return part;
}

namespace check_detail {

Matched match_candidate(const GoldenSet& golden, CandidateSource& source, const CheckOptions& options) {
  const std::vector<CandidateTensor>& candidate = source.tensors();
  const std::vector<std::string> outputs = judged_names(golden);
  const std::set<std::string> output_set(outputs.begin(), outputs.end());
  std::set<std::string> bases;
  for (const std::string& o : outputs) bases.insert(base_of(o));

  std::map<std::string, std::size_t> by_name;  // candidate name -> index
  std::vector<std::string> cand_names;
  for (std::size_t i = 0; i < candidate.size(); ++i) {
    if (!by_name.emplace(candidate[i].name, i).second)
      throw InputError("the candidate has two tensors named " + quote_name(candidate[i].name));
    cand_names.push_back(candidate[i].name);
  }

  std::map<std::string, std::size_t> match;  // golden output -> candidate index
  std::vector<bool> used(candidate.size(), false);
  auto assign = [&](const std::string& g, std::size_t ci, const std::string& how) {
    if (match.count(g))
      throw InputError("two candidate tensors resolve to golden output " + quote_name(g) + ": " +
                        quote_name(candidate[match[g]].name) + " and " + quote_name(candidate[ci].name) +
                        " (" + how + ")");
    match[g] = ci;
    used[ci] = true;
  };
  for (const auto& [g, c] : options.name_map) {
    if (!output_set.count(g))
      throw InputError("--map " + sanitize(g) + "=" + sanitize(c) + ": the golden set has no output " +
                        quote_name(g) + " (outputs: " + join(outputs) + ")");
    const auto it = by_name.find(c);
    if (it == by_name.end())
      throw InputError("--map " + sanitize(g) + "=" + sanitize(c) + ": the candidate has no tensor " +
                        quote_name(c) + " (it has: " + join(cand_names) + ")");
    if (used[it->second]) throw InputError("--map: candidate tensor " + quote_name(c) + " is mapped twice");
    assign(g, it->second, "--map");
  }
  std::vector<std::string> ignored;
  for (std::size_t i = 0; i < candidate.size(); ++i) {
    if (used[i]) continue;
    const CandidateTensor& t = candidate[i];
    if (output_set.count(t.name)) {
      assign(t.name, i, "same name");
    } else if (bases.count(t.name)) {
      const std::optional<DType> d = float_dtype(t.dtype);
      const std::string target = t.name + "." + (d ? std::string(to_string(*d)) : std::string(to_string(t.dtype)));
      if (!output_set.count(target)) {
        std::vector<std::string> have;
        for (const std::string& o : outputs)
          if (base_of(o) == t.name) have.push_back(o);
        throw InputError("candidate tensor " + quote_name(t.name) + " (" + std::string(to_string(t.dtype)) +
                          ") resolves to " + quote_name(target) + ", which the golden set does not have (it has " +
                          join(have) + ")");
      }
      assign(target, i, "base name with the candidate's dtype");
    } else {
      ignored.push_back(t.name);
    }
  }
  if (match.empty())
    throw InputError("no candidate tensor matches a golden output: the candidate has " + join(cand_names) +
                      "; the golden outputs are " + join(outputs) +
                      " (name a tensor like a golden output, use a base name such as q_rot, or --map GOLDEN=CANDIDATE)");

  // Dtypes and shapes must match the manifest.
  for (const auto& [g, ci] : match) {
    const ManifestTensor& m = *golden.find(g);
    const CandidateTensor& t = candidate[ci];
    // .npy / .npz have no FP8 type: a u8 tensor holds an FP8 store's bit patterns, read as the golden
    // tensor's format (GOLDEN_FORMAT.md, "FP8"); a tensor typed as the other FP8 format is refused.
    const bool fp8_bits =
        t.dtype == io::TensorDType::u8 && (m.dtype == io::TensorDType::e4m3fn || m.dtype == io::TensorDType::e5m2);
    if (t.dtype != m.dtype && !fp8_bits)
      throw InputError(g + ": candidate tensor " + quote_name(t.name) + " is " + std::string(to_string(t.dtype)) +
                        " but the golden tensor is " + std::string(to_string(m.dtype)));
    if (t.shape != m.shape) {
      const std::string slip =
          shape_slip_of(source, ci, base_of(g), m.shape, (options.max_memory ? options.max_memory : kDefaultMaxMemory) / 2);
      throw InputError(g + ": candidate tensor " + quote_name(t.name) + " has shape " +
                        io::shape_for_message(t.shape) + " but the golden tensor has shape " +
                        io::shape_for_message(m.shape) + (slip.empty() ? "" : ": " + slip));
    }
  }

  const std::set<std::string> asked = asked_outputs(golden, options, match);

  Matched out;
  out.ignored = ignored;
  for (const std::string& o : outputs) {
    const auto it = match.find(o);
    if (it == match.end() || !asked.count(o)) {
      out.unchecked.push_back(o);
      if (asked.count(o)) out.not_tested.push_back(o);
      continue;
    }
    const std::string& role = golden.find(o)->role;
    if (role == "score") out.scores = {o, it->second};
    else if (role == "attention") out.attention.emplace_back(o, it->second);
    else if (role == "store") out.stores.emplace_back(o, it->second);
    else out.checked.emplace_back(o, it->second);
  }
  // A matched store's scales and biases come with it (stores.hpp): not ignored.
  for (const auto& [o, ci] : out.stores)
    for (const std::string& suffix : store_companions(golden, o))
      std::erase(out.ignored, candidate[ci].name + suffix);
  return out;
}

}  // namespace check_detail

CheckPart check_candidate_part(const GoldenSet& golden, const std::vector<Tensor>& candidate, const CheckOptions& options,
                               const Shard& shard) {
  std::vector<TensorView> views;
  for (const Tensor& t : candidate) views.push_back({{t.name, t.dtype, t.shape}, {t.data.data(), t.data.size()}});
  const std::shared_ptr<CandidateSource> source = memory_candidate(std::move(views));
  return check_detail::stream_check_part(golden, *source, options, shard);
}

CheckReport check_candidate(const GoldenSet& golden, const std::vector<Tensor>& candidate, const CheckOptions& options) {
  return finalize(check_candidate_part(golden, candidate, options, Shard{}));
}

}  // namespace ropecheck::checker
