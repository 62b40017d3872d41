#pragma once

#include <string>

namespace lockstep::tools {

/// Which host each rank of the default group runs on, as one line ("ranks on hosts: 0-1 n1,
/// 2-3 n2"), for a job's log; "" when every rank is on one host. A collective: every rank calls it.
std::string ranks_on_hosts();

}  // namespace lockstep::tools
