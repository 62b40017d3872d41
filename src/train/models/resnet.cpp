#include "train/models/resnet.h"

#include <array>
#include <string>

#include <torch/nn/init.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include "lockstep/error.h"

namespace lockstep::train {
namespace {

namespace nn = torch::nn;

// Every ResNet convolution: bias-free (a BatchNorm follows) and padded to keep the size at stride 1.
nn::Conv2d conv(int64_t in_planes, int64_t out_planes, int64_t kernel, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in_planes, out_planes, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// The 1×1 convolution and BatchNorm that bring a block's input to its output's shape; empty
// where the shapes already agree.
nn::Sequential shortcut(int64_t in_planes, int64_t out_planes, int64_t stride) {
  if (stride == 1 && in_planes == out_planes) return nn::Sequential(nullptr);
  return nn::Sequential(conv(in_planes, out_planes, 1, stride), nn::BatchNorm2d(out_planes));
}

int64_t expansion(BlockKind kind) {
  return kind == BlockKind::basic ? BasicBlockImpl::kExpansion : BottleneckImpl::kExpansion;
}

// torchvision's initialisation; libtorch's defaults differ for convolutions (kaiming_uniform, a=√5).
void initialise_like_torchvision(nn::Module& net) {
  for (const auto& module : net.modules(/*include_self=*/false)) {
    if (auto* convolution = module->as<nn::Conv2d>()) {
      nn::init::kaiming_normal_(convolution->weight, 0.0, torch::kFanOut, torch::kReLU);
    } else if (auto* norm = module->as<nn::BatchNorm2d>()) {
      nn::init::ones_(norm->weight);
      nn::init::zeros_(norm->bias);
    }
  }
}

nn::Sequential make_resnet_of(BlockKind kind, const std::array<int64_t, 4>& blocks_per_stage,
                              const ModelOptions& options) {
  const bool small_input = options.small_input().value_or(options.image_size() <= 64);
  nn::Sequential net;
  net->push_back("conv1", small_input ? conv(options.in_channels(), 64, 3, 1) : conv(options.in_channels(), 64, 7, 2));
  net->push_back("bn1", nn::BatchNorm2d(64));
  net->push_back("relu", nn::ReLU());
  if (!small_input) net->push_back("maxpool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
  int64_t in_planes = 64;
  const std::array<int64_t, 4> planes{64, 128, 256, 512};
  for (size_t i = 0; i < planes.size(); ++i) {
    const int64_t stride = i == 0 ? 1 : 2;
    ResNetStage stage(kind, in_planes, planes[i], blocks_per_stage[i], stride);
    in_planes = stage->out_planes();
    net->push_back("layer" + std::to_string(i + 1), stage);
  }
  net->push_back("avgpool", nn::AdaptiveAvgPool2d(1));
  net->push_back("flatten", nn::Flatten());
  net->push_back("fc", nn::Linear(in_planes, options.num_classes()));
  initialise_like_torchvision(*net);
  return net;
}

}  // namespace

BasicBlockImpl::BasicBlockImpl(int64_t in_planes, int64_t planes, int64_t stride)
    : in_planes_(in_planes), planes_(planes), stride_(stride) {
  reset();
}

void BasicBlockImpl::reset() {
  // Registered in torchvision's order, so that parameters() lists them as it does.
  conv1 = register_module("conv1", conv(in_planes_, planes_, 3, stride_));
  bn1 = register_module("bn1", nn::BatchNorm2d(planes_));
  conv2 = register_module("conv2", conv(planes_, planes_, 3, 1));
  bn2 = register_module("bn2", nn::BatchNorm2d(planes_));
  downsample = shortcut(in_planes_, planes_ * kExpansion, stride_);
  if (downsample) register_module("downsample", downsample);
}

torch::Tensor BasicBlockImpl::forward(torch::Tensor x) {
  auto out = bn1(conv1(x)).relu_();
  out = bn2(conv2(out));
  out += downsample ? downsample->forward(x) : x;
  return out.relu_();
}

BottleneckImpl::BottleneckImpl(int64_t in_planes, int64_t planes, int64_t stride)
    : in_planes_(in_planes), planes_(planes), stride_(stride) {
  reset();
}

void BottleneckImpl::reset() {
  conv1 = register_module("conv1", conv(in_planes_, planes_, 1, 1));
  bn1 = register_module("bn1", nn::BatchNorm2d(planes_));
  conv2 = register_module("conv2", conv(planes_, planes_, 3, stride_));
  bn2 = register_module("bn2", nn::BatchNorm2d(planes_));
  conv3 = register_module("conv3", conv(planes_, planes_ * kExpansion, 1, 1));
  bn3 = register_module("bn3", nn::BatchNorm2d(planes_ * kExpansion));
  downsample = shortcut(in_planes_, planes_ * kExpansion, stride_);
  if (downsample) register_module("downsample", downsample);
}

torch::Tensor BottleneckImpl::forward(torch::Tensor x) {
  auto out = bn1(conv1(x)).relu_();
  out = bn2(conv2(out)).relu_();
  out = bn3(conv3(out));
  out += downsample ? downsample->forward(x) : x;
  return out.relu_();
}

ResNetStageImpl::ResNetStageImpl(BlockKind kind, int64_t in_planes, int64_t planes, int64_t blocks, int64_t stride)
    : kind_(kind), in_planes_(in_planes), planes_(planes), blocks_(blocks), stride_(stride) {
  reset();
}

void ResNetStageImpl::reset() {
  block_modules_.clear();
  int64_t in_planes = in_planes_;
  for (int64_t i = 0; i < blocks_; ++i) {
    const int64_t stride = i == 0 ? stride_ : 1;
    auto block = kind_ == BlockKind::basic ? nn::AnyModule(BasicBlock(in_planes, planes_, stride))
                                           : nn::AnyModule(Bottleneck(in_planes, planes_, stride));
    register_module(std::to_string(i), block.ptr());
    block_modules_.push_back(std::move(block));
    in_planes = out_planes();
  }
}

torch::Tensor ResNetStageImpl::forward(torch::Tensor x) {
  for (auto& block : block_modules_) x = block.forward(x);
  return x;
}

int64_t ResNetStageImpl::out_planes() const { return planes_ * expansion(kind_); }

torch::nn::Sequential make_resnet(int depth, const ModelOptions& options) {
  switch (depth) {
    case 18: return make_resnet_of(BlockKind::basic, {2, 2, 2, 2}, options);
    case 34: return make_resnet_of(BlockKind::basic, {3, 4, 6, 3}, options);
    case 50: return make_resnet_of(BlockKind::bottleneck, {3, 4, 6, 3}, options);
    default: throw ConfigError("make_resnet: no ResNet-" + std::to_string(depth) + "; known depths: 18, 34, 50");
  }
}

}  // namespace lockstep::train
