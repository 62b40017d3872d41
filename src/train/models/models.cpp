#include "lockstep/train/models.h"

#include <string>
#include <utility>

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include "lockstep/error.h"
#include "train/models/resnet.h"

namespace lockstep::train {
namespace {

namespace nn = torch::nn;

void require_positive(int64_t value, const std::string& field, const std::string& model) {
  if (value <= 0) {
    throw ConfigError("make_model(\"" + model + "\"): ModelOptions." + field + " must be positive, got " +
                      std::to_string(value));
  }
}

nn::Sequential make_mlp(const ModelOptions& options) {
  nn::Sequential net{nn::Flatten()};
  int64_t width = options.in_channels() * options.image_size() * options.image_size();
  for (size_t i = 0; i < options.hidden().size(); ++i) {
    const int64_t hidden = options.hidden()[i];
    require_positive(hidden, "hidden[" + std::to_string(i) + "]", "mlp");
    net->push_back(nn::Linear(width, hidden));
    net->push_back(nn::ReLU());
    width = hidden;
  }
  net->push_back(nn::Linear(width, options.num_classes()));
  return net;
}

// bench/ddp_cnn's network: two 3×3 convolutions, each halving the size by a 2×2 max-pool.
nn::Sequential make_cnn(const ModelOptions& options) {
  const int64_t size = options.image_size();
  if (size % 4 != 0) {
    throw ConfigError("make_model(\"cnn\"): ModelOptions.image_size must be divisible by 4 (two 2×2 max-pools), got " +
                      std::to_string(size));
  }
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(options.in_channels(), 32, 3).padding(1)), nn::ReLU(),
                        nn::MaxPool2d(2),  //
                        nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                        nn::Flatten(),  //
                        nn::Linear(64 * (size / 4) * (size / 4), 128), nn::ReLU(),
                        nn::Linear(128, options.num_classes()));
}

using Factory = nn::Sequential (*)(const ModelOptions&);

// In the order model_names() lists them.
const std::vector<std::pair<std::string, Factory>>& factories() {
  static const std::vector<std::pair<std::string, Factory>> all{
      {"mlp", make_mlp},
      {"cnn", make_cnn},
      {"resnet18", [](const ModelOptions& options) { return make_resnet(18, options); }},
      {"resnet34", [](const ModelOptions& options) { return make_resnet(34, options); }},
      {"resnet50", [](const ModelOptions& options) { return make_resnet(50, options); }},
  };
  return all;
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

}  // namespace

torch::nn::Sequential make_model(const std::string& name, const ModelOptions& options) {
  for (const auto& [known, factory] : factories()) {
    if (known != name) continue;
    require_positive(options.in_channels(), "in_channels", name);
    require_positive(options.num_classes(), "num_classes", name);
    require_positive(options.image_size(), "image_size", name);
    return factory(options);
  }
  throw ConfigError("make_model: unknown model \"" + name + "\"; known models: " + joined(model_names()));
}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (const auto& entry : factories()) all.push_back(entry.first);
    return all;
  }();
  return names;
}

}  // namespace lockstep::train
