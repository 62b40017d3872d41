#pragma once

#include <string>

// Runs one DDP scenario on this rank of the default group (a process of an init() world or
// a replica of run_replicas): "equivalence", "scaling", "sub-group-equivalence",
// "compression", "overlap", "16-bit-means", "different-models" or "unused-without-flag". Prints
// "rank R: SCENARIO ok" and returns 0 when it holds; prints what went wrong and returns
// non-zero otherwise. With `out_dir`, "equivalence" saves each case's trained parameters
// there (rank 0), for comparing processes with replicas. `device` ("cpu", "cuda:0") holds
// the models and batches of "equivalence", "compression" and "scaling".
int run_ddp_scenario(const std::string& scenario, const std::string& out_dir = "", const std::string& device = "cpu");
