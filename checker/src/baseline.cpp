#include "ropecheck/checker/baseline.hpp"
#include "check_internal.hpp"
#include "json_number.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include <fmt/format.h>


namespace ropecheck::checker {
namespace {

using check_detail::g4;

std::string range(std::int64_t lo, std::int64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
}

using detail::num;

// Short, printable form of a JSON value for one-line messages.
std::string brief(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

struct BaselineReader {  // key lookups that fail with one line naming the file and the key
  const std::string& path;
  [[noreturn]] void fail(const std::string& what) const { throw BaselineError("--baseline " + path + ": " + what); }
  const nlohmann::json& at(const nlohmann::json& j, const char* key, const std::string& where) const {
    const auto it = j.find(key);
    if (it == j.end()) fail(where + "has no \"" + key + "\"" + (std::string(key) == "error_stats" || std::string(key) == "golden_fingerprint"
                                                             ? " (written by an older ropecheck? write the baseline again)"
                                                             : ""));
    return *it;
  }
  std::int64_t integer(const nlohmann::json& j, const char* key, const std::string& where) const {
    const nlohmann::json& v = at(j, key, where);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0) fail(where + "\"" + key + "\" is not a non-negative integer");
    return v.get<std::int64_t>();
  }
  std::string string(const nlohmann::json& j, const char* key, const std::string& where) const {
    const nlohmann::json& v = at(j, key, where);
    if (!v.is_string()) fail(where + "\"" + key + "\" is not a string");
    return v.get<std::string>();
  }
  ErrorStats stats(const nlohmann::json& j, const std::string& where) const {
    const std::optional<ErrorStats> s = error_stats_from_json(at(j, "error_stats", where));
    if (!s) fail(where + "\"error_stats\" is malformed");
    return *s;
  }
};

// current > F * max(baseline, floor), recorded with its growth.
void compare_one(BaselineComparison& out, const std::string& tensor, std::optional<std::pair<std::int64_t, std::int64_t>> bin,
                 const char* metric, double base, double cur) {
  const double ref = std::max(base, out.limit.floor);
  BaselineRegression r;
  r.tensor = tensor;
  if (bin) r.bin_lo = bin->first, r.bin_hi = bin->second;
  r.metric = metric;
  r.baseline = base;
  r.current = cur;
  r.growth = std::isinf(ref) ? (std::isinf(cur) ? 1.0 : 0.0) : cur / ref;
  ++out.compared;
  if (!out.largest || r.growth > out.largest->growth) out.largest = r;
  if (std::isnan(cur) || cur > out.limit.max_growth * ref) out.regressions.push_back(r);
}

nlohmann::json regression_json(const BaselineRegression& r) {
  return {{"tensor", r.tensor},
          {"bin", r.bin_lo ? nlohmann::json{{"lo", *r.bin_lo}, {"hi", *r.bin_hi}} : nlohmann::json(nullptr)},
          {"metric", r.metric},
          {"baseline", num(r.baseline)},
          {"current", num(r.current)},
          {"growth", num(r.growth)}};
}

}  // namespace

CheckBaseline read_check_baseline(const std::filesystem::path& path) {
  CheckBaseline b;
  b.path = path.string();
  const BaselineReader rd{b.path};
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) rd.fail(std::filesystem::exists(path, ec) ? "not a regular file" : "no such file");
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) rd.fail("cannot read the file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    std::string m = e.what();
    std::replace(m.begin(), m.end(), '\n', ' ');
    rd.fail("not JSON (" + m + ")");
  }
  if (!j.is_object()) rd.fail("not a JSON object");
  const std::string top;
  if (rd.string(j, "format", top) != "ropecheck-check-report")
    rd.fail("not a check report (format " + brief(j["format"]) + ", want \"ropecheck-check-report\")");
  // Version 2 changed what a report says about classes, not the error statistics a baseline compares.
  if (const std::int64_t v = rd.integer(j, "format_version", top); v != 1 && v != kCheckReportVersion)
    rd.fail("check report format_version " + brief(j["format_version"]) + " (want 1 or " +
            std::to_string(kCheckReportVersion) + ")");
  b.golden_fingerprint = rd.string(j, "golden_fingerprint", top);
  b.spec = j.contains("spec") && j["spec"].is_string() ? j["spec"].get<std::string>() : std::string();
  b.criterion = rd.at(j, "criterion", top);
  if (!b.criterion.is_object()) rd.fail("\"criterion\" is not an object");
  const nlohmann::json& ts = rd.at(j, "tensors", top);
  if (!ts.is_array() || ts.empty()) rd.fail("\"tensors\" is not a non-empty array");
  for (const nlohmann::json& t : ts) {
    if (!t.is_object()) rd.fail("a tensor entry is not an object");
    const std::string name = rd.string(t, "golden", "a tensor ");
    const std::string where = "tensor '" + name + "' ";
    CheckBaseline::TensorStats st;
    st.elements = rd.integer(t, "elements", where);
    st.error = rd.stats(t, where);
    const nlohmann::json& bins = rd.at(t, "position_bins", where);
    if (!bins.is_array()) rd.fail(where + "\"position_bins\" is not an array");
    for (const nlohmann::json& bj : bins) {
      if (!bj.is_object()) rd.fail(where + "has a position bin that is not an object");
      CheckBaseline::Bin bin;
      bin.lo = rd.integer(bj, "lo", where + "bin ");
      bin.hi = rd.integer(bj, "hi", where + "bin ");
      bin.elements = rd.integer(bj, "elements", where + "bin ");
      bin.error = rd.stats(bj, where + "bin " + range(bin.lo, bin.hi) + " ");
      st.bins.push_back(bin);
    }
    if (!b.tensors.emplace(name, std::move(st)).second) rd.fail("tensor '" + name + "' is listed twice");
  }
  return b;
}

