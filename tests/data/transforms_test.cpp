#include "lockstep/data/transforms.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lockstep/error.h"

namespace lockstep::data {
namespace {

// A 1×H×W float image holding 0, 1, 2, ... row by row.
torch::Tensor counting_image(int64_t height, int64_t width) {
  return torch::arange(height * width, torch::kFloat).view({1, height, width});
}

torch::Tensor run(const Transform& transform, const torch::Tensor& image, uint64_t seed = 0) {
  Random random(seed);
  return transform(image, random);
}

template <typename Body>
void expect_error(Body body, const std::string& needle) {
  try {
    body();
    ADD_FAILURE() << "expected a lockstep::Error naming '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Transforms, ToFloatScalesBytesAndKeepsFloats) {
  const torch::Tensor bytes = torch::tensor({0, 51, 255}, torch::kByte).view({1, 1, 3});
  const torch::Tensor floats = run(to_float(), bytes);
  EXPECT_EQ(floats.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::allclose(floats, torch::tensor({0.0f, 0.2f, 1.0f}).view({1, 1, 3})));
  const torch::Tensor already = counting_image(2, 2);
  EXPECT_TRUE(run(to_float(), already).is_same(already));
}

TEST(Transforms, NormalizeSubtractsAndDividesPerChannel) {
  const torch::Tensor image = torch::tensor({0, 255, 51, 102}, torch::kByte).view({2, 1, 2});
  const torch::Tensor out = run(normalize({0.5, 0.2}, {0.5, 0.1}), image);
  const torch::Tensor expected = torch::tensor({-1.0f, 1.0f, 0.0f, 2.0f}).view({2, 1, 2});
  EXPECT_TRUE(torch::allclose(out, expected, 1e-5, 1e-5)) << out;

  const torch::Tensor floats = counting_image(2, 2);
  const torch::Tensor one_value = run(normalize({1.0}, {2.0}), floats);
  EXPECT_TRUE(torch::allclose(one_value, (floats - 1) / 2));
  EXPECT_TRUE(torch::equal(floats, counting_image(2, 2))) << "input changed in place";
}

TEST(Transforms, NormalizeRejectsMismatchedSizes) {
  expect_error([] { normalize({0.5, 0.5, 0.5}, {0.2, 0.2}); }, "mean has 3 values and std 2");
  expect_error([] { normalize({0.5}, {0.0}); }, "std[0] is 0");
  const Transform two_channels = normalize({0.5, 0.5}, {0.2, 0.2});
  expect_error(
      [&] {
        run(two_channels, torch::zeros({3, 2, 2}));
      },
      "mean and std have 2 values but the image has 3 channels");
}

TEST(Transforms, CenterCropTakesTheMiddleAndPadsSmallImages) {
  const torch::Tensor middle = run(center_crop(2), counting_image(4, 4));
  EXPECT_TRUE(torch::equal(middle, torch::tensor({5.0f, 6.0f, 9.0f, 10.0f}).view({1, 2, 2})));

  const torch::Tensor padded = run(center_crop(4), counting_image(2, 2));
  torch::Tensor expected = torch::zeros({1, 4, 4});
  expected.narrow(1, 1, 2).narrow(2, 1, 2).copy_(counting_image(2, 2));
  EXPECT_TRUE(torch::equal(padded, expected)) << padded;

  const torch::Tensor bytes = torch::ones({3, 5, 5}, torch::kByte);
  EXPECT_EQ(run(center_crop(3), bytes).scalar_type(), torch::kByte);
}

TEST(Transforms, ResizeIsBilinearWithoutAlignedCorners) {
  const torch::Tensor image = torch::tensor({0.0f, 1.0f, 2.0f, 3.0f}).view({1, 2, 2});
  const torch::Tensor expected = torch::tensor({0.0f, 0.25f, 0.75f, 1.0f,  //
                                                0.5f, 0.75f, 1.25f, 1.5f,  //
                                                1.5f, 1.75f, 2.25f, 2.5f,  //
                                                2.0f, 2.25f, 2.75f, 3.0f})
                                     .view({1, 4, 4});
  const torch::Tensor out = run(resize(4, 4), image);
  EXPECT_EQ(out.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::allclose(out, expected)) << out;

  // uint8 in, uint8 out: the float result rounded (half to even) and clamped.
  const torch::Tensor bytes = run(resize(4, 4), (image * 10).to(torch::kByte));
  EXPECT_EQ(bytes.scalar_type(), torch::kByte);
  EXPECT_TRUE(torch::equal(bytes, (expected * 10).round().to(torch::kByte))) << bytes;
}

TEST(Transforms, ResizeToShorterSideKeepsAspectRatio) {
  EXPECT_EQ(run(resize(2), torch::zeros({3, 4, 9})).sizes(), torch::IntArrayRef({3, 2, 4}));
  EXPECT_EQ(run(resize(2), torch::zeros({1, 9, 4})).sizes(), torch::IntArrayRef({1, 4, 2}));
  const torch::Tensor same = counting_image(2, 5);
  EXPECT_TRUE(torch::equal(run(resize(2), same), same));
}

TEST(Transforms, HorizontalFlipFollowsItsProbability) {
  const torch::Tensor image = counting_image(2, 3);
  const torch::Tensor mirrored = torch::tensor({2.0f, 1.0f, 0.0f, 5.0f, 4.0f, 3.0f}).view({1, 2, 3});
  EXPECT_TRUE(torch::equal(run(horizontal_flip(1.0), image), mirrored));
  EXPECT_TRUE(torch::equal(run(horizontal_flip(0.0), image), image));
  int flipped = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    flipped += torch::equal(run(horizontal_flip(0.5), image, seed), mirrored);
  }
  EXPECT_GT(flipped, 60);
  EXPECT_LT(flipped, 140);
}

TEST(Transforms, RandomCropTakesAPaddedWindowReproducibly) {
  const torch::Tensor image = counting_image(3, 3) + 1;
  const torch::Tensor padded = torch::constant_pad_nd(image, {1, 1, 1, 1}, 0);
  const Transform crop = random_crop(3, 1);
  std::vector<bool> windows_seen(9, false);
  for (uint64_t seed = 0; seed < 100; ++seed) {
    const torch::Tensor out = run(crop, image, seed);
    EXPECT_TRUE(torch::equal(out, run(crop, image, seed))) << "seed " << seed;
    bool matched = false;
    for (int64_t top = 0; top < 3; ++top) {
      for (int64_t left = 0; left < 3; ++left) {
        if (torch::equal(out, padded.narrow(1, top, 3).narrow(2, left, 3))) {
          matched = windows_seen[top * 3 + left] = true;
        }
      }
    }
    EXPECT_TRUE(matched) << "seed " << seed << " gave " << out;
  }
  for (int w = 0; w < 9; ++w) EXPECT_TRUE(windows_seen[w]) << "window " << w << " never drawn";
  EXPECT_TRUE(torch::equal(run(random_crop(3), image), image));
  expect_error([&] { run(random_crop(6, 1), image); }, "size 6 is larger than the image");
}

TEST(Transforms, RandomResizedCropGivesSizeAndKeepsDtype) {
  const torch::Tensor bytes = torch::randint(0, 256, {3, 20, 30}, torch::kByte);
  const Transform crop = random_resized_crop(8);
  const torch::Tensor out = run(crop, bytes, 4);
  EXPECT_EQ(out.sizes(), torch::IntArrayRef({3, 8, 8}));
  EXPECT_EQ(out.scalar_type(), torch::kByte);
  EXPECT_TRUE(torch::equal(out, run(crop, bytes, 4)));
  EXPECT_FALSE(torch::equal(out, run(crop, bytes, 5)));
  const torch::Tensor floats = run(crop, bytes.to(torch::kFloat), 4);
  EXPECT_EQ(floats.scalar_type(), torch::kFloat);
  EXPECT_EQ(floats.sizes(), torch::IntArrayRef({3, 8, 8}));
  // Scale and ratio that no crop can meet fall back to the central crop.
  const Transform impossible = random_resized_crop(4, {1.0, 1.0}, {3.0, 3.0});
  EXPECT_EQ(run(impossible, bytes).sizes(), torch::IntArrayRef({3, 4, 4}));
  expect_error([] { random_resized_crop(8, {0.5, 0.1}); }, "scale");
}

TEST(Transforms, ComposeAppliesInOrder) {
  const Transform both = compose({center_crop(2), normalize({5.0}, {2.0})});
  const torch::Tensor expected = (torch::tensor({5.0f, 6.0f, 9.0f, 10.0f}) - 5) / 2;
  EXPECT_TRUE(torch::allclose(run(both, counting_image(4, 4)), expected.view({1, 2, 2})));
  expect_error([] { compose({to_float(), Transform()}); }, "transform #1 is empty");
}

// Fashion-MNIST-sized images must transform far faster than training consumes them
// (the brief: well over 2000 images/s per loader thread, read and decode included).
}  // namespace
}  // namespace lockstep::data
