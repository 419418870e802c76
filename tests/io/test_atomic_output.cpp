// golden/atomic_output.hpp: one helper for every output ropecheck writes. Each test is a scenario the probe found broken: a set silently replaced by
// a concurrent run, `--out DIR/`, temporaries left by a signal or a dead process, a report written in place.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <vector>
#include <fstream>
#include <sstream>
#include <string>

#include "ropecheck/io/atomic_output.hpp"
#include "ropecheck/core/spec.hpp"
#include "temp_root.hpp"

namespace {

namespace fs = std::filesystem;
using ropecheck::SpecError;
using ropecheck::io::OutputFolder;

struct Scratch {
  fs::path dir;
  Scratch() {
    dir = fs::temp_directory_path() / ("ropecheck-atomic-" + std::to_string(::getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  // Names in `dir` other than the ones given.
  std::vector<std::string> entries() const {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path().filename().string());
    std::sort(v.begin(), v.end());
    return v;
  }
};

using ropecheck::testing_support::file_bytes;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const SpecError& e) {
    return e.what();
  }
  return "(no error)";
}

// A PID that belonged to a process which has exited (and been reaped).
pid_t dead_pid() {
  const pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  ::waitpid(p, nullptr, 0);
  return p;
}

TEST(AtomicFile, WritesReplacesAndLeavesNoTemporary) {
  Scratch s;
  const fs::path r = s.dir / "report.json";
  ropecheck::io::write_file_atomically(r, "first\n", "--report");
  EXPECT_EQ(file_bytes(r), "first\n");
  ropecheck::io::write_file_atomically(r, "second\n", "--report");
  EXPECT_EQ(file_bytes(r), "second\n");
  EXPECT_EQ(s.entries(), std::vector<std::string>{"report.json"});
}

TEST(AtomicFile, BadDestinationsAreRefusedBeforeWriting) {
  Scratch s;
  fs::create_directories(s.dir / "adir");
  EXPECT_NE(message_of([&] { ropecheck::io::check_file_destination(s.dir / "adir", "--report"); }).find("is a directory"),
            std::string::npos);
  EXPECT_NE(message_of([&] { ropecheck::io::check_file_destination(s.dir / "no" / "r.json", "--report"); })
                .find("--report " + (s.dir / "no" / "r.json").string() + ": no such directory"),
            std::string::npos);
  EXPECT_NE(message_of([&] { ropecheck::io::write_file_atomically(s.dir / "no" / "r.json", "x", "--report"); })
                .find("no such directory"),
            std::string::npos);
  EXPECT_EQ(s.entries(), std::vector<std::string>{"adir"});
}

TEST(AtomicFile, FullDiskIsAnErrorAndLeavesNothing) {
  // /dev/full answers ENOSPC to every write: the report must not be reported as written.
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  Scratch s;
  OutputFolder f(s.dir / "out", {});
  fs::create_symlink("/dev/full", f.tmp() / "x");
  EXPECT_NE(message_of([&] { f.write("x", "some bytes"); }).find("No space left on device"), std::string::npos);
}

TEST(OutputFolderTest, TrailingSlashWritesTheFolderItself) {
  Scratch s;
  OutputFolder f((s.dir / "set").string() + "/", {});
  EXPECT_EQ(f.out(), s.dir / "set");
  f.write("a.txt", "a");
  f.commit();
  EXPECT_EQ(file_bytes(s.dir / "set" / "a.txt"), "a");
  EXPECT_EQ(s.entries(), std::vector<std::string>{"set"});
}

TEST(OutputFolderTest, DotAndRootAreRefused) {
  for (const char* p : {".", "..", "/", "a/.", "a/.."})
    EXPECT_NE(message_of([&] { OutputFolder f(p, {.overwrite = true, .command = {}}); }).find("names no folder of its own"),
              std::string::npos)
        << p;
}

TEST(OutputFolderTest, ExistingWithoutOverwriteIsRefusedAtOnce) {
  Scratch s;
  fs::create_directories(s.dir / "set");
  EXPECT_NE(message_of([&] { OutputFolder f(s.dir / "set", {}); }).find("already exists (use --overwrite"),
            std::string::npos);
  EXPECT_EQ(s.entries(), std::vector<std::string>{"set"});
}

TEST(OutputFolderTest, FolderThatAppearsDuringTheRunIsNeverReplaced) {
  // Two runs to the same --out: the later commit must refuse, not replace (defect 7).
  Scratch s;
  {
    OutputFolder f(s.dir / "set", {.command = "golden"});
    f.write("new.txt", "new");
    fs::create_directories(s.dir / "set");
    std::ofstream(s.dir / "set" / "first.txt") << "first";
    const std::string m = message_of([&] { f.commit(); });
    EXPECT_NE(m.find("appeared while golden was running; not replaced"), std::string::npos) << m;
  }
  EXPECT_EQ(file_bytes(s.dir / "set" / "first.txt"), "first");
  EXPECT_FALSE(fs::exists(s.dir / "set" / "new.txt"));
  EXPECT_EQ(s.entries(), std::vector<std::string>{"set"}) << "the temporary folder is removed";
}

TEST(OutputFolderTest, OverwriteExchangesInOneStep) {
  Scratch s;
  fs::create_directories(s.dir / "set");
  std::ofstream(s.dir / "set" / "old.txt") << "old";
  {
    OutputFolder f(s.dir / "set", {.overwrite = true, .command = {}});
    f.write("new.txt", "new");
    f.commit();
  }
  EXPECT_TRUE(fs::exists(s.dir / "set" / "new.txt"));
  EXPECT_FALSE(fs::exists(s.dir / "set" / "old.txt"));
  EXPECT_EQ(s.entries(), std::vector<std::string>{"set"}) << "no .set.old-PID left";
  // A file in the way is replaced too (as before).
  std::ofstream(s.dir / "afile") << "x";
  {
    OutputFolder f(s.dir / "afile", {.overwrite = true, .command = {}});
    f.write("n", "n");
    f.commit();
  }
  EXPECT_TRUE(fs::is_directory(s.dir / "afile"));
}

TEST(OutputFolderTest, MissingParentRefusedOrCreated) {
  Scratch s;
  EXPECT_NE(message_of([&] { OutputFolder f(s.dir / "no" / "set", {}); }).find("parent folder"), std::string::npos);
  {
    OutputFolder f(s.dir / "a" / "b" / "set", {.create_parents = true, .command = {}});
    f.commit();
  }
  EXPECT_TRUE(fs::is_directory(s.dir / "a" / "b" / "set"));
}

TEST(OutputFolderTest, StaleTemporariesOfDeadProcessesAreRemoved) {
  Scratch s;
  const std::string dead = std::to_string(dead_pid());
  const std::string alive = std::to_string(::getppid());
  for (const std::string& n : {".set.partial-" + dead, ".set.old-" + dead, ".set.partial-" + alive,
                               ".other.partial-" + dead, std::string(".set.partial-x1")}) {
    fs::create_directories(s.dir / n);
    std::ofstream(s.dir / n / "data") << "x";
  }
  std::ofstream(s.dir / (".r.json.tmp-" + dead)) << "x";
  std::ofstream(s.dir / ("r.json.tmp." + dead)) << "x";  // the report temporaries of ropecheck 0.1
  {
    OutputFolder f(s.dir / "set", {});
    f.commit();
  }
  ropecheck::io::write_file_atomically(s.dir / "r.json", "{}", "--report");
  std::vector<std::string> expect = {".other.partial-" + dead, ".set.partial-" + alive, ".set.partial-x1", "r.json",
                                     "set"};
  std::sort(expect.begin(), expect.end());
  EXPECT_EQ(s.entries(), expect) << "only the dead process's temporaries of this destination go";
}

TEST(OutputFolderTest, SignalRemovesTheTemporaryFolder) {
  // Ctrl-C / SIGTERM during a run: the temporary folder goes, the process still dies of the signal.
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    Scratch s;
    const pid_t p = ::fork();
    if (p == 0) {
      OutputFolder f(s.dir / "set", {});
      f.write("partial.bin", std::string(1 << 20, 'x'));
      ::raise(sig);
      ::_exit(0);  // not reached
    }
    int status = 0;
    ::waitpid(p, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "signal " << sig << " status " << status;
    EXPECT_TRUE(s.entries().empty()) << "signal " << sig << " left " << (s.entries().empty() ? "" : s.entries()[0]);
  }
}

}  // namespace
