// What a golden set's data is, whatever its path: the SHA-256 of its sorted file list with each file's
// SHA-256 (golden_set.hpp). Baselines and check parts carry it to refuse a report of another set.
#include <algorithm>

#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/io/sha256.hpp"

namespace ropecheck::golden {

std::string golden_fingerprint(const GoldenSet& g) {
  std::vector<ManifestFile> files = g.files();
  std::sort(files.begin(), files.end(), [](const ManifestFile& a, const ManifestFile& b) { return a.file < b.file; });
  std::string text;
  for (const ManifestFile& f : files) text += f.file + " " + f.sha256 + "\n";
  return io::sha256_hex({reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
}

}  // namespace ropecheck::golden
