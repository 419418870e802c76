// The one-line message helpers (one_line.hpp, input_error.hpp).
#include "ropecheck/core/input_error.hpp"
#include "ropecheck/core/one_line.hpp"

namespace ropecheck {

namespace {
void append_escaped(std::string& out, std::string_view s, std::size_t max_bytes, bool escape_quote) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::size_t n = s.size() < max_bytes ? s.size() : max_bytes;
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    } else if (c == '\\' || (escape_quote && c == '\'')) {
      out += '\\';
      out += static_cast<char>(c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (n < s.size()) out += "...";
}
}  // namespace

std::string quote_name(std::string_view s, std::size_t max_bytes) {
  std::string out = "'";
  append_escaped(out, s, max_bytes, true);
  out += '\'';
  return out;
}

std::string sanitize(std::string_view s, std::size_t max_bytes) {
  std::string out;
  append_escaped(out, s, max_bytes, false);
  return out;
}


void input_error(std::string_view what, const std::string& problem) { throw InputError(sanitize(what) + ": " + problem); }

}  // namespace ropecheck
