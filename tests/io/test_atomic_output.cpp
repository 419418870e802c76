// golden/atomic_output.hpp: one helper for every output ropecheck writes. Each test is a scenario the probe found broken: a set silently replaced by
// a concurrent run, `--out DIR/`, temporaries left by a signal or a dead process, a report written in place.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <span>
#include <string_view>
#include <vector>
#include <fstream>
#include <sstream>
#include <string>

#include "ropecheck/io/atomic_output.hpp"
#include "ropecheck/io/fd_io.hpp"
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

// OutputFolder's path checks on their own (golden's shared staging folder DIR.staging is named from them).
TEST(OutputFolderTest, OutputFolderPathIsAbsoluteWithoutTrailingSlashes) {
  Scratch s;
  EXPECT_EQ(ropecheck::io::output_folder_path((s.dir / "set").string() + "//", "--out"), s.dir / "set");
  EXPECT_EQ(ropecheck::io::output_folder_path("rel", "--out"), fs::current_path() / "rel");
  EXPECT_EQ(message_of([] { ropecheck::io::output_folder_path("", "--shared-out"); }), "--shared-out: missing output folder");
  EXPECT_EQ(message_of([] { ropecheck::io::output_folder_path("a/..", "--shared"); }),
            "--shared: 'a/..' names no folder of its own; give the name of the folder to write");
  EXPECT_EQ(s.entries(), std::vector<std::string>{});  // nothing made
}

// A file several hosts may write into one folder: moved in (replacing), or linked in only when absent;
// no temporary left behind.
TEST(DurableFile, ReplacesOrLinksOnlyWhenAbsent) {
  Scratch s;
  const fs::path f = s.dir / "run.json";
  EXPECT_TRUE(ropecheck::io::write_file_durably(f, "mine\n", "--shared-out", /*replace=*/false));
  EXPECT_FALSE(ropecheck::io::write_file_durably(f, "theirs\n", "--shared-out", /*replace=*/false));
  EXPECT_EQ(file_bytes(f), "mine\n");
  EXPECT_TRUE(ropecheck::io::write_file_durably(f, "new\n", "--shared-out", /*replace=*/true));
  EXPECT_EQ(file_bytes(f), "new\n");
  EXPECT_EQ(s.entries(), std::vector<std::string>{"run.json"});
  // The temporary is named with the host and the PID; a folder that is not there is an error naming it.
  const std::string e = message_of([&] { ropecheck::io::write_file_durably(s.dir / "no" / "r.json", "x", "--shared-out", true); });
  EXPECT_EQ(e.rfind("--shared-out: cannot write '" + (s.dir / "no" / ".r.json.tmp-").string(), 0), 0u) << e;
  std::string pid_tail(1, '-');  // appended piecewise (GCC 12 warns falsely on `"-" + s + ...`, bug 105329)
  pid_tail += std::to_string(::getpid());
  pid_tail += "' (No such file or directory)";
  EXPECT_NE(e.find(pid_tail), std::string::npos) << e;
}

