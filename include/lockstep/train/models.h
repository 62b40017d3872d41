#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/arg.h>
#include <torch/nn/modules/container/sequential.h>

namespace lockstep::train {

/// The shape of what a model reads and predicts.
struct ModelOptions {
  TORCH_ARG(int64_t, in_channels) = 3;
  TORCH_ARG(int64_t, num_classes) = 1000;
  /// Height and width of the input images (the MLP's input size; the CNN wants a multiple of 4).
  TORCH_ARG(int64_t, image_size) = 224;
  /// ResNets: a 3×3 stride-1 first convolution and no max-pool, for 28×28 and 32×32 images
  /// (torchvision's 7×7 stride-2 stem and max-pool shrink those to almost nothing).
  /// Unset: on when image_size ≤ 64.
  TORCH_ARG(std::optional<bool>, small_input);
  /// MLP: widths of the hidden layers.
  TORCH_ARG(std::vector<int64_t>, hidden) = std::vector<int64_t>{256, 128};
};

/// The models `lockstep train --model NAME` knows: "mlp", "cnn" (the two-convolution network
/// of bench/ddp_cnn, after TensorFlow's Fashion-MNIST tutorial), "resnet18", "resnet34",
/// "resnet50" (torchvision's architecture). Each maps N×C×H×W images to N×classes logits.
/// ResNets name their parameters as torchvision does (conv1.weight, layer1.0.bn1.bias, fc.weight;
/// Sequential::clone() renumbers the top level), mlp and cnn number them as Sequential does.
/// An unknown name or a bad option (a size ≤ 0; cnn: image_size not divisible by 4) throws
/// ConfigError naming it and, for names, listing the known ones.
torch::nn::Sequential make_model(const std::string& name, const ModelOptions& options = ModelOptions());

/// The names make_model() accepts.
const std::vector<std::string>& model_names();

}  // namespace lockstep::train
