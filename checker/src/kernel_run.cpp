#include "ropecheck/checker/kernel_run.hpp"

#include <algorithm>
#include <memory>
#include <numeric>

#include "ropecheck/checker/kernel_blocks.hpp"

namespace ropecheck::checker {

// The whole set as one block of KernelBlocks: the same calls, notes, declined reasons, failures and
// late writes as the streaming check makes, in one place.
KernelRun run_kernel(kut::KernelUnderTest& k, const golden::GoldenSet& golden) {
  KernelBlocks blocks(std::shared_ptr<kut::KernelUnderTest>(&k, [](kut::KernelUnderTest*) {}));  // not owned
  const std::int64_t T = golden.tokens();
  blocks.prepare(golden, 0, T, std::max<std::int64_t>(1, T));
  KernelRun run;
  run.declined = blocks.declined();
  std::vector<std::size_t> all(blocks.tensors().size());
  std::iota(all.begin(), all.end(), std::size_t{0});
  blocks.begin_block(0, T, all);  // computed by prepare()
  for (std::size_t i = 0; i < all.size(); ++i) {
    const CandidateTensor& t = blocks.tensors()[i];
    std::vector<std::uint8_t> unused;
    const std::span<const std::uint8_t> b = blocks.elements(i, 0, t.numel(), unused);
    run.tensors.push_back({t.name, t.dtype, t.shape, {b.begin(), b.end()}});
  }
  blocks.finish();
  run.notes = blocks.notes();
  run.failures = blocks.failures();
  return run;
}

}  // namespace ropecheck::checker
