// Every file and folder ropecheck writes goes through here, so that a reader (or the next CI step) sees
// either the old content or the complete new one, never a half-written output, and an interrupted run
// leaves nothing behind:
//   - a file (check / props --report) is written to a temporary sibling `.NAME.tmp-PID`, checked, and
//     renamed over NAME; a symbolic link is followed (the link stays, the file it names is replaced);
//     a destination that exists and is no regular file (/dev/null, a FIFO, /dev/stdout on a pipe) is
//     written through (opened, truncated, written: no rename), and `-` is standard output; writing
//     there points fd 1 at stderr for the rest of the run, so the summary ropecheck prints does not mix
//     into the file; a folder, a socket or a link to nothing is refused;
//   - a folder (golden / drift --out) is written in a temporary sibling `.NAME.partial-PID` and moved into
//     place with one renameat2: RENAME_NOREPLACE without --overwrite (a folder that appeared meanwhile is
//     never replaced), RENAME_EXCHANGE with it (a kill at any instant leaves the old or the new folder);
//   - SIGINT, SIGTERM and SIGHUP remove the temporaries before the process dies of the signal;
//   - each temporary is flock()ed by its owner while in use; one nobody holds (its run was killed or
//     crashed) is removed by the next run that writes the same destination, whatever its PID says
//     (a run in another PID namespace, another container on the same volume, holds its lock);
//   - --overwrite replaces only a folder ropecheck wrote (it holds manifest.json, drift.json or
//     compare.json) or an empty one, never a file, a link or another folder (a source tree).
// All failures are SpecError with one line naming the option (exit 2).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace ropecheck::io {

// Refuses, before any work is done, a file destination that cannot be written: a folder, a socket, a
// link to nothing, a missing parent folder, a parent that is not writable. `option` names the flag in
// the message ("--report"). Standard output ("-") is claimed here, before anything is printed.
void check_file_destination(const std::filesystem::path& path, const std::string& option);

// Writes `bytes` to `path` (see above). The destination is checked first. Without `replace`, a regular
// file that appeared meanwhile is not replaced (exit 2, "appeared while ropecheck was running").
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes, const std::string& option,
                           bool replace = true);

// The temporary files and folders that belong to `out` and to a process that is gone, removed.
// Returns how many were removed.
int remove_stale_temporaries(const std::filesystem::path& out);

// For a folder that processes on several hosts write together (golden's shared staging folder, where no
// flock or PID tells whose a temporary is): writes `bytes` to a temporary sibling of `path` named with
// the host and the PID, flushes it to the disk (fsync) and moves it to `path` (rename: a file there is
// replaced), or without `replace` links it there (link() never replaces a file: false, and nothing
// written, when `path` exists); then flushes the folder. SpecError "OPTION: cannot write 'FILE' (reason)".
bool write_file_durably(const std::filesystem::path& path, std::string_view bytes, const std::string& option,
                        bool replace);

// The absolute path of the folder `out` names, trailing slashes dropped (`--out DIR/` is DIR): what an
// OutputFolder writes. SpecError naming `option` when `out` is empty or names no folder of its own
// ("/", ".", "..").
std::filesystem::path output_folder_path(const std::filesystem::path& out, const std::string& option);

// A folder output: files are written into a temporary sibling, commit() moves it into place.
class OutputFolder {
 public:
  struct Options {
    bool overwrite = false;       // replace an existing `out` (else: exit 2 "already exists")
    bool create_parents = false;  // make missing parent folders (golden) instead of refusing them (drift)
    std::string option = "--out"; // how the destination was given, for messages
    std::string command;          // "golden", "drift": for "appeared while ... was running"
  };

  // Validates `out` (a trailing slash is allowed; `.`, `..` and `/` are refused), removes stale
  // temporaries, creates the temporary folder and registers it for removal on a signal.
  OutputFolder(const std::filesystem::path& out, Options options);
  // The same checks, with the existing folder `adopt` moved into place by commit() instead of a new
  // temporary one (`merge --shared`: the set the shards wrote); it is kept when not committed.
  OutputFolder(const std::filesystem::path& out, Options options, std::filesystem::path adopt);
  ~OutputFolder();  // removes the temporary folder unless committed
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  const std::filesystem::path& tmp() const { return tmp_; }
  const std::filesystem::path& out() const { return out_; }

  // Writes one file into the temporary folder; SpecError naming the file when it cannot.
  void write(const std::string& name, std::string_view bytes) const;
  // Moves the temporary folder to `out` in one step (see above).
  void commit();

 private:
  std::filesystem::path out_, tmp_;
  Options options_;
  std::filesystem::path adopt_;
  bool committed_ = false;
  int slot_ = -1;  // in the signal-cleanup registry
  int lock_ = -1;  // the flock that tells other runs the temporary folder is in use
};

}  // namespace ropecheck::io
