#include "data_commands.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/error.h"
#include "lockstep/data/export.h"
#include "lockstep/data/registry.h"
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
      const auto summary =
          data::export_imagenet_layout(*train, *val, data::class_names(entry), *out, *limit, *quality);
      std::cout << "wrote " << summary.train_images << " train and " << summary.val_images
                << " val images of " << *name << " in ImageNet's layout under " << *out << "\n";
      return 0;
    };
  });
}

}  // namespace lockstep::tools
