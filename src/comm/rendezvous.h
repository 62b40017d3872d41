#pragma once

#include <memory>

#include "comm/communicator.h"
#include "comm/environment.h"

namespace lockstep {

/// A joined process group and where this rank sits on its machine.
struct Group {
  std::unique_ptr<Communicator> communicator;
  int local_rank = 0;
  int local_world_size = 1;
};

/// Meets the other ranks as `spec` says and connects the backend. Throws ConfigError for
/// settings that cannot work and TimeoutError when ranks do not all arrive in time.
Group join_group(const WorldSpec& spec);

/// The MPI backend's half of join_group (mpi_communicator.cpp).
Group join_mpi_group(const WorldSpec& spec);

}  // namespace lockstep
