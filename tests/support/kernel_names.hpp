// Kernel names in tests, read by the one grammar (plugin/kernel_name.hpp).
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "ropecheck/plugin/kernel_name.hpp"

namespace ropecheck::test {

inline plugin::KernelName kernel(const std::string& name) { return plugin::parse_kernel_name(name); }

inline std::vector<plugin::KernelName> kernels(std::initializer_list<std::string> names) {
  std::vector<plugin::KernelName> out;
  for (const std::string& n : names) out.push_back(kernel(n));
  return out;
}

}  // namespace ropecheck::test
