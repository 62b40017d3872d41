#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lockstep/data/image_files.h"

namespace lockstep::data {

/// One line of LOC_synset_mapping.txt: "n01440764 tench, Tinca tinca". A synset's class
/// index is its line number, counted from 0.
struct Synset {
  std::string id;
  std::string words;
};

/// Reads LOC_synset_mapping.txt. Malformed lines throw DataError naming file and line.
std::vector<Synset> read_synset_mapping(const std::string& path);

/// Reads a LOC_{train,val}_solution.csv ("ImageId,PredictionString", whose first word is
/// the synset) into (file, class index) rows, as FluxDistributed's train_solutions.
/// Images are looked up in ImageNet's Kaggle layout under `image_dir`: train images at
/// `<image_dir>/<synset>/<ImageId>.JPEG`, val images at `<image_dir>/<ImageId>.JPEG`.
/// An unknown synset, a malformed row or a missing image throws DataError naming the CSV
/// file and line.
std::vector<LabeledFile> read_loc_solutions(const std::string& csv_path, const std::vector<Synset>& synsets,
                                            const std::string& image_dir, bool images_in_synset_folders);

/// One split ("train" or "val") of ImageNet in Kaggle's layout under `root`:
/// LOC_synset_mapping.txt, LOC_<split>_solution.csv and ILSVRC/Data/CLS-LOC/<split>/.
std::shared_ptr<ImageFileDataset> read_imagenet(const std::string& root, const std::string& split, int channels = 3);

}  // namespace lockstep::data
