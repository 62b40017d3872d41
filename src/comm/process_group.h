#pragma once

#include "comm/communicator.h"

namespace lockstep {

/// The process group init() made; throws an Error saying to call init() when there is none.
Communicator& default_group();

}  // namespace lockstep
