#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/data/dataset.h"

namespace lockstep::data {

/// What export_imagenet_layout wrote.
struct ExportSummary {
  int64_t train_images = 0;
  int64_t val_images = 0;
};

/// Writes a train and a val dataset as JPEGs in ImageNet's Kaggle layout under `out`:
/// LOC_synset_mapping.txt (one made-up synset per class name), LOC_train_solution.csv,
/// LOC_val_solution.csv and ILSVRC/Data/CLS-LOC/{train/<synset>,val}/*.JPEG. At most
/// `limit` examples of each split when limit > 0. Lets the ImageNet reader be tested on
/// real images without ImageNet.
ExportSummary export_imagenet_layout(const Dataset& train, const Dataset& val,
                                     const std::vector<std::string>& class_names, const std::string& out,
                                     int64_t limit = 0, int quality = 95);

}  // namespace lockstep::data
