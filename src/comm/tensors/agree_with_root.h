#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "lockstep/comm/process_group.h"

// Ranks agreeing that they hold the same tensors before moving any: what synchronize()
// does for a module's and an optimizer's tensors alike.
namespace lockstep::detail {

/// One tensor as ranks compare it, e.g. "parameter 'fc2.weight'" and "[10, 128] float32".
struct Entry {
  std::string label;
  std::string detail;
};

/// "[10, 128] float32"
std::string describe(const at::Tensor& t);

/// Checks, in one small all_gather, that every rank passed the same root and holds the same
/// list of entries. When they differ, a second all_gather brings every rank's list to every
/// rank, so that all of them throw the same MismatchError (starting with `who`, naming the
/// first difference in their `what`) instead of some hanging.
void agree_with_root(const std::string& who, const std::string& what, const std::vector<Entry>& entries, int root,
                     const ProcessGroup& group);

}  // namespace lockstep::detail
