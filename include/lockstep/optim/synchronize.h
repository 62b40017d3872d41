#pragma once

#include <torch/optim/optimizer.h>

#include "lockstep/comm/process_group.h"

namespace lockstep {

/// Copies root's optimizer state into every rank's optimizer: the per-parameter state
/// (step counts, momentum and moment buffers) and every param group's options (lr, betas,
/// ...). Ranks create the state that root has and they lack, and drop the state that root
/// lacks, so that every rank's next step is root's. Parameters themselves are not touched:
/// pair it with synchronize(module). Supports torch::optim::SGD, Adam, AdamW, RMSprop and
/// Adagrad (and classes derived from them, such as DistributedOptimizer); throws Error for
/// other optimizers and MismatchError when ranks' param groups differ. Every rank of the
/// group (the default group unless one is passed) calls it, with the same root.
void synchronize(torch::optim::Optimizer& optimizer, int root = 0, const ProcessGroup& group = ProcessGroup());

}  // namespace lockstep
