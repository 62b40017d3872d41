#pragma once

// Which job a rendezvous store belongs to. On a shared node two jobs can be given one
// MASTER_PORT (by hand, or two derived ports that collide): a process of the second job that
// reaches the first one's store must fail at once, naming both jobs, and leave the first
// job's keys untouched. The first process to reach a store claims it for its job, with one
// compare-and-set, before anything else is written there.

#include <string>

#include "comm/world/environment.h"

namespace c10d {
class Store;
}

namespace lockstep {

/// This process's job: LOCKSTEP_JOB_ID, else SLURM_JOB_ID, else "" (jobs without an id
/// cannot be told apart, and meet as before).
std::string job_id_of(const EnvLookup& env);

/// Claims `store` for `job`, or throws ConfigError when another job holds it. `who` names
/// this process ("rank 3", "the launcher of node 1") and `where` the store (its address).
void claim_store_for_job(c10d::Store& store, const std::string& job, const std::string& who, const std::string& where);

}  // namespace lockstep
