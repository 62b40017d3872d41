// ShardDataset: a split's shards, each read when first needed, used as it arrives and
// checked against the index, and kept in memory while the sampler walks it.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <future>
#include <list>
#include <map>
#include <mutex>

#include "data/pipeline/arriving_shard.h"
#include "data/sources/byte_source.h"
#include "data/formats/npy_format.h"
#include "data/formats/shard_index.h"
#include "lockstep/data/jpeg.h"
#include "lockstep/data/shards.h"
#include "lockstep/error.h"

namespace lockstep::data {
namespace {

int64_t parse_label(const uint8_t* text, size_t size, int64_t classes, const std::string& source) {
  std::string digits(reinterpret_cast<const char*>(text), size);
  while (!digits.empty() && std::isspace(static_cast<unsigned char>(digits.back()))) digits.pop_back();
  const bool numeric = !digits.empty() && digits.size() < 19 &&
                       std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); });
  const int64_t label = numeric ? std::stoll(digits) : -1;
  if (label < 0 || label >= classes) {
    throw DataError(source + " holds '" + digits + "', not a class index in [0, " + std::to_string(classes) + ")");
  }
  return label;
}

// "train-{000000..000127}.tar": the names from the first number to the last, as wide as
// the first is written. One brace group; anything else throws ConfigError.
std::vector<std::string> expand_braces(const std::string& pattern) {
  const size_t open = pattern.find('{'), dots = pattern.find("..", open), close = pattern.find('}', open);
  const auto bad = [&] {
    return ConfigError("shard pattern '" + pattern +
                       "' must hold one {FIRST..LAST} of numbers, e.g. train-{000000..000127}.tar");
  };
  if (dots == std::string::npos || close == std::string::npos || dots > close ||
      pattern.find('{', open + 1) != std::string::npos) {
    throw bad();
  }
  const std::string first = pattern.substr(open + 1, dots - open - 1),
                    last = pattern.substr(dots + 2, close - dots - 2);
  const auto numeric = [](const std::string& text) {
    return !text.empty() && text.size() < 10 &&
           std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  if (!numeric(first) || !numeric(last) || std::stoul(first) > std::stoul(last)) throw bad();
  std::vector<std::string> names;
  for (unsigned long number = std::stoul(first); number <= std::stoul(last); ++number) {
    std::string digits = std::to_string(number);
    if (digits.size() < first.size()) digits.insert(0, first.size() - digits.size(), '0');
    names.push_back(pattern.substr(0, open) + digits + pattern.substr(close + 1));
  }
  return names;
}

// Without an index every shard is read once, here, to count its samples; the classes must
// then be given (ShardOptions::classes), and the channels are options.channels(), else the
// first image's for .npy members and 3 for JPEG.
ShardIndex index_by_reading(const ByteSource& source, const std::string& pattern, const std::string& where,
                            const ShardOptions& options) {
  if (options.classes() < 1) {
    throw ConfigError(where +
                      " names shards without an index: say how many classes they hold (classes = N in the "
                      "registry entry), or write an index with lockstep data pack");
  }
  ShardIndex index;
  index.split = pattern;
  index.classes = options.classes();
  index.channels = options.channels();
  for (const std::string& name : expand_braces(pattern)) {
    const std::vector<uint8_t> bytes = source.read(name);
    const std::string shard = source.locate(name);
    const auto samples = group_samples(list_tar(bytes.data(), bytes.size(), shard), shard);
    if (samples.empty()) throw DataError(shard + " holds no samples");
    if (index.channels == 0) {
      const TarMember& image = samples[0].image;
      index.channels = samples[0].image_kind == "npy"
                           ? static_cast<int>(decode_npy_image(bytes.data() + image.offset, image.size, shard).size(0))
                           : 3;
    }
    index.shards.push_back(shard_entry(name, samples.size(), bytes.data(), bytes.size()));
  }
  return index;
}

}  // namespace

struct ShardDataset::State {
  ShardOptions options;
  std::shared_ptr<ByteSource> source;  // the folder: the index is always read from it
  std::shared_ptr<ByteSource> shards;  // the source, or a local cache in front of it
  std::string index_file;
  ShardIndex index;
  std::vector<size_t> first_sample;  // of each shard, and the total at the end

  std::mutex mutex;
  std::map<size_t, std::shared_ptr<ArrivingShard>> in_memory;  // by shard number, loaded or arriving
  std::list<size_t> recency;                                   // most recently used first
  size_t bytes_in_memory = 0;
  std::atomic<int64_t> reads{0};
  std::atomic<bool> closing{false};
  std::vector<std::future<void>> downloads;  // under `mutex`; waited for before the members go

