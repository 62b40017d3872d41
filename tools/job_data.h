#pragma once

#include <memory>
#include <string>

#include "lockstep/data/dataset.h"
#include "lockstep/data/transforms.h"
#include "train_job.h"

namespace lockstep::tools {

// What every worker reads: opened once per process, and shared by its replicas.
struct JobData {
  std::shared_ptr<data::Dataset> train_set;
  std::shared_ptr<data::Dataset> val_set;
  std::string val_split;
  int64_t image_size;
  data::Transform train_transform;
  data::Transform val_transform;
};

// The job's train and validation splits, with their transforms; ConfigError or DataError
// naming what cannot be read.
JobData open_job_data(const TrainJob& job);

// Names a folder, private to one job, where its launcher leaves copies of the split
// indexes it read, for its workers (inherited by them with the environment).
inline constexpr const char* kIndexCopiesVariable = "LOCKSTEP_INDEX_COPIES";

}  // namespace lockstep::tools
