// Where a check reads its candidate from, a block of tokens at a time, so that no whole tensor is held
// (checker/CHECK_REPORT.md, "Memory"): a tensor file read in pieces (io/tensor_reader.hpp: mapped
// safetensors and .npy, .npz members through bounded buffers), tensors already in memory viewed in place
// (Python's NumPy arrays), or a kernel under test run on each block of the golden inputs
// (kernel_blocks.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/io/mapped_file.hpp"
#include "ropecheck/io/tensor.hpp"

namespace ropecheck::checker {

struct CandidateTensor {
  std::string name;
  io::TensorDType dtype = io::TensorDType::f32;
  std::vector<std::int64_t> shape;
  std::int64_t numel() const;
};

class CandidateSource {
 public:
  virtual ~CandidateSource() = default;
  // Once, before anything else: the check reads tokens [first, last) of `golden` in blocks of at most
  // `block_tokens` tokens, in increasing order (a kernel runs its first block here, which tells what it
  // produces).
  virtual void prepare(const golden::GoldenSet& golden, std::int64_t first, std::int64_t last, std::int64_t block_tokens);
  virtual const std::vector<CandidateTensor>& tensors() const = 0;
  // The golden tensors the source reads itself (a kernel: positions, q and k), whose files' hashes the
  // check verifies with its own.
  virtual std::vector<std::string> golden_inputs() const { return {}; }
  // After prepare(): non-empty when the source has nothing to check because the kernel declined the set
  // (kernel_run.hpp: its reasons, one line); the check is then not tested.
  virtual std::string declined() const { return {}; }
  // Tokens [t0, t1) come next, and of them the check reads tensors `needed` (indices into tensors()).
  virtual void begin_block(std::int64_t t0, std::int64_t t1, const std::vector<std::size_t>& needed);
  // Elements [e0, e1) of tensor i (flat, row-major; for a kernel, inside the current block): a view valid
  // until release() or the next begin_block(), or `buffer` filled. Any thread, for different tensors.
  // InputError for data the file's reader refuses.
  virtual std::span<const std::uint8_t> elements(std::size_t i, std::int64_t e0, std::int64_t e1,
                                                 std::vector<std::uint8_t>& buffer) = 0;
  virtual void release(std::size_t i, std::int64_t e0, std::int64_t e1);
  // Every tensor whole, in memory (what the diagnosis reads): read again, or the kernel run again on the
  // whole golden inputs.
  virtual std::vector<io::Tensor> whole(const golden::GoldenSet& golden) = 0;
  // The mapped file a file candidate is read from (its SHA-256 identifies a sharded run); nullptr else.
  virtual std::shared_ptr<const io::MappedFile> file() const { return nullptr; }
};

// A tensor file (io/tensor_file.hpp's messages: "--candidate PATH: ..."); an .npz member declaring more
// than `max_member_bytes` is refused before it is inflated.
std::shared_ptr<CandidateSource> file_candidate(const std::filesystem::path& path, std::uint64_t max_member_bytes);

// Tensors in memory, viewed in place: `bytes` must stay valid while the source is used. InputError when
// a tensor's bytes do not match its dtype and shape (io::validate's message).
struct TensorView {
  CandidateTensor tensor;
  std::span<const std::uint8_t> bytes;
};
std::shared_ptr<CandidateSource> memory_candidate(std::vector<TensorView> views);
// The same over tensors it keeps.
std::shared_ptr<CandidateSource> memory_candidate(std::vector<io::Tensor> tensors);

// `source` seen through --layout (diagnose.hpp, apply_candidate_layout): its batch-1 4-D tensors as
// [tokens, heads, head_dim], a bhsd one gathered a block at a time. InputError as apply_candidate_layout.
enum class CandidateLayout;
std::shared_ptr<CandidateSource> with_layout(std::shared_ptr<CandidateSource> source, CandidateLayout layout);

}  // namespace ropecheck::checker
