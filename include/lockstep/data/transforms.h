#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include <torch/types.h>

namespace lockstep::data {

/// The random source of one sample's transforms. The loader seeds it from (seed, epoch,
/// sample position), so augmentation does not depend on which thread ran it.
using Random = std::mt19937_64;

/// Turns one C×H×W image into another. Transforms accept uint8 or float images and keep
/// the type, except to_float() and normalize(); those that interpolate work in float and
/// round back to uint8. Loader threads call one transform concurrently, so it must not
/// change what it captured; it may return a view of its input, and never modifies it.
using Transform = std::function<torch::Tensor(torch::Tensor image, Random& random)>;

/// Applies transforms in order.
Transform compose(std::vector<Transform> transforms);

/// uint8 [0, 255] to float [0, 1]; float images pass unchanged.
Transform to_float();
/// (x - mean) / std per channel, after to_float(). One value applies to every channel.
Transform normalize(std::vector<double> mean, std::vector<double> std);
/// Pads every side with `padding` zeros, then crops a random size×size window.
Transform random_crop(int64_t size, int64_t padding = 0);
/// Mirrors left-right with probability p.
Transform horizontal_flip(double p = 0.5);
/// Crops a random area (fraction `scale` of the image, aspect ratio in `ratio`) and resizes
/// it to size×size, as torchvision's RandomResizedCrop.
Transform random_resized_crop(int64_t size, std::pair<double, double> scale = {0.08, 1.0},
                              std::pair<double, double> ratio = {3.0 / 4.0, 4.0 / 3.0});
/// Resizes (bilinear) so the shorter side is `size`, keeping the aspect ratio.
Transform resize(int64_t size);
/// Resizes (bilinear) to exactly height×width.
Transform resize(int64_t height, int64_t width);
/// Crops the central size×size window (padding with zeros if the image is smaller).
Transform center_crop(int64_t size);

}  // namespace lockstep::data
