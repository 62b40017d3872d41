// `lockstep data export-imagenet-layout`: Fashion-MNIST written as JPEGs in ImageNet's
// Kaggle layout reads back through the ImageNet reader with the same labels and pixels.
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lockstep/error.h"
#include "lockstep/data/fashion_mnist.h"
#include "lockstep/data/imagenet.h"
#include "lockstep/data/registry.h"
#include "support/tool_process.h"
#include "support/world.h"

namespace lockstep::testing {
namespace {

std::string first_lines(const std::string& path, int n) {
  std::ifstream file(path);
  std::string line, text;
  for (int i = 0; i < n && std::getline(file, line); ++i) text += line + "\n";
  return text;
}

// JPEG at quality 95 on 28×28 gray images: small average error, a few larger at edges.
void expect_close(const torch::Tensor& decoded, const torch::Tensor& original, const std::string& what) {
  ASSERT_EQ(decoded.sizes(), original.sizes()) << what;
  const auto difference = (decoded.to(torch::kInt) - original.to(torch::kInt)).abs();
  EXPECT_LT(difference.to(torch::kFloat).mean().item<float>(), 3.0f) << what;
  EXPECT_LE(difference.max().item<int>(), 64) << what;
}

TEST(ExportImageNetLayout, RoundTripKeepsLabelsAndPixels) {
  TemporaryDirectory out;
  const auto run = run_process({LOCKSTEP_TOOL, "data", "export-imagenet-layout", "--dataset", "fashion-mnist", "--out",
                                out.path(), "--limit", "300"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "wrote 300 train and 300 val images of fashion-mnist")) << run.output;

  EXPECT_EQ(first_lines(out.path() + "/LOC_synset_mapping.txt", 2), "n00000000 T-shirt/top\nn00000001 Trouser\n");
  const auto fashion_train = data::read_fashion_mnist(FASHION_MNIST_DIR, "train");
  const auto first = fashion_train->get(0);
  const std::string synset = "n0000000" + std::to_string(first.label);
  EXPECT_EQ(first_lines(out.path() + "/LOC_train_solution.csv", 2),
            "ImageId,PredictionString\n" + synset + "_0," + synset + " 0 0 27 27\n");

  const std::pair<const char*, const char*> splits[] = {{"train", "train"}, {"val", "t10k"}};
  for (const auto& [split, prefix] : splits) {
    const auto exported = data::read_imagenet(out.path(), split, /*channels=*/1);
    const auto original = data::read_fashion_mnist(FASHION_MNIST_DIR, prefix);
    ASSERT_EQ(exported->size(), 300u) << split;
    EXPECT_EQ(exported->num_classes(), 10);
    for (size_t i = 0; i < exported->size(); ++i) {
      const auto back = exported->get(i);
      const auto sample = original->get(i);
      ASSERT_EQ(back.label, sample.label) << split << " #" << i;
      expect_close(back.image, sample.image, std::string(split) + " #" + std::to_string(i));
    }
  }

  // And through a registry entry of type imagenet, as `lockstep train` would open it.
  const auto registry = data::Registry::parse(
      "[exported]\ntype = \"imagenet\"\nchannels = 1\npath = \"" + out.path() + "\"\nclasses = 10\n", "t.toml", "");
  EXPECT_EQ(data::check_readable(registry.at("exported")), "");
  EXPECT_EQ(data::open_dataset(registry.at("exported"), "val")->size(), 300u);
}

TEST(ExportImageNetLayout, BadDestinationsAndNamesEndWithOneLine) {
  const auto unwritable = run_process(
      {LOCKSTEP_TOOL, "data", "export-imagenet-layout", "--out", "/proc/self/no-such-folder", "--limit", "1"});
  EXPECT_EQ(unwritable.exit_code, 1) << unwritable.output;
  EXPECT_TRUE(contains(unwritable.output,
                       "lockstep data export-imagenet-layout: cannot create folders under "
                       "/proc/self/no-such-folder"))
      << unwritable.output;
  EXPECT_EQ(count_lines(unwritable.output), 1u) << unwritable.output;

  TemporaryDirectory out;
  const auto unknown =
      run_process({LOCKSTEP_TOOL, "data", "export-imagenet-layout", "--dataset", "cifar", "--out", out.path()});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_TRUE(contains(unknown.output,
                       "no dataset 'cifar' in lockstep's built-in Data.toml (known: fashion-mnist, "
                       "imagenet)"))
      << unknown.output;
}

}  // namespace
}  // namespace lockstep::testing
