#pragma once
// Moved to lockstep/optim/sharded_optimizer.h; this forward stays for one release.
#include "lockstep/optim/sharded_optimizer.h"