  ~State() {
    closing = true;
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& download : downloads) download.wait();
  }

  size_t shard_of(size_t index) const {
    return static_cast<size_t>(std::upper_bound(first_sample.begin(), first_sample.end(), index) -
                               first_sample.begin()) -
           1;
  }

  // The shard from memory, or a download of it started, however many loader threads ask
  // for it at once.
  std::shared_ptr<ArrivingShard> shard(size_t number) {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto found = in_memory.find(number); found != in_memory.end()) {
      recency.remove(number);
      recency.push_front(number);
      return found->second;
    }
    const ShardEntry& entry = index.shards[number];
    auto arriving = std::make_shared<ArrivingShard>(entry, index.block_bytes, source->locate(entry.name), index_file);
    in_memory.emplace(number, arriving);
    recency.push_front(number);
    bytes_in_memory += entry.bytes;
    while (bytes_in_memory > options.memory_bytes() && recency.size() > 1) {
      const size_t oldest = recency.back();
      recency.pop_back();
      in_memory.erase(oldest);
      bytes_in_memory -= index.shards[oldest].bytes;
    }
    downloads.erase(std::remove_if(downloads.begin(), downloads.end(),
                                   [](const std::future<void>& download) {
                                     return download.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
                                   }),
                    downloads.end());
    // A thread of its own, so that loader threads decode the shard's start meanwhile.
    try {
      downloads.push_back(std::async(std::launch::async, [this, number, arriving] { download(number, *arriving); }));
    } catch (...) {
      arriving->fail(std::current_exception());  // no thread to be had: its waits throw why
    }
    return arriving;
  }

  // Streams the shard in. A cached copy that fails its checks is dropped and the shard read
  // again (from the origin, and kept anew), once. A failure, once given up, is kept by the
  // shard like its bytes, so that its other samples fail at once (skip_bad_samples leaves
  // them out) rather than each read it again with retries.
  void download(size_t number, ArrivingShard& shard) {
    const std::string& name = index.shards[number].name;
    const auto arrive = [&](const uint8_t* bytes, size_t size) { return !closing && shard.arrive(bytes, size); };
    for (int read = 1;; ++read) {
      std::exception_ptr error;
      shard.start_over();
      ++reads;
      try {
        if (shards->stream(name, arrive) && shard.finish()) return;
        error = shard.problem() ? shard.problem()
                                : std::make_exception_ptr(DataError(source->locate(name) + ": the dataset was closed"));
      } catch (...) {
        error = std::current_exception();
      }
      if (read == 2 || shards == source || closing || !is_data_error(error)) {
        shard.fail(error);
        return;
      }
      shards->drop_copy(name);
    }
  }

  static bool is_data_error(const std::exception_ptr& error) {
    try {
      std::rethrow_exception(error);
    } catch (const DataError&) {
      return true;
    } catch (...) {
      return false;
    }
  }
};

namespace {

// The index's text: from `copy` where an earlier opener of this job left it, else from the
// origin, then left in `copy` (written whole, then renamed) for the next.
std::string index_text(const ByteSource& source, const std::string& name, const std::string& copy) {
  if (!copy.empty()) {
    std::ifstream file(copy, std::ios::binary);
    if (file) return std::string(std::istreambuf_iterator<char>(file), {});
  }
  const std::vector<uint8_t> bytes = source.read(name);
  std::string text(bytes.begin(), bytes.end());
  if (!copy.empty()) {
    std::error_code ignored;  // without a copy, the next opener reads the origin: slower, not wrong
    std::filesystem::create_directories(std::filesystem::path(copy).parent_path(), ignored);
    const std::string temporary = copy + ".tmp" + std::to_string(::getpid());
    std::ofstream(temporary, std::ios::binary) << text;
    std::filesystem::rename(temporary, copy, ignored);
  }
  return text;
}

}  // namespace

ShardDataset::ShardDataset(const std::string& folder, const std::string& split, ShardOptions options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  if (options.channels() != 0 && options.channels() != 1 && options.channels() != 3) {
    throw ConfigError("ShardOptions::channels " + std::to_string(options.channels()) + " must be 0, 1 or 3");
  }
  s.options = options;
  s.source = open_byte_source(folder, options);
  s.shards = options.cache().empty() ? s.source : cached_source(s.source, options.cache(), options.cache_bytes());
  if (split.find('{') != std::string::npos) {
    s.index_file = s.source->locate(split);
    s.index = index_by_reading(*s.shards, split, s.index_file, options);
  } else {
    const std::string name = index_file_name(split);
    s.index_file = s.source->locate(name);
    s.index = index_from_json(index_text(*s.source, name, options.index_copy()), s.index_file);
  }
  if (s.options.channels() == 0) s.options.channels(s.index.channels);
  s.first_sample.push_back(0);
  for (const auto& shard : s.index.shards) s.first_sample.push_back(s.first_sample.back() + shard.samples);
}

ShardDataset::~ShardDataset() = default;

size_t ShardDataset::size() const { return state_->first_sample.back(); }

int64_t ShardDataset::num_classes() const { return state_->index.classes; }

const std::vector<std::string>& ShardDataset::class_names() const { return state_->index.class_names; }

int64_t ShardDataset::shard_reads() const { return state_->reads.load(); }

std::vector<size_t> ShardDataset::shard_sizes() const {
  std::vector<size_t> sizes;
  for (const auto& shard : state_->index.shards) sizes.push_back(shard.samples);
  return sizes;
}

std::string ShardDataset::describe(size_t index) const {
  const State& s = *state_;
  const size_t shard = s.shard_of(index);
  return s.source->locate(s.index.shards[shard].name) + " sample #" + std::to_string(index - s.first_sample[shard]);
}

Sample ShardDataset::get(size_t index) const {
  State& s = *state_;
  if (index >= size()) throw DataError(describe(0) + ": example " + std::to_string(index) + " is past the split's end");
  const size_t number = s.shard_of(index);
  const std::shared_ptr<const ArrivingShard> shard = s.shard(number);
  const SampleMembers members = shard->sample(index - s.first_sample[number]);
  const std::string where = s.source->locate(s.index.shards[number].name) + " member " + members.key;
  const uint8_t* bytes = shard->bytes();

  Sample sample;
  if (members.image_kind == "jpg") {
    sample.image = decode_jpeg(bytes + members.image.offset, members.image.size, s.options.channels(), where + ".jpg");
  } else {
    sample.image = decode_npy_image(bytes + members.image.offset, members.image.size, where + ".npy");
    if (sample.image.size(0) != s.options.channels()) {
      throw DataError(where + ".npy has " + std::to_string(sample.image.size(0)) + " channels, not the " +
                      std::to_string(s.options.channels()) + " asked for");
    }
  }
  sample.label = parse_label(bytes + members.label.offset, members.label.size, s.index.classes, where + ".cls");
  return sample;
}

}  // namespace lockstep::data
