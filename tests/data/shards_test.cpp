// Shards: `lockstep data pack` writes tar shards and an index that read back bit for bit,
// through the registry as `lockstep train` opens them, and a shard that is cut short,
// corrupt or holds a bad member is named with its member.
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lockstep/error.h"
#include "lockstep/data/fashion_mnist.h"
#include "lockstep/data/image_files.h"
#include "lockstep/data/imagenet.h"
#include "lockstep/data/jpeg.h"
#include "lockstep/data/loader.h"
#include "lockstep/data/registry.h"
#include "lockstep/data/shards.h"
#include "support/tool_process.h"
#include "support/expected_errors.h"
#include "support/world.h"

namespace lockstep::testing {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void expect_same_examples(const data::Dataset& read, const data::Dataset& original, const std::string& what) {
  ASSERT_EQ(read.size(), original.size()) << what;
  ASSERT_EQ(read.num_classes(), original.num_classes()) << what;
  for (size_t i = 0; i < read.size(); ++i) {
    const auto back = read.get(i);
    const auto sample = original.get(i);
    ASSERT_EQ(back.label, sample.label) << what << " #" << i;
    ASSERT_TRUE(torch::equal(back.image, sample.image)) << what << " #" << i;
  }
}

data::Registry shards_registry(const std::string& folder, const std::string& extra = "") {
  return data::Registry::parse("[packed]\ntype = \"shards\"\npath = \"" + folder + "\"\n" + extra, "t.toml", "");
}

TEST(ShardPack, FashionMnistReadsBackBitForBitAsTheIdxReader) {
  TemporaryDirectory out;
  const auto run = run_process(
      {LOCKSTEP_TOOL, "data", "pack", "--dataset", "fashion-mnist", "--out", out.path(), "--shard-size", "16MB"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "packed 60000 train examples of fashion-mnist into 10 shard(s)")) << run.output;
  EXPECT_TRUE(contains(run.output, "packed 10000 test examples of fashion-mnist into 2 shard(s)")) << run.output;
  for (const auto& name : {"train.index.json", "test.index.json", "train-000000.tar", "train-000009.tar"}) {
    EXPECT_TRUE(fs::exists(out.path() + "/" + name)) << name;
  }
  for (const auto& entry : fs::directory_iterator(out.path())) {
    EXPECT_LE(fs::file_size(entry.path()), size_t{16} << 20) << entry.path();
    EXPECT_NE(entry.path().extension(), ".tmp") << entry.path();
  }

  const auto registry = shards_registry(out.path());
  const auto& entry = registry.at("packed");
  EXPECT_EQ(data::check_readable(entry), "");
  EXPECT_EQ(data::class_names(entry), data::fashion_mnist_classes());
  const std::pair<const char*, const char*> splits[] = {{"train", "train"}, {"test", "t10k"}};
  for (const auto& [split, prefix] : splits) {
    const auto packed = data::open_dataset(entry, split);
    EXPECT_EQ(packed->shard_sizes().size(), std::string(split) == "train" ? 10u : 2u);
    expect_same_examples(*packed, *data::read_fashion_mnist(FASHION_MNIST_DIR, prefix), split);
  }
}

TEST(ShardPack, JpegFilesAreKeptByteForByte) {
  TemporaryDirectory exported, out;
  const auto run =
      run_process({LOCKSTEP_TOOL, "data", "export-imagenet-layout", "--out", exported.path(), "--limit", "40"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto images = data::read_imagenet(exported.path(), "val", /*channels=*/1);
  const auto summary = data::pack_shards(*images, "val", out.path(), data::PackOptions().shard_bytes(20000));
  EXPECT_EQ(summary.samples, 40u);
  EXPECT_GT(summary.shards, 1u);

  const data::ShardDataset packed(out.path(), "val");
  expect_same_examples(packed, *images, "val");
  // The member is the file as it was: GNU tar extracts it unchanged.
  const auto extracted = run_process({"tar", "-xf", out.path() + "/val-000000.tar", "-C", out.path(), "00000000.jpg"});
  ASSERT_EQ(extracted.exit_code, 0) << extracted.output;
  EXPECT_EQ(read_bytes(out.path() + "/00000000.jpg"), read_bytes(images->files()[0].path));
}

TEST(ShardDataset, ASecondEpochThatFitsInMemoryReadsNoShard) {
  TemporaryDirectory out;
  const auto images = data::first_examples(data::read_fashion_mnist(FASHION_MNIST_DIR, "t10k"), 3000);
  const auto summary = data::pack_shards(*images, "test", out.path(), data::PackOptions().shard_bytes(1 << 20));
  ASSERT_EQ(summary.shards, 8u);
  const auto packed = std::make_shared<data::ShardDataset>(out.path(), "test");
  data::PrefetchLoader loader(
      packed, data::LoaderOptions().sampler(data::SamplerOptions().rank(0).world_size(1).batch_size(100)));
  for (int epoch = 0; epoch < 2; ++epoch) {
    loader.set_epoch(epoch);
    size_t seen = 0;
    while (const auto batch = loader.next()) seen += static_cast<size_t>(batch->labels.size(0));
    EXPECT_EQ(seen, 3000u);
    EXPECT_EQ(packed->shard_reads(), 8) << "after epoch " << epoch;
  }
  // Memory for the two shards a shuffle window spans: each shard is still read once, as
  // the sampler walks them.
  const auto tight =
      std::make_shared<data::ShardDataset>(out.path(), "test", data::ShardOptions().memory_bytes(2 << 20));
  data::PrefetchLoader walker(tight,
                              data::LoaderOptions().threads(0).sampler(
                                  data::SamplerOptions().rank(0).world_size(1).batch_size(100).shuffle_window(64)));
  while (walker.next()) {
  }
  EXPECT_EQ(tight->shard_reads(), 8);
}

// A split of 20 Fashion-MNIST examples in 2 shards, for the fault cases.
std::string small_split(const std::string& folder) {
  const auto images = data::first_examples(data::read_fashion_mnist(FASHION_MNIST_DIR, "t10k"), 20);
  data::pack_shards(*images, "test", folder, data::PackOptions().shard_bytes(24 * 1024));
  return folder + "/test-000000.tar";
}

TEST(ShardDataset, AShardCutShortOrChangedIsNamed) {
  TemporaryDirectory out;
  const std::string shard = small_split(out.path());
  const Bytes good = read_bytes(shard);
  write_bytes(shard, Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2)));
  const data::ShardDataset cut(out.path(), "test");
  const std::string message = data_error([&] { cut.get(0); });
  EXPECT_TRUE(contains(message, shard + " has " + std::to_string(good.size() / 2) + " bytes, but " + out.path() +
                                    "/test.index.json says " + std::to_string(good.size())))
      << message;

  Bytes flipped = good;
  flipped[700] ^= 0x40;
  write_bytes(shard, flipped);
  const data::ShardDataset corrupt(out.path(), "test");
  EXPECT_EQ(data_error([&] { corrupt.get(3); }),
            shard + " does not match its checksum in " + out.path() +
                "/test.index.json: the shard is corrupt or changed since it was packed (bytes 0 to " +
                std::to_string(good.size()) + ")");
}

// With skip_bad_samples the samples of a shard cut short are left out, and the shard is
// read once, not once per sample (one batch: a batch that is wholly bad fails, as for files).
TEST(ShardDataset, SkipBadSamplesLeavesOutABadShardReadOnce) {
  TemporaryDirectory out;
  const std::string shard = small_split(out.path());
  const Bytes good = read_bytes(shard);
  write_bytes(shard, Bytes(good.begin(), good.begin() + 5000));
  const auto cut = std::make_shared<data::ShardDataset>(out.path(), "test");
  const size_t bad = cut->shard_sizes()[0];
  data::PrefetchLoader loader(cut, data::LoaderOptions().skip_bad_samples(true).sampler(
                                       data::SamplerOptions().rank(0).world_size(1).batch_size(20).shuffle(false)));
  size_t seen = 0;
  while (const auto batch = loader.next()) seen += static_cast<size_t>(batch->labels.size(0));
  EXPECT_EQ(seen, 20 - bad);
  EXPECT_EQ(loader.skipped(), static_cast<int64_t>(bad));
  EXPECT_EQ(cut->shard_reads(), static_cast<int64_t>(cut->shard_sizes().size()));
}

// A shard made by GNU tar, as users make them, with its index written by hand.
TEST(ShardDataset, ABadMemberIsNamedWithItsShardAndMember) {
  TemporaryDirectory out;
  const std::string files = out.path() + "/files";
  fs::create_directories(files);
  const Bytes jpeg = data::encode_jpeg(torch::full({1, 8, 8}, 100, torch::kUInt8));
  write_bytes(files + "/a.jpg", jpeg);
  std::ofstream(files + "/a.cls") << "3\n";
  write_bytes(files + "/b.jpg", jpeg);
  std::ofstream(files + "/b.cls") << "12";
  const auto made = run_process(
      {"tar", "--format=ustar", "-cf", out.path() + "/my-0.tar", "-C", files, "a.jpg", "a.cls", "b.jpg", "b.cls"});
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const Bytes tar = read_bytes(out.path() + "/my-0.tar");
  char crc[9];
  std::snprintf(crc, sizeof crc, "%08lx", crc32(0, tar.data(), static_cast<uInt>(tar.size())));
  std::ofstream(out.path() + "/mine.index.json")
      << R"({"format": "lockstep shards 1", "split": "mine", "channels": 1, "classes": 10, "shards": [)"
      << R"({"name": "my-0.tar", "samples": 2, "bytes": )" << tar.size() << R"(, "crc32": ")" << crc << R"("}]})";

  const data::ShardDataset mine(out.path(), "mine");
  EXPECT_EQ(mine.get(0).label, 3);
  EXPECT_TRUE(torch::equal(mine.get(0).image, torch::full({1, 8, 8}, 100, torch::kUInt8)) ||
              (mine.get(0).image.to(torch::kInt) - 100).abs().max().item<int>() <= 2);
  EXPECT_EQ(data_error([&] { mine.get(1); }),
            out.path() + "/my-0.tar member b.cls holds '12', not a class index in [0, 10)");
}

TEST(ShardDataset, AMissingOrBadIndexIsNamed) {
  TemporaryDirectory out;
  EXPECT_TRUE(contains(data_error([&] { data::ShardDataset(out.path(), "train"); }),
                       "cannot read " + out.path() + "/train.index.json: No such file or directory"));
  std::ofstream(out.path() + "/train.index.json") << R"({"format": "lockstep shards 1", "split": "train"})";
  EXPECT_TRUE(contains(data_error([&] { data::ShardDataset(out.path(), "train"); }),
                       out.path() + "/train.index.json is not a lockstep shard index: "));
  std::ofstream(out.path() + "/train.index.json")
      << R"({"format": "lockstep shards 1", "split": "train", "channels": 1, "classes": 10, "block_bytes": 1048576,)"
      << R"("shards": [{"name": "train-0.tar", "samples": 2, "bytes": 3000, "crc32": "00000000",)"
      << R"("block_crc32": ["00000000", "00000000"]}]})";
  EXPECT_EQ(data_error([&] { data::ShardDataset(out.path(), "train"); }),
            out.path() +
                "/train.index.json is not a lockstep shard index: shard train-0.tar has 2 block checksums, not the 1 "
                "its 3000 bytes make in blocks of 1048576");
  const auto registry = shards_registry(out.path());
  EXPECT_TRUE(contains(data::check_readable(registry.at("packed")), out.path() + "/test.index.json"));
}

// Shards named by a brace pattern, without their index: read once at opening to count.
TEST(ShardDataset, ShardsNamedByAPatternReadAsWithTheirIndex) {
  TemporaryDirectory out;
  small_split(out.path());
  const data::ShardDataset indexed(out.path(), "test");
  ASSERT_EQ(indexed.shard_sizes().size(), 3u);
  const data::ShardDataset patterned(out.path(), "test-{000000..000002}.tar", data::ShardOptions().classes(10));
  EXPECT_EQ(patterned.shard_sizes(), indexed.shard_sizes());
  EXPECT_EQ(patterned.shard_reads(), 0)
      << "the reads at opening count the samples; the shards are read again when used";
  for (size_t i = 0; i < indexed.size(); ++i) {
    EXPECT_TRUE(torch::equal(patterned.get(i).image, indexed.get(i).image)) << i;
    EXPECT_EQ(patterned.get(i).label, indexed.get(i).label) << i;
  }
  const auto config_error = [&](const std::string& split, data::ShardOptions options) {
    try {
      data::ShardDataset(out.path(), split, options);
    } catch (const ConfigError& error) {
      return std::string(error.what());
    }
    return std::string("no ConfigError");
  };
  EXPECT_EQ(config_error("test-{000000..000002}.tar", data::ShardOptions()),
            out.path() +
                "/test-{000000..000002}.tar names shards without an index: say how many classes they hold "
                "(classes = N in the registry entry), or write an index with lockstep data pack");
  EXPECT_EQ(config_error("test-{000002..000000}.tar", data::ShardOptions().classes(10)),
            "shard pattern 'test-{000002..000000}.tar' must hold one {FIRST..LAST} of numbers, e.g. "
            "train-{000000..000127}.tar");
  EXPECT_TRUE(contains(data_error([&] {
                         data::ShardDataset(out.path(), "test-{000000..000003}.tar", data::ShardOptions().classes(10));
                       }),
                       "cannot read " + out.path() + "/test-000003.tar"));
}

TEST(ShardPack, BadShardSizesAreOneLine) {
  TemporaryDirectory out;
  const auto run = run_process({LOCKSTEP_TOOL, "data", "pack", "--out", out.path(), "--shard-size", "64XB"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_TRUE(contains(run.output, "--shard-size 64XB is not a size such as 64MB, 512KB or 1GB")) << run.output;
}

}  // namespace
}  // namespace lockstep::testing
