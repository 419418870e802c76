#include "ropecheck/io/memory_budget.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "ropecheck/core/spec.hpp"  // SpecError

namespace ropecheck::io {

std::uint64_t machine_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  std::uint64_t bytes = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                                              : std::uint64_t{1} << 40;
  struct rlimit as {};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && as.rlim_cur < bytes) bytes = as.rlim_cur;
  return bytes;
}

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
  std::string s(text);
  for (const char* suffix : {"iB", "B"})
    if (s.size() > std::string_view(suffix).size() && s.ends_with(suffix)) {
      s.resize(s.size() - std::string_view(suffix).size());
      break;
    }
  double scale = 1;
  if (!s.empty()) {
    switch (s.back()) {
      case 'K': case 'k': scale = 0x1p10; break;
      case 'M': case 'm': scale = 0x1p20; break;
      case 'G': case 'g': scale = 0x1p30; break;
      case 'T': case 't': scale = 0x1p40; break;
      default: break;
    }
    if (scale != 1) s.pop_back();
  }
  if (s.empty() || s.find_first_not_of("0123456789.") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v) || v <= 0) return std::nullopt;
  const double bytes = v * scale;
  if (bytes >= 0x1p63) return std::nullopt;
  return static_cast<std::uint64_t>(bytes);
}

std::string format_bytes(std::uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  char buf[64];
  if (b >= 0x1p40) std::snprintf(buf, sizeof buf, "%.1f TiB", b / 0x1p40);
  else if (b >= 0x1p30) std::snprintf(buf, sizeof buf, "%.1f GiB", b / 0x1p30);
  else if (b >= 0x1p20) std::snprintf(buf, sizeof buf, "%.1f MiB", b / 0x1p20);
  else if (b >= 0x1p10) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 0x1p10);
  else return std::to_string(bytes) + " bytes";
  return buf;
}

void require_memory(std::uint64_t need, std::uint64_t limit, const std::string& what) {
  const bool given = limit != 0;
  if (!given) limit = machine_memory_bytes();
  if (need <= limit) return;
  throw SpecError(what + " needs about " + format_bytes(need) + " in memory, more than " +
                  (given ? "the --max-memory limit of " + format_bytes(limit)
                         : "the " + format_bytes(limit) + " this machine has") +
                  " (--max-memory raises the limit)");
}

void require_disk(std::uint64_t need, const std::filesystem::path& out, const std::string& what) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(out, ec);
  while (!p.empty() && !std::filesystem::exists(p, ec) && p != p.parent_path()) p = p.parent_path();
  const std::filesystem::space_info si = std::filesystem::space(p, ec);
  if (!ec && si.available < need)
    throw SpecError(what + " needs about " + format_bytes(need) + " on disk, more than the " + format_bytes(si.available) +
                    " free where --out goes");
}

}  // namespace ropecheck::io