void require_same_setup(const CheckBaseline& b, const std::string& fingerprint, const Criterion& criterion) {
  if (b.golden_fingerprint != fingerprint)
    throw BaselineError("--baseline " + b.path + ": written for another golden set (spec '" + b.spec + "', fingerprint " +
                        b.golden_fingerprint.substr(0, 12) + "...; this set's is " + fingerprint.substr(0, 12) + "...)");
  if (b.criterion != criterion.to_json())
    throw BaselineError("--baseline " + b.path + ": written with criterion " + brief(b.criterion) + ", this run uses " +
                        brief(criterion.to_json()) + " (check with the same criterion)");
}

std::string BaselineRegression::where() const {
  return tensor + (bin_lo ? " positions " + range(*bin_lo, *bin_hi) : std::string()) + " " + metric;
}

BaselineComparison compare_with_baseline(const CheckReport& current, const CheckBaseline& baseline, const GrowthLimit& limit) {
  if (!(limit.max_growth >= 1) || !std::isfinite(limit.max_growth))
    throw BaselineError("--max-growth must be a finite number >= 1, got " + g4(limit.max_growth));
  BaselineComparison out;
  out.path = baseline.path;
  out.limit = limit;
  const std::string pre = "--baseline " + baseline.path + ": ";
  // The same tensors on both sides: a tensor checked on one side only has nothing to compare with.
  std::set<std::string> now;
  for (const TensorReport& t : current.tensors) now.insert(t.golden_name);
  for (const auto& [name, st] : baseline.tensors)
    if (!now.count(name)) throw BaselineError(pre + "has tensor '" + name + "', which this run did not check");
  for (const TensorReport& t : current.tensors) {
    const auto it = baseline.tensors.find(t.golden_name);
    if (it == baseline.tensors.end()) throw BaselineError(pre + "has no tensor '" + t.golden_name + "', which this run checked");
    const CheckBaseline::TensorStats& bt = it->second;
    if (bt.elements != t.elements)
      throw BaselineError(pre + "tensor '" + t.golden_name + "' has " + std::to_string(bt.elements) + " elements, this run " +
                          std::to_string(t.elements));
    bool same_bins = bt.bins.size() == t.bins.size();
    for (std::size_t i = 0; same_bins && i < t.bins.size(); ++i)
      same_bins = bt.bins[i].lo == t.bins[i].lo && bt.bins[i].hi == t.bins[i].hi && bt.bins[i].elements == t.bins[i].elements;
    if (!same_bins) throw BaselineError(pre + "tensor '" + t.golden_name + "' has other position bins than this run");

    compare_one(out, t.golden_name, std::nullopt, "max", bt.error.u_dt.max, t.error.u_dt.max);
    compare_one(out, t.golden_name, std::nullopt, "rms", bt.error.u_dt.rms, t.error.u_dt.rms);
    for (std::size_t i = 0; i < t.bins.size(); ++i) {
      const std::pair<std::int64_t, std::int64_t> bin{t.bins[i].lo, t.bins[i].hi};
      compare_one(out, t.golden_name, bin, "max", bt.bins[i].error.u_dt.max, t.bins[i].error.u_dt.max);
      compare_one(out, t.golden_name, bin, "rms", bt.bins[i].error.u_dt.rms, t.bins[i].error.u_dt.rms);
    }
  }
  return out;
}

nlohmann::json BaselineComparison::to_json() const {
  nlohmann::json regs = nlohmann::json::array();
  for (const BaselineRegression& r : regressions) regs.push_back(regression_json(r));
  return {{"path", path},
          {"max_growth", limit.max_growth},
          {"floor_u_dt", limit.floor},
          {"pass", pass()},
          {"compared", compared},
          {"largest_growth", largest ? regression_json(*largest) : nlohmann::json(nullptr)},
          {"regressions", regs}};
}

std::string BaselineComparison::summary() const {
  std::string s = "\nbaseline " + path + ": max and RMS error (units of u_dt, floor " + g4(limit.floor) + ") of every tensor and position bin, " +
                  std::to_string(compared) + " quantities, limit " + g4(limit.max_growth) + "x\n";
  if (largest)
    s += "  largest growth " + g4(largest->growth) + "x: " + largest->where() + " (" + g4(largest->baseline) + " -> " +
         g4(largest->current) + " u)\n";
  const std::size_t shown = std::min<std::size_t>(regressions.size(), 10);
  for (std::size_t i = 0; i < shown; ++i) {
    const BaselineRegression& r = regressions[i];
    s += "  grew " + g4(r.growth) + "x: " + r.where() + " (" + g4(r.baseline) + " -> " + g4(r.current) + " u)\n";
  }
  if (regressions.size() > shown) s += "  ... (" + std::to_string(regressions.size()) + " in all)\n";
  if (pass())
    s += "PASS: no regression against the baseline (every max and RMS error within " + g4(limit.max_growth) + "x the baseline's)\n";
  else
    s += "FAIL: regression against the baseline: " + std::to_string(regressions.size()) + " error quantit" +
         (regressions.size() == 1 ? "y" : "ies") + " grew more than " + g4(limit.max_growth) + "x (first: " +
         regressions.front().where() + ", " + g4(regressions.front().growth) + "x)\n";
  return s;
}

}  // namespace ropecheck::checker
