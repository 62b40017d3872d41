// A store holds one job: the first to reach it claims it, and another job's process is told
// so, naming both jobs, before it writes anything there.
#include "job/job_identity.h"

#include <gtest/gtest.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "job/tcp_store_options.h"

#include "lockstep/error.h"
#include "support/env_lookup.h"

namespace lockstep {
namespace {

std::string claim_error(c10d::Store& store, const std::string& job) {
  try {
    claim_store_for_job(store, job, "rank 1", "MASTER_ADDR=127.0.0.1 MASTER_PORT=1");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(JobIdentity, AStoreRefusesAnotherJobAndKeepsItsOwn) {
  // Port 0: a free one.
  c10d::TCPStore store("127.0.0.1", tcp_store_options(0, /*is_server=*/true, std::chrono::seconds(30)));

  EXPECT_EQ(claim_error(store, "4241"), "no error");
  EXPECT_EQ(claim_error(store, "4241"), "no error");  // every rank of the job claims it
  EXPECT_EQ(claim_error(store, "4242"),
            "lockstep: rank 1 of job 4242 reached the store at MASTER_ADDR=127.0.0.1 MASTER_PORT=1, which job 4241 "
            "holds: two jobs were given one port; give this job another MASTER_PORT (or set LOCKSTEP_JOB_ID alike "
            "on every rank of one job)");
  EXPECT_EQ(claim_error(store, ""),
            "lockstep: rank 1 of a job without an id reached the store at MASTER_ADDR=127.0.0.1 MASTER_PORT=1, which "
            "job 4241 holds: two jobs were given one port; give this job another MASTER_PORT (or set LOCKSTEP_JOB_ID "
            "alike on every rank of one job)");
  EXPECT_EQ(store.getNumKeys(), 1);  // the refused ones wrote nothing
}

TEST(JobIdentity, LockstepJobIdWinsOverSlurms) {
  using testing::env_of;
  EXPECT_EQ(job_id_of(env_of({})), "");
  EXPECT_EQ(job_id_of(env_of({{"SLURM_JOB_ID", "7"}})), "7");
  EXPECT_EQ(job_id_of(env_of({{"SLURM_JOB_ID", "7"}, {"LOCKSTEP_JOB_ID", "train-a"}})), "train-a");
}

}  // namespace
}  // namespace lockstep
