// What merging the parts of any sharded run shares (`--shard I/N`, `ropecheck merge`): doubles written
// so that they read back to the same bits, a reader that names the file and key of anything it does
// not expect, and the check that N parts of one run are all there, once each.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/core/shard.hpp"
#include "ropecheck/io/exact_sum.hpp"

namespace ropecheck::io {

// A finite double as a JSON number (which reads back to the same bits); "inf", "-inf", "nan" otherwise.
nlohmann::json exact_number(double v);

// Reading a part: InputError "merge: FILE: not a usable KIND (WHAT)" on anything else.
struct PartReader {
  std::string file, kind;
  [[noreturn]] void bad(const std::string& what) const;
  const nlohmann::json& at(const nlohmann::json& j, const char* key) const;
  double dbl(const nlohmann::json& j, const char* key) const;  // exact_number's form
  double dbl(const nlohmann::json& v) const;
  std::int64_t i64(const nlohmann::json& j, const char* key) const;
  std::optional<std::int64_t> opt(const nlohmann::json& j, const char* key) const;  // null: nullopt
  std::string str(const nlohmann::json& j, const char* key) const;
  bool boolean(const nlohmann::json& j, const char* key) const;
  ExactSum sum(const nlohmann::json& j, const char* key) const;
  std::vector<std::string> strings(const nlohmann::json& j, const char* key) const;
  // The part's `format`, `format_version` and `shard` {index, count}.
  Shard header(const nlohmann::json& j, const char* format, int format_version) const;
};

// The parts' indices in shard order. `identity[i]` is what part i must share with the others (version,
// run, N, ...): InputError naming the two files and the first key (dotted) in which they differ, a shard
// given twice, or a missing one.
std::vector<std::size_t> order_parts(const std::vector<Shard>& shards, const std::vector<nlohmann::json>& identity,
                                     const std::vector<std::string>& names);

}  // namespace ropecheck::io
