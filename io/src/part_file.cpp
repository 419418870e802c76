#include "ropecheck/io/part_file.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ropecheck/io/tensor.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"

namespace ropecheck::io {

nlohmann::json exact_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

void PartReader::bad(const std::string& what) const {
  throw InputError("merge: " + sanitize(file) + ": not a usable " + kind + " (" + what + ")");
}
const nlohmann::json& PartReader::at(const nlohmann::json& j, const char* key) const {
  if (!j.is_object() || !j.contains(key)) bad(std::string("no key '") + key + "'");
  return j.at(key);
}
double PartReader::dbl(const nlohmann::json& v) const {
  if (v.is_number()) return v.get<double>();
  if (v == "inf") return std::numeric_limits<double>::infinity();
  if (v == "-inf") return -std::numeric_limits<double>::infinity();
  if (v == "nan") return std::numeric_limits<double>::quiet_NaN();
  bad("'" + v.dump() + "' is not a number");
}
double PartReader::dbl(const nlohmann::json& j, const char* key) const {
  const nlohmann::json& v = at(j, key);
  if (v.is_number() || v.is_string()) return dbl(v);
  bad(std::string("'") + key + "' is not a number");
}
std::int64_t PartReader::i64(const nlohmann::json& j, const char* key) const {
  const nlohmann::json& v = at(j, key);
  if (!v.is_number_integer()) bad(std::string("'") + key + "' is not an integer");
  return v.get<std::int64_t>();
}
std::optional<std::int64_t> PartReader::opt(const nlohmann::json& j, const char* key) const {
  if (at(j, key).is_null()) return std::nullopt;
  return i64(j, key);
}
std::string PartReader::str(const nlohmann::json& j, const char* key) const {
  const nlohmann::json& v = at(j, key);
  if (!v.is_string()) bad(std::string("'") + key + "' is not a string");
  return v.get<std::string>();
}
bool PartReader::boolean(const nlohmann::json& j, const char* key) const {
  const nlohmann::json& v = at(j, key);
  if (!v.is_boolean()) bad(std::string("'") + key + "' is not true or false");
  return v.get<bool>();
}
ExactSum PartReader::sum(const nlohmann::json& j, const char* key) const {
  const std::optional<ExactSum> s = ExactSum::from_text(str(j, key));
  if (!s) bad(std::string("'") + key + "' is not an exact sum");
  return *s;
}
std::vector<std::string> PartReader::strings(const nlohmann::json& j, const char* key) const {
  const nlohmann::json& v = at(j, key);
  std::vector<std::string> out;
  if (!v.is_array()) bad(std::string("'") + key + "' is not a list");
  for (const nlohmann::json& x : v) {
    if (!x.is_string()) bad(std::string("'") + key + "' is not a list of strings");
    out.push_back(x.get<std::string>());
  }
  return out;
}
Shard PartReader::header(const nlohmann::json& j, const char* format, int format_version) const {
  if (!j.is_object() || !j.contains("format") || j["format"] != format) bad(std::string("its format is not ") + format);
  if (!j.contains("format_version") || j["format_version"] != format_version)
    bad("format_version " + j.value("format_version", nlohmann::json()).dump() + ", this ropecheck reads " +
        std::to_string(format_version));
  const nlohmann::json& sh = at(j, "shard");
  const Shard s{static_cast<int>(i64(sh, "index")), static_cast<int>(i64(sh, "count"))};
  if (s.count < 1 || s.count > kMaxShards || s.index < 1 || s.index > s.count) bad("bad 'shard'");
  return s;
}

namespace {

// The first key (dotted into objects) in which a and b differ.
std::string part_first_difference(const nlohmann::json& a, const nlohmann::json& b) {
  if (!a.is_object() || !b.is_object()) return "";
  for (const auto& [k, v] : a.items()) {
    if (!b.contains(k)) return k;
    if (b[k] != v) {
      const std::string inner = part_first_difference(v, b[k]);
      return inner.empty() ? k : k + "." + inner;
    }
  }
  for (const auto& [k, v] : b.items())
    if (!a.contains(k)) return k;
  return "";
}

}  // namespace

std::vector<std::size_t> order_parts(const std::vector<Shard>& shards, const std::vector<nlohmann::json>& identity,
                                     const std::vector<std::string>& names) {
  if (shards.empty()) throw InputError("merge: no parts");
  std::vector<std::size_t> order(shards.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return shards[a].index < shards[b].index; });
  const std::size_t first = order.front();
  for (std::size_t i : order)
    if (identity[i] != identity[first] || shards[i].count != shards[first].count) {
      const std::string key = shards[i].count != shards[first].count ? "shard_count" : part_first_difference(identity[first], identity[i]);
      throw InputError("merge: " + sanitize(names[first]) + " and " + sanitize(names[i]) +
                        " are parts of different runs (they differ in " + key + ")");
    }
  const int N = shards[first].count;
  for (std::size_t k = 1; k < order.size(); ++k)
    if (shards[order[k]].index == shards[order[k - 1]].index)
      throw InputError("merge: shard " + shards[order[k]].text() + " given twice (" + sanitize(names[order[k - 1]]) +
                        " and " + sanitize(names[order[k]]) + ")");
  for (int i = 1; i <= N; ++i)
    if (static_cast<std::size_t>(i) > order.size() || shards[order[static_cast<std::size_t>(i - 1)]].index != i)
      throw InputError("merge: shard " + Shard{i, N}.text() + " is missing (" + std::to_string(order.size()) + " of " +
                        std::to_string(N) + " parts given)");
  return order;
}

}  // namespace ropecheck::io
