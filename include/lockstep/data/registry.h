#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/data/dataset.h"

namespace lockstep::data {

/// One named dataset of a Data.toml registry:
///
///   [fashion-mnist]
///   type = "fashion-mnist"        # fashion-mnist, imagenet, image-folder, tensors or shards
///   path = "/usr/share/datasets/fashion-mnist"
///   channels = 1                  # images are read as 1 (gray) or 3 (RGB) channels
///                                 # (shards: as packed unless given)
///   classes = 10                  # a count, or the class names in label order
///   splits = { train = "train", test = "t10k" }
///
/// A "shards" entry's path may be an http:// or https:// URL, with `ca_file` (a PEM file of
/// certificate authorities to trust) and `timeout` (seconds a connection may stall), or an
/// s3://BUCKET/PREFIX, with `endpoint`, `region` and `addressing` (ShardOptions); `cache`
/// (a local folder) and `cache_bytes` keep copies of the shards read.
/// A split names where its examples are, relative to `path`; each type has defaults (see
/// docs/DATA.md). Relative paths are relative to the registry file.
struct DatasetEntry {
  std::string name;
  std::string type;
  std::string path;
  int channels = 1;                      // 0 for shards not given any: as the index records
  int64_t classes = 0;                   // 0 when not given
  std::vector<std::string> class_names;  // empty when not given
  std::map<std::string, std::string> splits;
  std::string ca_file;   // shards over https: a private CA to trust
  std::string endpoint;  // shards in S3: the store's URL, region and addressing; empty:
  std::string region;    // from the environment and the AWS profile
  std::string addressing;
  double timeout = 0;        // shards over http(s): seconds before a retry; 0: ShardOptions' default
  std::string cache;         // shards: a local folder for copies; empty: none
  int64_t cache_bytes = 0;   // its limit; 0: ShardOptions' default
  std::string defined_at;    // "file:line", for messages
  std::string index_copies;  // shards: a job's folder for copies of the split indexes
                             // (ShardOptions::index_copy); empty: none
};

/// The datasets a user has described. The registry file is the one given, else
/// $LOCKSTEP_DATA_TOML, else the one shipped with lockstep (data/Data.toml). Any entry's
/// path can be overridden with $LOCKSTEP_DATA_PATH_<NAME> (name upper-cased, '-' as '_')
/// or override_path().
class Registry {
 public:
  /// Reads a Data.toml file. Syntax errors and entries without a type or path, or with an
  /// unknown type, throw ConfigError naming the file and line.
  static Registry load(const std::string& path);
  /// Parses Data.toml text; `source` names it in messages.
  static Registry parse(const std::string& text, const std::string& source, const std::string& base_dir);
  /// $LOCKSTEP_DATA_TOML if set, else the shipped registry; environment path overrides applied.
  static Registry load_default();

  const std::vector<DatasetEntry>& entries() const { return entries_; }
  /// The entry called `name`; ConfigError listing the known names when there is none.
  const DatasetEntry& at(const std::string& name) const;
  void override_path(const std::string& name, const std::string& path);
  /// Applies $LOCKSTEP_DATA_PATH_<NAME> overrides.
  void apply_environment();
  /// Where the entries came from.
  const std::string& source() const { return source_; }

 private:
  [[noreturn]] void unknown(const std::string& name) const;

  std::vector<DatasetEntry> entries_;
  std::string source_;
};

/// Opens one split ("train", "test", "val", ...) of an entry. Unknown splits throw
/// ConfigError; unreadable or empty data DataError naming the file.
std::shared_ptr<Dataset> open_dataset(const DatasetEntry& entry, const std::string& split);

/// The class names of an entry: its class_names, Fashion-MNIST's names, or "0", "1", ...
std::vector<std::string> class_names(const DatasetEntry& entry);

/// The split to validate on: "val" when the entry has one, else "test".
std::string held_out_split(const DatasetEntry& entry);

/// An empty string when every split of the entry can be opened, else what is wrong.
std::string check_readable(const DatasetEntry& entry);

}  // namespace lockstep::data
