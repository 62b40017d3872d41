#pragma once

// lockstep's distributed core: process groups and collectives, replicas on threads,
// DistributedDataParallel, live recovery and the distributed optimizers. The data layer
// (lockstep/data/), the Trainer and checkpoints (lockstep/train/) and the timeline
// (lockstep/timeline.h) have headers of their own, included where they are used.
#include "lockstep/comm/collectives.h"
#include "lockstep/error.h"
#include "lockstep/comm/init.h"
#include "lockstep/comm/process_group.h"
#include "lockstep/comm/replicas.h"
#include "lockstep/comm/types.h"
#include "lockstep/comm/work.h"
#include "lockstep/ddp/comm_hook.h"
#include "lockstep/ddp/distributed_data_parallel.h"
#include "lockstep/ddp/live_training.h"
#include "lockstep/ddp/scripted_module.h"
#include "lockstep/ddp/synchronize.h"
#include "lockstep/optim/distributed_optimizer.h"
#include "lockstep/optim/sharded_optimizer.h"
#include "lockstep/optim/synchronize.h"
