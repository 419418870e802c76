// The output folder (atomic: a temporary sibling renamed into place), gnuplot, and writing every file.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "ropecheck/drift/writers.hpp"

namespace ropecheck::drift {

namespace fs = std::filesystem;

std::string find_gnuplot() {
  if (const char* env = std::getenv("ROPECHECK_GNUPLOT")) {
    const std::string p = env;
    return !p.empty() && ::access(p.c_str(), X_OK) == 0 ? p : std::string();
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const fs::path kernel = fs::path(dir.empty() ? "." : dir) / "gnuplot";
    std::error_code ec;
    if (fs::is_regular_file(kernel, ec) && ::access(kernel.c_str(), X_OK) == 0) return kernel.string();
  }
  return {};
}

void run_gnuplot(const std::string& gnuplot, const fs::path& dir, const std::string& script) {
  const fs::path log = dir / "gnuplot.log";
  const pid_t pid = ::fork();
  if (pid < 0) throw SpecError("cannot start gnuplot (fork failed)");
  if (pid == 0) {
    // Child: in the output folder, stdout and stderr to the log, then gnuplot.
    if (::chdir(dir.c_str()) != 0) ::_exit(126);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    ::execl(gnuplot.c_str(), gnuplot.c_str(), script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  std::error_code ec;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    fs::remove(log, ec);
    return;
  }
  // The first line of gnuplot's complaint that says something.
  std::ifstream in(log);
  std::string line, first;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t^") != std::string::npos) {
      first = line;
      if (line.find("rror") != std::string::npos) break;
    }
  fs::remove(log, ec);
  throw SpecError("gnuplot (" + gnuplot + ") failed on " + script +
                  (WIFEXITED(status) ? " with exit code " + std::to_string(WEXITSTATUS(status)) : std::string(" (killed)")) +
                  (first.empty() ? std::string() : ": " + first));
}

std::vector<std::string> write_drift(const DriftResult& r, const OutputDir& dir, const std::string& gnuplot,
                                     const std::string& command_line) {
  std::vector<std::string> files = {"drift.json", "bins.csv", "positions.csv", "breakdown.csv", "summary.md"};
  dir.write("drift.json", to_json(r, command_line).dump(1) + "\n");
  dir.write("bins.csv", bins_csv(r));
  dir.write("positions.csv", positions_csv(r));
  dir.write("breakdown.csv", breakdown_csv(r));
  if (r.options.uniqueness) {
    dir.write("uniqueness.csv", uniqueness_csv(r));
    files.push_back("uniqueness.csv");
  }
  dir.write("summary.md", summary_markdown(r, command_line));
  dir.write("plot_data.csv", drift_plot_data_csv(r));
  dir.write("drift.gp", drift_gnuplot_script(r));
  files.push_back("plot_data.csv");
  files.push_back("drift.gp");
  if (!gnuplot.empty()) {
    run_gnuplot(gnuplot, dir.tmp(), "drift.gp");
    for (const std::string& png : drift_plot_files(r)) files.push_back(png);
  }
  return files;
}

std::vector<std::string> write_compare(const CompareResult& r, const OutputDir& dir, const std::string& gnuplot,
                                       const std::string& command_line) {
  std::vector<std::string> files = {"compare.json", "compare_bins.csv", "compare_positions.csv",
                                    "compare_plot_data.csv", "summary.md", "compare.gp"};
  dir.write("compare.json", to_json(r, command_line).dump(1) + "\n");
  dir.write("compare_bins.csv", compare_bins_csv(r));
  dir.write("compare_positions.csv", compare_positions_csv(r));
  dir.write("summary.md", compare_markdown(r, command_line));
  dir.write("compare_plot_data.csv", compare_plot_data_csv(r));
  dir.write("compare.gp", compare_gnuplot_script(r));
  if (!gnuplot.empty()) {
    run_gnuplot(gnuplot, dir.tmp(), "compare.gp");
    files.push_back("drift-compare.png");
  }
  return files;
}

}  // namespace ropecheck::drift