// The loops around write() and pread(): all of it written, exactly what was asked read, the end of the
// file and a full disk errors naming the file.
TEST(FdIo, WritesAllAndReadsExactlyAt) {
  Scratch s;
  const fs::path p = s.dir / "f";
  const int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  ASSERT_GE(fd, 0);
  const std::vector<std::uint8_t> bytes = {1, 2, 3, 4, 5, 6};
  ropecheck::io::write_all(fd, std::span<const std::uint8_t>(bytes), "merge", "f");
  ropecheck::io::write_all(fd, std::string_view("xy"), "merge", "f");
  EXPECT_EQ(file_bytes(p), std::string("\1\2\3\4\5\6xy"));
  std::uint8_t got[3] = {};
  ropecheck::io::read_exact_at(fd, got, 3, "merge", "f");
  EXPECT_EQ(got[0], 4);
  EXPECT_EQ(got[2], 6);
  try {
    ropecheck::io::read_exact_at(fd, got, 6, "merge", "f");  // 5 bytes there
    ADD_FAILURE() << "read past the end";
  } catch (const ropecheck::InputError& e) {
    EXPECT_STREQ(e.what(), "merge: cannot read 'f' (Input/output error)");
  }
  ::close(fd);
  const int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (full < 0) GTEST_SKIP() << "no /dev/full";
  EXPECT_EQ(message_of([&] { ropecheck::io::write_all(full, std::string_view("x"), "merge", "out"); }),
            "merge: cannot write 'out' (No space left on device)");
  ::close(full);
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
  std::ofstream(s.dir / "set" / "manifest.json") << "{}";  // a golden set: --overwrite may replace it
  {
    OutputFolder f(s.dir / "set", {.overwrite = true, .command = {}});
    f.write("new.txt", "new");
    f.commit();
  }
  EXPECT_TRUE(fs::exists(s.dir / "set" / "new.txt"));
  EXPECT_FALSE(fs::exists(s.dir / "set" / "old.txt"));
  EXPECT_EQ(s.entries(), std::vector<std::string>{"set"}) << "no .set.old-PID left";
}

TEST(OutputFolderTest, OverwriteReplacesOnlyRopecheckOutputs) {
  // --out DIR --overwrite on a folder ropecheck did not write (a source tree), a file or a link: refused,
  // untouched. An empty folder and ropecheck's own outputs are replaced.
  Scratch s;
  fs::create_directories(s.dir / "src" / "sub");
  std::ofstream(s.dir / "src" / "main.cpp") << "int main() {}";
  std::ofstream(s.dir / "afile") << "x";
  fs::create_symlink(s.dir / "src", s.dir / "alink");
  for (const char* name : {"src", "afile", "alink"}) {
    const std::string m = message_of([&] {
      OutputFolder f(s.dir / name, {.overwrite = true, .command = {}});
      f.commit();
    });
    EXPECT_NE(m.find("not replaced"), std::string::npos) << name << ": " << m;
  }
  EXPECT_TRUE(fs::exists(s.dir / "src" / "main.cpp"));
  EXPECT_TRUE(fs::is_regular_file(s.dir / "afile"));
  EXPECT_TRUE(fs::is_symlink(s.dir / "alink"));
  for (const char* marker : {"", "manifest.json", "drift.json", "compare.json"}) {
    fs::remove_all(s.dir / "out");
    fs::create_directories(s.dir / "out");
    if (*marker) std::ofstream(s.dir / "out" / marker) << "{}";
    OutputFolder f(s.dir / "out", {.overwrite = true, .command = {}});
    f.write("new.txt", "new");
    f.commit();
    EXPECT_TRUE(fs::exists(s.dir / "out" / "new.txt")) << marker;
  }
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
  // A temporary nobody holds the lock of is stale whatever its PID (a PID of another namespace says
  // nothing): the one named after a live process goes too.
  std::vector<std::string> expect = {".other.partial-" + dead, ".set.partial-x1", "r.json", "set"};
  std::sort(expect.begin(), expect.end());
  EXPECT_EQ(s.entries(), expect) << "only the unlocked temporaries of this destination go";
}

