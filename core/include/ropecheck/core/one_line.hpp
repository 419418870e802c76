// An error message is one line whatever it echoes: control characters (a newline or ESC inside a
// file name, tensor name or JSON value) and bytes that are not UTF-8 are written as escapes. The CLI's
// `ropecheck: error: ...` line and the Python package's exceptions both go through here.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace ropecheck {

inline std::string one_line(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const auto hex = [&](unsigned char c) {
    char buf[5];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
  };
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') { out += "\\n"; ++i; continue; }
    if (c == '\r') { out += "\\r"; ++i; continue; }
    if (c == '\t') { out += "\\t"; ++i; continue; }
    if (c < 0x20 || c == 0x7f) { hex(c); ++i; continue; }
    if (c < 0x80) { out += static_cast<char>(c); ++i; continue; }
    // A well-formed UTF-8 sequence is kept; anything else byte by byte as \xHH.
    const std::size_t n = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (std::size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (!ok) { hex(c); ++i; continue; }
    out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

// `s` in single quotes for a one-line message: control bytes, quotes and backslashes escaped, cut to
// at most `max_bytes` input bytes (then "...").
std::string quote_name(std::string_view s, std::size_t max_bytes = 96);
// A file name / description fit for the start of a one-line message (control bytes escaped).
std::string sanitize(std::string_view s, std::size_t max_bytes = 256);

}  // namespace ropecheck
