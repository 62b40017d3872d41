#pragma once
// Moved to lockstep/optim/distributed_optimizer.h; this forward stays for one release.
#include "lockstep/optim/distributed_optimizer.h"