TEST(OutputFolderTest, LockedTemporaryOfAnotherNamespaceIsKept) {
  // A live run in another PID namespace (another container on the same volume): its PID is not a
  // process here, but it holds its temporaries' locks, so a run here leaves them alone.
  Scratch s;
  const std::string dead = std::to_string(dead_pid());
  fs::create_directories(s.dir / (".set.partial-" + dead));
  std::ofstream(s.dir / (".set.partial-" + dead) / "data") << "x";
  std::ofstream(s.dir / (".r.json.tmp-" + dead)) << "x";
  const int dir_lock = ::open((s.dir / (".set.partial-" + dead)).c_str(), O_RDONLY | O_CLOEXEC);
  const int file_lock = ::open((s.dir / (".r.json.tmp-" + dead)).c_str(), O_RDONLY | O_CLOEXEC);
  // flock locks belong to the open file description: a child's own opens contend with these.
  ASSERT_EQ(::flock(dir_lock, LOCK_EX), 0);
  ASSERT_EQ(::flock(file_lock, LOCK_EX), 0);
  const pid_t p = ::fork();
  if (p == 0) {
    const int a = ropecheck::io::remove_stale_temporaries(s.dir / "set");
    const int b = ropecheck::io::remove_stale_temporaries(s.dir / "r.json");
    ::_exit(a + b);
  }
  int status = 0;
  ::waitpid(p, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "a locked temporary was removed";
  EXPECT_TRUE(fs::exists(s.dir / (".set.partial-" + dead) / "data"));
  EXPECT_TRUE(fs::exists(s.dir / (".r.json.tmp-" + dead)));
  ::close(dir_lock);
  ::close(file_lock);
  EXPECT_EQ(ropecheck::io::remove_stale_temporaries(s.dir / "set") + ropecheck::io::remove_stale_temporaries(s.dir / "r.json"), 2)
      << "released: stale";
}

TEST(AtomicFile, WithoutReplaceAFileThatAppearedIsKept) {
  // Two `merge --out X` without --overwrite: the later one must not replace what the earlier wrote.
  Scratch s;
  ropecheck::io::write_file_atomically(s.dir / "x.json", "first", "--out", false);
  EXPECT_NE(message_of([&] { ropecheck::io::write_file_atomically(s.dir / "x.json", "second", "--out", false); })
                .find("appeared while ropecheck was running; not replaced"),
            std::string::npos);
  EXPECT_EQ(file_bytes(s.dir / "x.json"), "first");
  EXPECT_EQ(s.entries(), std::vector<std::string>{"x.json"}) << "no temporary left";
}

TEST(AtomicFile, NonRegularDestinationsAreWrittenThrough) {
  // A link is followed (it stays a link; its file gets the bytes); a FIFO is written through; a link to
  // nothing or a socket path is refused.
  Scratch s;
  std::ofstream(s.dir / "real.json") << "old";
  fs::create_symlink(s.dir / "real.json", s.dir / "link.json");
  ropecheck::io::write_file_atomically(s.dir / "link.json", "new", "--report");
  EXPECT_TRUE(fs::is_symlink(s.dir / "link.json"));
  EXPECT_EQ(file_bytes(s.dir / "real.json"), "new");
  ASSERT_EQ(::mkfifo((s.dir / "fifo").c_str(), 0600), 0);
  const pid_t p = ::fork();
  if (p == 0) {
    ropecheck::io::write_file_atomically(s.dir / "fifo", "through the fifo", "--report");
    ::_exit(0);
  }
  std::ifstream in(s.dir / "fifo");
  std::stringstream got;
  got << in.rdbuf();
  ::waitpid(p, nullptr, 0);
  EXPECT_EQ(got.str(), "through the fifo");
  EXPECT_TRUE(fs::is_fifo(s.dir / "fifo"));
  // A character device: a copy of /dev/null made here (so that a regression replaces the copy, not the
  // machine's /dev/null, as it did for root); without the right to make one, /dev/null itself when not
  // root (rename into /dev is refused then).
  const fs::path null_copy = s.dir / "null";
  if (::mknod(null_copy.c_str(), S_IFCHR | 0666, ::makedev(1, 3)) == 0) {
    ropecheck::io::write_file_atomically(null_copy, "nothing", "--report");
    EXPECT_TRUE(fs::is_character_file(null_copy));
  } else if (::geteuid() != 0) {
    ropecheck::io::write_file_atomically("/dev/null", "nothing", "--report");
    EXPECT_TRUE(fs::is_character_file("/dev/null"));
  } else {
    std::printf("note: root without CAP_MKNOD: the character-device case is not run\n");
  }
  fs::create_symlink(s.dir / "nowhere", s.dir / "dangling.json");
  EXPECT_NE(message_of([&] { ropecheck::io::check_file_destination(s.dir / "dangling.json", "--report"); })
                .find("a symbolic link to nothing"),
            std::string::npos);
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
