#include "data_commands.h"

#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/error.h"
#include "lockstep/data/export.h"
#include "lockstep/data/registry.h"
#include "lockstep/data/shards.h"
#include "audit_command.h"
#include "registry_choice.h"

namespace lockstep::tools {
namespace {

using data::Registry;

int list_datasets(const Registry& registry) {
  std::cout << "datasets in " << registry.source() << ":\n";
  for (const auto& entry : registry.entries()) {
    std::string splits;
    for (const auto& [split, location] : entry.splits) splits += (splits.empty() ? "" : ",") + split;
    const std::string problem = data::check_readable(entry);
    std::cout << "  " << entry.name << "  " << entry.type << "  " << entry.path << "  splits " << splits << "  "
              << (problem.empty() ? "readable" : "NOT READABLE: " + problem) << "\n";
  }
  return 0;
}

// "64MB", "512KB", "1GB" or a byte count; K, M and G are powers of 1024.
size_t parse_byte_size(const std::string& text) {
  size_t end = 0;
  unsigned long long count = 0;
  try {
    count = std::stoull(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  std::string unit = text.substr(end);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  const std::map<std::string, size_t> scale = {{"", 1}, {"K", 1u << 10}, {"M", 1u << 20}, {"G", size_t{1} << 30}};
  const auto found = scale.find(unit);
  if (end == 0 || count == 0 || found == scale.end()) {
    throw ConfigError("--shard-size " + text + " is not a size such as 64MB, 512KB or 1GB");
  }
  return static_cast<size_t>(count) * found->second;
}

void add_pack_command(CLI::App& data, Action& chosen) {
  CLI::App* command = data.add_subcommand(
      "pack", "Write splits of a dataset as tar shards with an index, for type = \"shards\" (see docs/DATA.md)");
  auto choice = std::make_shared<RegistryChoice>();
  auto name = std::make_shared<std::string>("fashion-mnist");
  auto splits = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto shard_size = std::make_shared<std::string>("64MB");
  command->add_option("--dataset", *name, "Registry name of the dataset to pack")->capture_default_str();
  command->add_option("--split", *splits, "Split to pack; repeat for several (default: all the entry's splits)");
  command->add_option("--out", *out, "Folder to write the shards and each split's index into")->required();
  command->add_option("--shard-size", *shard_size, "Bytes per shard at most, e.g. 64MB")->capture_default_str();
  auto store = std::make_shared<data::PackOptions>();
  command->add_option(
      "--endpoint", store->endpoint(),
      "For --out s3://...: an S3-compatible store's URL (default: AWS_ENDPOINT_URL_S3, the AWS profile's, "
      "else AWS)");
  command->add_option("--region", store->region(),
                      "For --out s3://...: the bucket's region (default: AWS_REGION, ...)");
  command->add_option("--addressing", store->addressing(), "For --out s3://...: virtual or path")
      ->check(CLI::IsMember({"virtual", "path"}));
  command->add_option("--ca-file", store->ca_file(), "For an https endpoint: certificate authorities to trust");
  choice->add_to(*command);
  command->callback([=, &chosen] {
    chosen = [=] {
      const size_t shard_bytes = parse_byte_size(*shard_size);
      const Registry registry = choice->load(*name);
      const auto& entry = registry.at(*name);
      std::vector<std::string> chosen_splits = *splits;
      if (chosen_splits.empty()) {
        for (const auto& [split, location] : entry.splits) chosen_splits.push_back(split);
      }
      for (const auto& split : chosen_splits) {
        const auto dataset = data::open_dataset(entry, split);
        data::PackOptions options = *store;
        const auto summary = data::pack_shards(*dataset, split, *out,
                                               options.shard_bytes(shard_bytes).class_names(data::class_names(entry)));
        std::cout << "packed " << summary.samples << " " << split << " examples of " << *name << " into "
                  << summary.shards << " shard(s), " << summary.bytes << " bytes; index " << summary.index << "\n";
      }
      return 0;
    };
  });
}

}  // namespace

void add_datasets_command(CLI::App& app, Action& chosen) {
  CLI::App* command = app.add_subcommand("datasets", "List the registry's datasets and whether each is readable");
  auto choice = std::make_shared<RegistryChoice>();
  choice->add_to(*command);
  command->callback([&chosen, choice] { chosen = [choice] { return list_datasets(choice->load("")); }; });
}

void add_data_command(CLI::App& app, Action& chosen) {
  CLI::App* data = app.add_subcommand("data", "Dataset tools");
  data->require_subcommand(1);
  CLI::App* command = data->add_subcommand(
      "export-imagenet-layout", "Write a dataset's train and test/val splits as JPEGs in ImageNet's Kaggle layout");
  auto choice = std::make_shared<RegistryChoice>();
  auto name = std::make_shared<std::string>("fashion-mnist");
  auto out = std::make_shared<std::string>();
  auto limit = std::make_shared<int64_t>(0);
  auto quality = std::make_shared<int>(95);
  command->add_option("--dataset", *name, "Registry name of the dataset to export")->capture_default_str();
  command->add_option("--out", *out, "Folder to write")->required();
  command->add_option("--limit", *limit, "At most this many images per split (0: all)")->check(CLI::NonNegativeNumber);
  command->add_option("--quality", *quality, "JPEG quality")->check(CLI::Range(1, 100))->capture_default_str();
  choice->add_to(*command);
  command->callback([=, &chosen] {
    chosen = [=] {
      const Registry registry = choice->load(*name);
      const auto& entry = registry.at(*name);
      const auto train = data::open_dataset(entry, "train");
      const auto val = data::open_dataset(entry, data::held_out_split(entry));
      const auto summary = data::export_imagenet_layout(*train, *val, data::class_names(entry), *out, *limit, *quality);
      std::cout << "wrote " << summary.train_images << " train and " << summary.val_images << " val images of " << *name
                << " in ImageNet's layout under " << *out << "\n";
      return 0;
    };
  });
  add_pack_command(*data, chosen);
  add_audit_command(*data, chosen);
}

}  // namespace lockstep::tools
