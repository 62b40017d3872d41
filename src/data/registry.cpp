#include "lockstep/data/registry.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <toml++/toml.h>

#include "lockstep/error.h"
#include "lockstep/data/fashion_mnist.h"
#include "lockstep/data/imagenet.h"
#include "lockstep/data/shards.h"

namespace lockstep::data {

extern const char* const kDefaultRegistry;  // data/Data.toml, compiled in by CMake

namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kTypes = {"fashion-mnist", "imagenet", "image-folder", "tensors", "shards"};

// Where each type finds its splits when an entry does not say (see docs/DATA.md).
std::map<std::string, std::string> default_splits(const std::string& type) {
  if (type == "fashion-mnist") return {{"train", "train"}, {"test", "t10k"}};
  if (type == "imagenet") return {{"train", "train"}, {"val", "val"}};
  if (type == "image-folder") return {{"train", "."}};
  if (type == "shards") return {{"train", "train"}, {"test", "test"}};
  return {{"train", "train.pt"}, {"test", "test.pt"}};
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

std::string place(const std::string& source, const toml::node& node) {
  return source + ":" + std::to_string(node.source().begin.line);
}

[[noreturn]] void reject(const std::string& where, const std::string& name, const std::string& what) {
  throw ConfigError(where + ": dataset '" + name + "' " + what);
}

std::string text_field(const toml::table& table, const std::string& key, const std::string& source,
                       const DatasetEntry& entry) {
  const toml::node* node = table.get(key);
  if (node == nullptr) reject(entry.defined_at, entry.name, "has no " + key);
  const auto value = node->value<std::string>();
  if (!value || value->empty()) reject(place(source, *node), entry.name, key + " must be a non-empty string");
  return *value;
}

// Where the entry's files are, and how they are fetched: paths relative to the registry's folder.
void read_locations(const toml::table& table, const std::string& source, const std::string& base_dir,
                    DatasetEntry& entry) {
  const auto local = [&](const std::string& path) {
    return fs::path(path).is_relative() && !base_dir.empty() && path.find("://") == std::string::npos;
  };
  entry.path = text_field(table, "path", source, entry);
  if (local(entry.path)) entry.path = (fs::path(base_dir) / entry.path).string();
  if (table.get("ca_file") != nullptr) {
    entry.ca_file = text_field(table, "ca_file", source, entry);
    if (local(entry.ca_file)) entry.ca_file = (fs::path(base_dir) / entry.ca_file).string();
  }
  for (auto [key, field] : {std::pair{"endpoint", &entry.endpoint}, std::pair{"region", &entry.region},
                            std::pair{"addressing", &entry.addressing}}) {
    if (table.get(key) != nullptr) *field = text_field(table, key, source, entry);
  }
  if (table.get("cache") != nullptr) {
    entry.cache = text_field(table, "cache", source, entry);
    if (local(entry.cache)) entry.cache = (fs::path(base_dir) / entry.cache).string();
  }
  if (const toml::node* bytes = table.get("cache_bytes")) {
    const auto value = bytes->value<int64_t>();
    if (!value || *value <= 0) {
      reject(place(source, *bytes), entry.name, "cache_bytes must be a positive number of bytes");
    }
    entry.cache_bytes = *value;
  }
  if (const toml::node* timeout = table.get("timeout")) {
    const auto seconds = timeout->value<double>();
    if (!seconds || *seconds <= 0) {
      reject(place(source, *timeout), entry.name, "timeout must be a positive number of seconds");
    }
    entry.timeout = *seconds;
  }
}

// What the images are: channels and classes.
void read_contents(const toml::table& table, const std::string& source, DatasetEntry& entry) {
  const std::string& name = entry.name;
  // Shards record their channels in the index: 0 reads them as packed.
  entry.channels = entry.type == "fashion-mnist" ? 1 : entry.type == "shards" ? 0 : 3;
  if (const toml::node* channels = table.get("channels")) {
    const auto value = channels->value<int64_t>();
    if (!value || (*value != 1 && *value != 3)) reject(place(source, *channels), name, "channels must be 1 or 3");
    entry.channels = static_cast<int>(*value);
  }
  if (entry.type == "fashion-mnist" && entry.channels != 1) {
    reject(entry.defined_at, name, "is fashion-mnist, whose images have 1 channel");
  }

  if (const toml::node* classes = table.get("classes")) {
    if (const auto count = classes->value<int64_t>(); count && *count > 0) {
      entry.classes = *count;
    } else if (const toml::array* names = classes->as_array()) {
      for (const auto& item : *names) {
        const auto text = item.value<std::string>();
        if (!text) reject(place(source, item), name, "classes must be a count or a list of names");
        entry.class_names.push_back(*text);
      }
      entry.classes = static_cast<int64_t>(entry.class_names.size());
    } else {
      reject(place(source, *classes), name, "classes must be a positive count or a list of names");
    }
  }
}

// Which folder or file holds each split.
void read_splits(const toml::table& table, const std::string& source, DatasetEntry& entry) {
  entry.splits = default_splits(entry.type);
  const toml::node* splits = table.get("splits");
  if (splits == nullptr) return;
  const toml::table* split_table = splits->as_table();
  if (split_table == nullptr) {
    reject(place(source, *splits), entry.name, "splits must be a table, e.g. { train = \"train\" }");
  }
  entry.splits.clear();
  for (const auto& [key, value] : *split_table) {
    const auto location = value.value<std::string>();
    if (!location) {
      reject(place(source, value), entry.name, "split '" + std::string(key.str()) + "' must be a string");
    }
    entry.splits[std::string(key.str())] = *location;
  }
  if (entry.splits.empty()) reject(place(source, *splits), entry.name, "has no splits");
}

DatasetEntry read_entry(const std::string& name, const toml::node& node, const std::string& source,
                        const std::string& base_dir) {
  DatasetEntry entry;
  entry.name = name;
  entry.defined_at = place(source, node);
  const toml::table* table = node.as_table();
  if (table == nullptr) reject(entry.defined_at, name, "must be a table ([" + name + "] with type and path)");

  entry.type = text_field(*table, "type", source, entry);
  if (std::find(kTypes.begin(), kTypes.end(), entry.type) == kTypes.end()) {
    reject(place(source, *table->get("type")), name,
           "has unknown type '" + entry.type + "' (known: " + joined(kTypes) + ")");
  }
  read_locations(*table, source, base_dir, entry);
  read_contents(*table, source, entry);
  read_splits(*table, source, entry);
  return entry;
}

std::string environment_key(const std::string& name) {
  std::string key = "LOCKSTEP_DATA_PATH_";
  for (char c : name) key += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_';
  return key;
}

std::string split_location(const DatasetEntry& entry, const std::string& split) {
  const auto found = entry.splits.find(split);
  if (found == entry.splits.end()) {
    std::vector<std::string> known;
    for (const auto& [name, location] : entry.splits) known.push_back(name);
    throw ConfigError("dataset '" + entry.name + "' (" + entry.defined_at + ") has no split '" + split +
                      "' (splits: " + joined(known) + ")");
  }
  return found->second;
}

ShardOptions shard_options(const DatasetEntry& entry, const std::string& location) {
  ShardOptions options = ShardOptions()
                             .channels(entry.channels)
                             .classes(entry.classes)
                             .ca_file(entry.ca_file)
                             .endpoint(entry.endpoint)
                             .region(entry.region)
                             .addressing(entry.addressing);
  if (entry.timeout > 0) options.timeout(entry.timeout);
  options.cache(entry.cache);
  if (entry.cache_bytes > 0) options.cache_bytes(static_cast<size_t>(entry.cache_bytes));
  if (!entry.index_copies.empty()) {
    options.index_copy((fs::path(entry.index_copies) / entry.name / (location + ".index.json")).string());
  }
  return options;
}

std::shared_ptr<Dataset> open_by_type(const DatasetEntry& entry, const std::string& location) {
  const std::string path = (fs::path(entry.path) / location).lexically_normal().string();
  if (entry.type == "fashion-mnist") return read_fashion_mnist(entry.path, location);
  if (entry.type == "imagenet") return read_imagenet(entry.path, location, entry.channels);
  if (entry.type == "image-folder") return read_image_folder(path, entry.channels);
  if (entry.type == "shards") {
    return std::make_shared<ShardDataset>(entry.path, location, shard_options(entry, location));
  }
  if (entry.classes == 0) {
    throw ConfigError("dataset '" + entry.name + "' (" + entry.defined_at +
                      ") is of type tensors and must say how many classes it has (classes = N)");
  }
  return load_tensors(path, entry.classes);
}

}  // namespace

Registry Registry::parse(const std::string& text, const std::string& source, const std::string& base_dir) {
  toml::table document;
  try {
    document = toml::parse(text, source);
  } catch (const toml::parse_error& error) {
    throw ConfigError(source + ":" + std::to_string(error.source().begin.line) + ": " +
                      std::string(error.description()));
  }
  Registry registry;
  registry.source_ = source;
  for (const auto& [key, node] : document) {
    registry.entries_.push_back(read_entry(std::string(key.str()), node, source, base_dir));
  }
  // toml++ keeps keys sorted; list the entries in the order the file gives them.
  std::stable_sort(registry.entries_.begin(), registry.entries_.end(), [&](const auto& a, const auto& b) {
    return document[a.name].node()->source().begin.line < document[b.name].node()->source().begin.line;
  });
  return registry;
}

Registry Registry::load(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw ConfigError("cannot read the dataset registry " + path + " (no such file?)");
  std::ostringstream text;
  text << file.rdbuf();
  return parse(text.str(), path, fs::absolute(path).parent_path().string());
}

Registry Registry::load_default() {
  const char* chosen = std::getenv("LOCKSTEP_DATA_TOML");
  Registry registry = chosen != nullptr && *chosen != '\0'
                          ? load(chosen)
                          : parse(kDefaultRegistry, "lockstep's built-in Data.toml", "");
  registry.apply_environment();
  return registry;
}

const DatasetEntry& Registry::at(const std::string& name) const {
  for (const auto& entry : entries_) {
    if (entry.name == name) return entry;
  }
  unknown(name);
}

void Registry::override_path(const std::string& name, const std::string& path) {
  for (auto& entry : entries_) {
    if (entry.name == name) {
      entry.path = path;
      return;
    }
  }
  unknown(name);
}

void Registry::unknown(const std::string& name) const {
  std::vector<std::string> known;
  for (const auto& entry : entries_) known.push_back(entry.name);
  throw ConfigError("no dataset '" + name + "' in " + source_ + " (known: " + joined(known) +
                    "); add it there or point LOCKSTEP_DATA_TOML at a registry that has it");
}

void Registry::apply_environment() {
  for (auto& entry : entries_) {
    const char* path = std::getenv(environment_key(entry.name).c_str());
    if (path != nullptr && *path != '\0') entry.path = path;
  }
}

std::shared_ptr<Dataset> open_dataset(const DatasetEntry& entry, const std::string& split) {
  const auto dataset = open_by_type(entry, split_location(entry, split));
  if (entry.classes != 0 && dataset->num_classes() != entry.classes) {
    throw ConfigError("dataset '" + entry.name + "' (" + entry.defined_at + ") declares " +
                      std::to_string(entry.classes) + " classes but its " + split + " split has " +
                      std::to_string(dataset->num_classes()));
  }
  return dataset;
}

std::vector<std::string> class_names(const DatasetEntry& entry) {
  if (!entry.class_names.empty()) return entry.class_names;
  if (entry.type == "fashion-mnist") return fashion_mnist_classes();
  // From an index; shards named by a pattern have none to read names from.
  if (entry.type == "shards" && !entry.splits.empty() && entry.splits.begin()->second.find('{') == std::string::npos) {
    const auto names =
        ShardDataset(entry.path, entry.splits.begin()->second, shard_options(entry, entry.splits.begin()->second))
            .class_names();
    if (!names.empty()) return names;
  }
  std::vector<std::string> names;
  for (int64_t c = 0; c < entry.classes; ++c) names.push_back(std::to_string(c));
  return names;
}

std::string held_out_split(const DatasetEntry& entry) { return entry.splits.count("val") != 0 ? "val" : "test"; }

std::string check_readable(const DatasetEntry& entry) {
  std::string problems;
  for (const auto& [split, location] : entry.splits) {
    try {
      open_dataset(entry, split);
    } catch (const Error& error) {
      const std::string problem = error.what();
      if (problems.find(problem) == std::string::npos) problems += (problems.empty() ? "" : "; ") + problem;
    }
  }
  return problems;
}

}  // namespace lockstep::data
