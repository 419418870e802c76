// A kernel under test run on the golden inputs one block of tokens at a time, as the streaming check
// reads them (candidate_source.hpp), instead of on the whole set at once (kernel_run.hpp): the kernel's
// outputs never exist whole, and a `check --shard I/N` runs the kernel on its shard's tokens only.
//
// What it produces, its notes, what it declines and its InputErrors are run_kernel()'s (kernel_run.hpp):
// the first block makes every call run_kernel makes, in the same order, and the outputs it answers
// unsupported for are left out with the same notes. Later blocks call the kernel only for the outputs the check reads. A call
// that fails (a plugin that crashed, hung, ...) is listed once, with its message; its outputs read as NaN
// from then on, without calling it again. A kernel that answers unsupported on a later block after
// computing the first is unusable input (InputError), as one answering unsupported for k after q is.
//
// A set with an attention block (attention_outputs.hpp): before the rotation calls, the kernel's fused
// entry point (kut::RopeAttentionCall) runs once per dtype of the set it declares, on the block's inputs
// and the manifest's parameters, without scores; its outputs attention_out.<dt> are whole tensors, read
// in any block. A kernel without the entry point leaves them not tested, with a note.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ropecheck/checker/candidate_source.hpp"
#include "ropecheck/checker/kernel_run.hpp"
#include "ropecheck/kut/kernel_under_test.hpp"

namespace ropecheck::checker {

class KernelBlocks final : public CandidateSource {
 public:
  explicit KernelBlocks(std::shared_ptr<kut::KernelUnderTest> kernel);
  ~KernelBlocks() override;

  void prepare(const golden::GoldenSet& golden, std::int64_t first, std::int64_t last, std::int64_t block_tokens) override;
  const std::vector<CandidateTensor>& tensors() const override;
  std::vector<std::string> golden_inputs() const override;
  void begin_block(std::int64_t t0, std::int64_t t1, const std::vector<std::size_t>& needed) override;
  std::span<const std::uint8_t> elements(std::size_t i, std::int64_t e0, std::int64_t e1,
                                         std::vector<std::uint8_t>& buffer) override;
  std::vector<io::Tensor> whole(const golden::GoldenSet& golden) override;

  std::string declined() const override;                 // after prepare(): KernelRun::declined
  // The run's end, once the check has read every block (KernelUnderTest::finish): an output written
  // after its call returned fails that call; a host that had to be killed is a note.
  void finish();
  const std::vector<std::string>& notes() const;          // after prepare(): run_kernel's notes
  const std::vector<KernelFailure>& failures() const;     // calls that failed so far, in call order

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace ropecheck::checker
