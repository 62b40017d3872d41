#include "lockstep/data/imagenet.h"

#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "lockstep/error.h"

namespace fs = std::filesystem;

namespace lockstep::data {
namespace {

// Reads a text file line by line, dropping the '\r' of Windows line endings, and names
// file and line (1-based) in messages.
class LineReader {
 public:
  explicit LineReader(std::string path) : path_(std::move(path)), in_(path_) {
    if (!in_) throw DataError(path_ + ": cannot open (" + (fs::exists(path_) ? "unreadable" : "no such file") + ")");
  }

  bool next(std::string* line) {
    if (!std::getline(in_, *line)) return false;
    ++number_;
    if (!line->empty() && line->back() == '\r') line->pop_back();
    return true;
  }

  DataError error(const std::string& what) const {
    return DataError(path_ + ":" + std::to_string(number_) + ": " + what);
  }

 private:
  std::string path_;
  std::ifstream in_;
  int64_t number_ = 0;
};

std::string first_word(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_first_of(" \t", begin) - begin);
}

}  // namespace

std::vector<Synset> read_synset_mapping(const std::string& path) {
  LineReader reader(path);
  std::vector<Synset> synsets;
  std::unordered_map<std::string, size_t> seen;
  std::string line;
  while (reader.next(&line)) {
    if (line.empty()) continue;
    const size_t space = line.find_first_of(" \t");
    Synset synset{line.substr(0, space), space == std::string::npos ? "" : line.substr(space + 1)};
    if (synset.id.empty()) {
      throw reader.error("expected \"<synset id> <words>\" (e.g. \"n01440764 tench, Tinca tinca\"), got \"" + line +
                         "\"");
    }
    if (!seen.emplace(synset.id, synsets.size()).second) {
      throw reader.error("synset " + synset.id + " is listed twice (first as class " + std::to_string(seen[synset.id]) +
                         ")");
    }
    synsets.push_back(std::move(synset));
  }
  if (synsets.empty()) throw DataError(path + " has no synsets");
  return synsets;
}

std::vector<LabeledFile> read_loc_solutions(const std::string& csv_path, const std::vector<Synset>& synsets,
                                            const std::string& image_dir, bool images_in_synset_folders) {
  std::unordered_map<std::string, int64_t> class_of;
  for (size_t i = 0; i < synsets.size(); ++i) class_of.emplace(synsets[i].id, static_cast<int64_t>(i));

  LineReader reader(csv_path);
  std::string line;
  if (reader.next(&line) && line.rfind("ImageId,", 0) != 0) {
    throw reader.error("expected the header \"ImageId,PredictionString\", got \"" + line + "\"");
  }
  std::vector<LabeledFile> files;
  while (reader.next(&line)) {
    if (line.empty()) continue;
    const size_t comma = line.find(',');
    const std::string image_id = line.substr(0, comma);
    const std::string synset = comma == std::string::npos ? "" : first_word(line.substr(comma + 1));
    if (image_id.empty() || synset.empty()) {
      throw reader.error("expected \"<ImageId>,<synset> ...\", got \"" + line + "\"");
    }
    const auto found = class_of.find(synset);
    if (found == class_of.end()) throw reader.error("unknown synset " + synset + " (not in the synset mapping)");
    fs::path image = fs::path(image_dir);
    if (images_in_synset_folders) image /= synset;
    image /= image_id + ".JPEG";
    if (!fs::is_regular_file(image))
      throw reader.error("image " + image_id + " is missing: expected " + image.string());
    files.push_back({image.string(), found->second});
  }
  if (files.empty()) throw DataError(csv_path + " has no examples");
  return files;
}

std::shared_ptr<ImageFileDataset> read_imagenet(const std::string& root, const std::string& split, int channels) {
  if (split != "train" && split != "val") {
    throw ConfigError("read_imagenet: split must be \"train\" or \"val\", got \"" + split + "\"");
  }
  const fs::path base(root);
  const std::vector<Synset> synsets = read_synset_mapping((base / "LOC_synset_mapping.txt").string());
  const std::string csv = (base / ("LOC_" + split + "_solution.csv")).string();
  const std::string images = (base / "ILSVRC" / "Data" / "CLS-LOC" / split).string();
  std::vector<LabeledFile> files = read_loc_solutions(csv, synsets, images, split == "train");
  std::vector<std::string> classes;
  for (const Synset& synset : synsets) classes.push_back(synset.id);
  return std::make_shared<ImageFileDataset>(std::move(files), std::move(classes), channels);
}

}  // namespace lockstep::data
