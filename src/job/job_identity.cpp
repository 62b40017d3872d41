#include "job/job_identity.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "lockstep/error.h"

namespace lockstep {
namespace {

const std::string kJobKey = "lockstep/job";

std::string described(const std::string& job) { return job.empty() ? "a job without an id" : "job " + job; }

}  // namespace

std::string job_id_of(const EnvLookup& env) {
  return env("LOCKSTEP_JOB_ID").value_or(env("SLURM_JOB_ID").value_or(""));
}

void claim_store_for_job(c10d::Store& store, const std::string& job, const std::string& who, const std::string& where) {
  // The value is never empty: c10d's compareSet treats an empty expected value as "absent".
  const std::string mine = "job=" + job;
  const std::vector<uint8_t> holder = store.compareSet(kJobKey, {}, std::vector<uint8_t>(mine.begin(), mine.end()));
  const std::string held(holder.begin(), holder.end());
  if (held == mine) return;
  const std::string other = held.rfind("job=", 0) == 0 ? held.substr(4) : held;
  throw ConfigError("lockstep: " + who + " of " + described(job) + " reached the store at " + where + ", which " +
                    described(other) +
                    " holds: two jobs were given one port; give this job another MASTER_PORT "
                    "(or set LOCKSTEP_JOB_ID alike on every rank of one job)");
}

}  // namespace lockstep
