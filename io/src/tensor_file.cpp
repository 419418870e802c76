#include "ropecheck/io/tensor_file.hpp"

#include <system_error>

#include "ropecheck/core/input_error.hpp"
#include "ropecheck/io/npy.hpp"
#include "ropecheck/io/safetensors.hpp"

namespace ropecheck::io {

namespace {

// The file's lowercase extension, after the checks every candidate file gets.
std::string checked_extension(const std::filesystem::path& p, const std::string& option) {
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) throw InputError(option + " " + p.string() + ": no such file");
  if (!std::filesystem::is_regular_file(p, ec)) throw InputError(option + " " + p.string() + ": not a regular file");
  std::string ext = p.extension().string();
  for (char& c : ext) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (ext != ".safetensors" && ext != ".npz" && ext != ".npy")
    throw InputError(option + " " + p.string() + ": unknown file type '" + ext + "' (expected .safetensors, .npy or .npz)");
  return ext;
}

}  // namespace

std::unique_ptr<TensorReader> open_tensor_file(const std::filesystem::path& p, const std::string& option,
                                               std::uint64_t max_member_bytes) {
  checked_extension(p, option);
  TensorReaderOptions o;
  o.max_member_bytes = max_member_bytes;
  return TensorReader::open(p, p.string(), o);
}

std::vector<Tensor> read_tensor_file(const std::filesystem::path& p, const std::string& option, std::uint64_t max_member_bytes) {
  const std::string ext = checked_extension(p, option);
  if (ext == ".safetensors") return read_safetensors(p);
  if (ext == ".npz") return read_npz(p, true, max_member_bytes);
  if (ext == ".npy") return {read_npy(p)};  // named after the file stem
  throw InputError(option + " " + p.string() + ": unknown file type '" + ext + "' (expected .safetensors, .npy or .npz)");
}

}  // namespace ropecheck::io
