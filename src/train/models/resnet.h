#pragma once

// torchvision's ResNets, built as a torch::nn::Sequential so that make_model() hands out one
// container type for every architecture. Parameter names follow torchvision (conv1, bn1,
// layer1.0.conv1, layer2.0.downsample.0, fc, ...). Every module is Cloneable, so that
// model->clone() works as it does for libtorch's own modules.

#include <cstdint>
#include <vector>

#include <torch/nn/cloneable.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include "lockstep/train/models.h"

namespace lockstep::train {

/// Two 3×3 convolutions and a shortcut: the block of ResNet-18 and ResNet-34.
class BasicBlockImpl : public torch::nn::Cloneable<BasicBlockImpl> {
 public:
  static constexpr int64_t kExpansion = 1;
  /// Reads `in_planes` channels and writes `planes`; `stride` 2 halves the size.
  BasicBlockImpl(int64_t in_planes, int64_t planes, int64_t stride);
  void reset() override;
  torch::Tensor forward(torch::Tensor x);

  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  torch::nn::Conv2d conv2{nullptr};
  torch::nn::BatchNorm2d bn2{nullptr};
  /// 1×1 convolution and BatchNorm; empty where input and output shapes agree.
  torch::nn::Sequential downsample{nullptr};

 private:
  int64_t in_planes_, planes_, stride_;
};
TORCH_MODULE(BasicBlock);

/// 1×1 reduce, 3×3 (carrying the stride, as torchvision's "v1.5"), 1×1 expand by 4, and a
/// shortcut: the block of ResNet-50.
class BottleneckImpl : public torch::nn::Cloneable<BottleneckImpl> {
 public:
  static constexpr int64_t kExpansion = 4;
  /// Reads `in_planes` channels and writes 4 × `planes`; `stride` 2 halves the size.
  BottleneckImpl(int64_t in_planes, int64_t planes, int64_t stride);
  void reset() override;
  torch::Tensor forward(torch::Tensor x);

  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  torch::nn::Conv2d conv2{nullptr};
  torch::nn::BatchNorm2d bn2{nullptr};
  torch::nn::Conv2d conv3{nullptr};
  torch::nn::BatchNorm2d bn3{nullptr};
  /// 1×1 convolution and BatchNorm; empty where input and output shapes agree.
  torch::nn::Sequential downsample{nullptr};

 private:
  int64_t in_planes_, planes_, stride_;
};
TORCH_MODULE(Bottleneck);

enum class BlockKind { basic, bottleneck };

/// One of layer1..layer4: `blocks` blocks named 0, 1, ..., the first carrying the stride.
/// (A Sequential cannot hold a Sequential, whose forward() is a template, hence this module.)
class ResNetStageImpl : public torch::nn::Cloneable<ResNetStageImpl> {
 public:
  ResNetStageImpl(BlockKind kind, int64_t in_planes, int64_t planes, int64_t blocks, int64_t stride);
  void reset() override;
  torch::Tensor forward(torch::Tensor x);
  /// Channels the stage writes.
  int64_t out_planes() const;

 private:
  BlockKind kind_;
  int64_t in_planes_, planes_, blocks_, stride_;
  std::vector<torch::nn::AnyModule> block_modules_;
};
TORCH_MODULE(ResNetStage);

/// ResNet-18, -34 or -50 (`depth`) for `options`; other depths throw ConfigError.
/// options.small_input (unset: image_size ≤ 64) swaps the 7×7/2 stem and max-pool for a
/// 3×3/1 convolution.
torch::nn::Sequential make_resnet(int depth, const ModelOptions& options);

}  // namespace lockstep::train
