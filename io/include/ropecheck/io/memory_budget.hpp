// Sizes are estimated before allocating: a request that needs more memory than the
// machine has is refused with one line naming the options and the estimate, instead of ending in
// std::bad_alloc or the OOM killer after minutes of work. `--max-memory` moves the limit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace ropecheck::io {

// Physical memory of the machine, or the address-space limit (ulimit -v) when that is lower.
std::uint64_t machine_memory_bytes();

// "1073741824", "512M", "8G", "1.5T" (binary units K/M/G/T, optional trailing "iB"/"B"); nullopt otherwise.
std::optional<std::uint64_t> parse_byte_size(std::string_view text);

// "3.5 GiB", "120 MiB", "512 bytes".
std::string format_bytes(std::uint64_t bytes);

// Throws SpecError "<what> needs about N in memory, more than the M this machine has (or: the
// --max-memory limit of M); ..." when need > limit; limit 0 means machine_memory_bytes().
void require_memory(std::uint64_t need, std::uint64_t limit, const std::string& what);

// Throws SpecError "<what> needs about N on disk, more than the M free where --out goes" when the
// filesystem that will hold `out` (its nearest existing ancestor) has less than `need` available.
void require_disk(std::uint64_t need, const std::filesystem::path& out, const std::string& what);

}  // namespace ropecheck::io
