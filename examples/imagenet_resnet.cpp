// FluxDistributed's ImageNet demo in lockstep: ResNet-34, SGD with momentum, cross-entropy,
// 96 images per worker and batch, 2 epochs, validated after each.
//
//   lockstep run -n 2 -- imagenet_resnet --data /data/imagenet
//
// DATA is ImageNet in Kaggle's layout (LOC_*_solution.csv, LOC_synset_mapping.txt,
// ILSVRC/Data/CLS-LOC/...). Without ImageNet, export Fashion-MNIST in that layout first:
//
//   lockstep data export-imagenet-layout --dataset fashion-mnist --out /tmp/fmnist-imagenet
//   lockstep run -n 2 -- imagenet_resnet --data /tmp/fmnist-imagenet --limit 960

#include <iostream>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include "lockstep/data/imagenet.h"
#include "lockstep/data/loader.h"
#include "lockstep/lockstep.h"
#include "lockstep/train/models.h"
#include "lockstep/train/trainer.h"

namespace data = lockstep::data;
namespace train = lockstep::train;

int main(int argc, char** argv) {
  CLI::App app{"ResNet-34 on ImageNet's layout, data-parallel"};
  std::string root;
  int64_t epochs = 2, batch_size = 96;
  size_t limit = 0, val_limit = 0;
  app.add_option("--data", root, "ImageNet in Kaggle's layout")->required();
  app.add_option("--epochs", epochs, "Epochs")->capture_default_str();
  app.add_option("--batch-size", batch_size, "Images per batch and worker")->capture_default_str();
  app.add_option("--limit", limit, "Train on the first N images only");
  app.add_option("--val-limit", val_limit, "Validate on the first N images only");
  CLI11_PARSE(app, argc, argv);

  lockstep::init();
  const auto train_set = data::first_examples(data::read_imagenet(root, "train", 3), limit);
  const auto val_set = data::first_examples(data::read_imagenet(root, "val", 3), val_limit);
  // ImageNet's photos are cropped to 224 pixels; small exported images keep their size.
  const int64_t size = train_set->get(0).image.size(1) > 64 ? 224 : train_set->get(0).image.size(1);
  const auto normalize = data::normalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225});
  const auto augment = size == 224 ? data::compose({data::random_resized_crop(224), data::horizontal_flip(), normalize})
                                   : data::compose({data::random_crop(size, 2), data::horizontal_flip(), normalize});
  const auto evaluate = size == 224 ? data::compose({data::resize(256), data::center_crop(224), normalize}) : normalize;

  torch::manual_seed(0);
  auto model = train::make_model(
      "resnet34", train::ModelOptions().in_channels(3).num_classes(train_set->num_classes()).image_size(size));
  auto optimizer =
      std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  train::Trainer trainer(model, optimizer, train::cross_entropy_loss(),
                         train::TrainerOptions().epochs(epochs).lr(0.1).log_every(10));
  if (lockstep::rank() == 0) trainer.add_sink(train::console_sink(std::cout, train::interactive_console()));

  const auto sampler = data::SamplerOptions().batch_size(static_cast<size_t>(batch_size));
  data::PrefetchLoader train_loader(train_set, data::LoaderOptions().sampler(sampler).transform(augment));
  data::PrefetchLoader val_loader(
      val_set,
      data::LoaderOptions().sampler(data::SamplerOptions(sampler).shuffle(false).even(false)).transform(evaluate));
  const auto result = trainer.fit(train_loader, &val_loader);
  if (lockstep::rank() == 0 && result.validation) {
    std::cout << "resnet34: val top-1 " << 100 * result.validation->value("top1") << "%, top-5 "
              << 100 * result.validation->value("top5") << "% after " << epochs << " epochs" << std::endl;
  }
  lockstep::shutdown();
  return 0;
}
