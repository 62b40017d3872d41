#include "lockstep/data/transforms.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <torch/nn/functional/upsampling.h>

#include "data/pipeline/portable_random.h"
#include "lockstep/error.h"

// Transforms run in loader threads with few, whole-image ops: on small images each op stays
// below ATen's parallel grain size and so on one thread (at::set_num_threads() would be
// process-wide, so it is left alone). They never modify their input in place, since a
// dataset may hand out views of its own storage.
namespace lockstep::data {
namespace {

void check_image(const torch::Tensor& image, const char* transform) {
  if (image.dim() != 3) {
    throw Error(std::string(transform) + ": expected a C×H×W image, got shape " + c10::str(image.sizes()));
  }
}

void check_positive(int64_t value, const char* transform, const char* name) {
  if (value < 1) {
    throw Error(std::string(transform) + ": " + name + " " + std::to_string(value) + " must be at least 1");
  }
}

// Python's round() (half to even), as torchvision uses for crop sizes and offsets.
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

// An integer in [low, high], by the portable draw (see portable_random.h).
int64_t draw_int(Random& random, int64_t low, int64_t high) {
  return low + static_cast<int64_t>(draw_below(random, static_cast<uint64_t>(high - low + 1)));
}

torch::Tensor as_float(const torch::Tensor& image) {
  if (image.scalar_type() == torch::kByte) return image.to(torch::kFloat).div_(255);
  if (!image.is_floating_point()) {
    throw Error("to_float: expected a uint8 or floating-point image, got " +
                std::string(c10::toString(image.scalar_type())));
  }
  return image;
}

// The height×width window of `image` at (top, left); parts outside the image are zeros.
// A window inside the image is a view, without a copy.
torch::Tensor crop_with_zeros(const torch::Tensor& image, int64_t top, int64_t left, int64_t height, int64_t width) {
  const int64_t image_height = image.size(1), image_width = image.size(2);
  if (top >= 0 && left >= 0 && top + height <= image_height && left + width <= image_width) {
    return image.narrow(1, top, height).narrow(2, left, width);
  }
  torch::Tensor window = torch::zeros({image.size(0), height, width}, image.options());
  const int64_t row_begin = std::max<int64_t>(top, 0);
  const int64_t row_end = std::min(top + height, image_height);
  const int64_t col_begin = std::max<int64_t>(left, 0);
  const int64_t col_end = std::min(left + width, image_width);
  if (row_begin < row_end && col_begin < col_end) {
    window.narrow(1, row_begin - top, row_end - row_begin)
        .narrow(2, col_begin - left, col_end - col_begin)
        .copy_(image.narrow(1, row_begin, row_end - row_begin).narrow(2, col_begin, col_end - col_begin));
  }
  return window;
}

// Bilinear (align_corners=false) resize to height×width in float; uint8 comes back as
// uint8, rounded and clamped.
torch::Tensor resize_to(const torch::Tensor& image, int64_t height, int64_t width) {
  if (image.size(1) == height && image.size(2) == width) return image;
  const bool bytes = image.scalar_type() == torch::kByte;
  torch::Tensor batch = (bytes ? image.to(torch::kFloat) : image).unsqueeze(0);
  namespace F = torch::nn::functional;
  torch::Tensor resized = F::interpolate(batch, F::InterpolateFuncOptions()
                                                    .size(std::vector<int64_t>{height, width})
                                                    .mode(torch::kBilinear)
                                                    .align_corners(false))
                              .squeeze(0);
  if (bytes) return resized.round_().clamp_(0, 255).to(torch::kByte);
  return resized;
}

}  // namespace

Transform compose(std::vector<Transform> transforms) {
  for (size_t i = 0; i < transforms.size(); ++i) {
    if (!transforms[i]) throw Error("compose: transform #" + std::to_string(i) + " is empty");
  }
  return [transforms = std::move(transforms)](torch::Tensor image, Random& random) {
    for (const Transform& transform : transforms) image = transform(std::move(image), random);
    return image;
  };
}

Transform to_float() {
  return [](torch::Tensor image, Random&) { return as_float(image); };
}

Transform normalize(std::vector<double> mean, std::vector<double> std) {
  if (mean.empty() || mean.size() != std.size()) {
    throw Error("normalize: mean has " + std::to_string(mean.size()) + " values and std " + std::to_string(std.size()) +
                "; give one value per channel (or one for all), the same number for both");
  }
  for (size_t c = 0; c < std.size(); ++c) {
    if (std[c] == 0) throw Error("normalize: std[" + std::to_string(c) + "] is 0");
  }
  // Per-channel values as C×1×1 tensors, built once; one value stays a scalar.
  const int64_t channels = static_cast<int64_t>(mean.size());
  torch::Tensor mean_t = torch::tensor(mean, torch::kFloat).view({channels, 1, 1});
  torch::Tensor std_t = torch::tensor(std, torch::kFloat).view({channels, 1, 1});
  return [mean, std, mean_t, std_t](torch::Tensor image, Random&) {
    check_image(image, "normalize");
    const bool converted = image.scalar_type() == torch::kByte;
    torch::Tensor x = as_float(image);
    if (mean.size() == 1) {
      return converted ? x.sub_(mean[0]).div_(std[0]) : x.sub(mean[0]).div_(std[0]);
    }
    if (static_cast<int64_t>(mean.size()) != image.size(0)) {
      throw Error("normalize: mean and std have " + std::to_string(mean.size()) + " values but the image has " +
                  std::to_string(image.size(0)) + " channels (shape " + c10::str(image.sizes()) + ")");
    }
    const torch::Tensor m = mean_t.to(x.scalar_type()), s = std_t.to(x.scalar_type());
    return converted ? x.sub_(m).div_(s) : x.sub(m).div_(s);
  };
}

Transform random_crop(int64_t size, int64_t padding) {
  check_positive(size, "random_crop", "size");
  if (padding < 0) throw Error("random_crop: padding " + std::to_string(padding) + " is negative");
  return [size, padding](torch::Tensor image, Random& random) {
    check_image(image, "random_crop");
    const int64_t padded_height = image.size(1) + 2 * padding;
    const int64_t padded_width = image.size(2) + 2 * padding;
    if (size > padded_height || size > padded_width) {
      throw Error("random_crop: size " + std::to_string(size) + " is larger than the image " + c10::str(image.sizes()) +
                  " padded by " + std::to_string(padding));
    }
    // Offsets in the padded image, drawn top then left as torchvision does.
    const int64_t top = draw_int(random, 0, padded_height - size);
    const int64_t left = draw_int(random, 0, padded_width - size);
    return crop_with_zeros(image, top - padding, left - padding, size, size);
  };
}

Transform horizontal_flip(double p) {
  return [p](torch::Tensor image, Random& random) {
    check_image(image, "horizontal_flip");
    // Always draw, so the transforms after this one see the same random stream either way.
    const bool flip = draw_unit(random) < p;
    return flip ? image.flip({2}) : image;
  };
}

Transform random_resized_crop(int64_t size, std::pair<double, double> scale, std::pair<double, double> ratio) {
  check_positive(size, "random_resized_crop", "size");
  if (!(scale.first > 0 && scale.first <= scale.second)) {
    throw Error("random_resized_crop: scale (" + std::to_string(scale.first) + ", " + std::to_string(scale.second) +
                ") must satisfy 0 < low <= high");
  }
  if (!(ratio.first > 0 && ratio.first <= ratio.second)) {
    throw Error("random_resized_crop: ratio (" + std::to_string(ratio.first) + ", " + std::to_string(ratio.second) +
                ") must satisfy 0 < low <= high");
  }
  return [size, scale, ratio](torch::Tensor image, Random& random) {
    check_image(image, "random_resized_crop");
    const int64_t height = image.size(1), width = image.size(2);
    const double area = static_cast<double>(height * width);
    const double log_low = std::log(ratio.first), log_high = std::log(ratio.second);
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double target_area = area * draw_between(random, scale.first, scale.second);
      const double aspect = std::exp(draw_between(random, log_low, log_high));
      const int64_t w = round_half_even(std::sqrt(target_area * aspect));
      const int64_t h = round_half_even(std::sqrt(target_area / aspect));
      if (0 < w && w <= width && 0 < h && h <= height) {
        const int64_t top = draw_int(random, 0, height - h);
        const int64_t left = draw_int(random, 0, width - w);
        return resize_to(crop_with_zeros(image, top, left, h, w), size, size);
      }
    }
    // Fallback: the central crop whose aspect ratio is the closest allowed one.
    int64_t h = height, w = width;
    const double image_ratio = static_cast<double>(width) / static_cast<double>(height);
    if (image_ratio < ratio.first) {
      h = round_half_even(static_cast<double>(width) / ratio.first);
    } else if (image_ratio > ratio.second) {
      w = round_half_even(static_cast<double>(height) * ratio.second);
    }
    return resize_to(crop_with_zeros(image, (height - h) / 2, (width - w) / 2, h, w), size, size);
  };
}

Transform resize(int64_t size) {
  check_positive(size, "resize", "size");
  return [size](torch::Tensor image, Random&) {
    check_image(image, "resize");
    const int64_t height = image.size(1), width = image.size(2);
    // As torchvision: the longer side is truncated, not rounded.
    if (height <= width) return resize_to(image, size, size * width / height);
    return resize_to(image, size * height / width, size);
  };
}

Transform resize(int64_t height, int64_t width) {
  check_positive(height, "resize", "height");
  check_positive(width, "resize", "width");
  return [height, width](torch::Tensor image, Random&) {
    check_image(image, "resize");
    return resize_to(image, height, width);
  };
}

Transform center_crop(int64_t size) {
  check_positive(size, "center_crop", "size");
  return [size](torch::Tensor image, Random&) {
    check_image(image, "center_crop");
    // torchvision pads a smaller image by floor((size - side) / 2) before, and rounds the
    // offset of a larger one half to even.
    auto offset = [size](int64_t side) {
      return side >= size ? round_half_even(static_cast<double>(side - size) / 2.0) : -((size - side) / 2);
    };
    return crop_with_zeros(image, offset(image.size(1)), offset(image.size(2)), size, size);
  };
}

}  // namespace lockstep::data
