#pragma once

#include <string>

#include "lockstep/comm/process_group.h"

namespace lockstep::detail {

/// Every rank of `group` throws DataError with the message of the first rank whose `error`
/// is not empty ("rank R: ..." on the others), so that no rank goes on to a collective the
/// others never reach; returns where every `error` is empty. Every rank calls it.
void throw_first_error(const std::string& error, const ProcessGroup& group);

}  // namespace lockstep::detail
