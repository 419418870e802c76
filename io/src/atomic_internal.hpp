// What atomic_output.cpp (temporaries, folders) and file_destination.cpp (file outputs) share. Private.
#pragma once

#include <filesystem>
#include <string>

namespace ropecheck::io::detail {

[[noreturn]] void fail(const std::string& message);  // SpecError (exit 2)
std::string errno_text(int e);

// Registers a temporary for removal on SIGINT / SIGTERM / SIGHUP; returns its slot (-1: none).
int register_temporary(const std::filesystem::path& p);
void unregister_temporary(int slot);

// ".NAME" + kind + PID (kind: ".tmp-", ".partial-", ".old-").
std::string temporary_name(const std::string& name, const char* kind);

// Holds an exclusive flock on a temporary while its owner works on it: remove_stale_temporaries
// removes only temporaries nobody holds (a PID says nothing across PID namespaces: another container
// on the same volume). -1 when it cannot be opened or locked.
int lock_temporary(const std::filesystem::path& p);

}  // namespace ropecheck::io::detail
