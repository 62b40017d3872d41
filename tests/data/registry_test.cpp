// The Data.toml registry: parsing, overrides, errors naming file and line, opening every
// type, and the `lockstep datasets` command.
#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lockstep/error.h"
#include "lockstep/data/registry.h"
#include "support/tool_process.h"
#include "support/world.h"

namespace lockstep::testing {
namespace {

using data::Registry;

std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

std::string config_error_of(const std::string& text) {
  try {
    Registry::parse(text, "my/Data.toml", "/base");
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "no error";
}

TEST(Registry, ShipsFashionMnistAtTheDebianPathAndItIsReadable) {
  unsetenv("LOCKSTEP_DATA_TOML");
  unsetenv("LOCKSTEP_DATA_PATH_FASHION_MNIST");
  const Registry registry = Registry::load_default();
  const auto& entry = registry.at("fashion-mnist");
  EXPECT_EQ(entry.type, "fashion-mnist");
  EXPECT_EQ(entry.path, FASHION_MNIST_DIR);
  EXPECT_EQ(entry.channels, 1);
  EXPECT_EQ(entry.classes, 10);
  EXPECT_EQ(entry.class_names.at(9), "Ankle boot");
  EXPECT_EQ(entry.splits.at("train"), "train");
  EXPECT_EQ(entry.splits.at("test"), "t10k");
  EXPECT_EQ(data::check_readable(entry), "");
  EXPECT_EQ(data::open_dataset(entry, "test")->size(), 10000u);
}

TEST(Registry, EntriesInFileOrderWithDefaultsAndPathsRelativeToTheFile) {
  const Registry registry = Registry::parse(R"(
[zeta]
type = "image-folder"
path = "pictures"

[alpha]
type = "imagenet"
path = "/data/imagenet"
classes = 1000
splits = { train = "train" }
)",
                                            "my/Data.toml", "/base");
  ASSERT_EQ(registry.entries().size(), 2u);
  const auto& zeta = registry.entries()[0];
  EXPECT_EQ(zeta.name, "zeta");
  EXPECT_EQ(zeta.path, "/base/pictures");
  EXPECT_EQ(zeta.channels, 3);
  EXPECT_EQ(zeta.splits.at("train"), ".");
  EXPECT_EQ(zeta.defined_at, "my/Data.toml:2");
  const auto& alpha = registry.entries()[1];
  EXPECT_EQ(alpha.name, "alpha");
  EXPECT_EQ(alpha.classes, 1000);
  EXPECT_EQ(alpha.splits.size(), 1u);
}

TEST(Registry, BadEntriesNameTheFileAndLine) {
  EXPECT_TRUE(contains(config_error_of("[a]\npath = \"/x\"\n\n[b]\ntype = \"parquet\"\npath = \"/y\"\n"),
                       "my/Data.toml:1: dataset 'a' has no type"));
  const auto unknown =
      config_error_of("[a]\ntype = \"fashion-mnist\"\npath = \"/x\"\n\n[b]\ntype = \"parquet\"\npath = \"/y\"\n");
  EXPECT_TRUE(contains(unknown, "my/Data.toml:6: dataset 'b' has unknown type 'parquet'")) << unknown;
  EXPECT_TRUE(contains(unknown, "known: fashion-mnist, imagenet, image-folder, tensors")) << unknown;
  EXPECT_TRUE(contains(config_error_of("[a]\ntype = \"tensors\"\n"), "dataset 'a' has no path"));
  EXPECT_TRUE(contains(config_error_of("[a]\ntype = \"tensors\"\npath = \"/x\"\nchannels = 2\n"),
                       "my/Data.toml:4: dataset 'a' channels must be 1 or 3"));
  EXPECT_TRUE(contains(config_error_of("[a]\ntype = \"tensors\"\npath = \"/x\"\nclasses = \"ten\"\n"),
                       "my/Data.toml:4: dataset 'a' classes must be"));
  const auto syntax = config_error_of("[a]\ntype = \"tensors\"\npath = /x\n");
  EXPECT_TRUE(contains(syntax, "my/Data.toml:3: ")) << syntax;
}

TEST(Registry, EnvironmentAndExplicitOverridesReplaceThePath) {
  Registry registry = Registry::parse("[my-set]\ntype = \"tensors\"\npath = \"/old\"\n", "t.toml", "");
  setenv("LOCKSTEP_DATA_PATH_MY_SET", "/from/env", 1);
  registry.apply_environment();
  unsetenv("LOCKSTEP_DATA_PATH_MY_SET");
  EXPECT_EQ(registry.at("my-set").path, "/from/env");
  registry.override_path("my-set", "/from/flag");
  EXPECT_EQ(registry.at("my-set").path, "/from/flag");
}

TEST(Registry, UnknownNamesAndSplitsListWhatThereIs) {
  const Registry registry = Registry::parse("[one]\ntype = \"tensors\"\npath = \"/x\"\nclasses = 3\n", "t.toml", "");
  try {
    registry.at("two");
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_TRUE(contains(error.what(), "no dataset 'two' in t.toml (known: one)")) << error.what();
  }
  try {
    data::open_dataset(registry.at("one"), "validation");
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_TRUE(contains(error.what(), "has no split 'validation' (splits: test, train)")) << error.what();
  }
}

TEST(Registry, OpensTensorsFilesAndChecksTheDeclaredClasses) {
  TemporaryDirectory dir;
  const auto images = torch::arange(5 * 4 * 4, torch::kUInt8).reshape({5, 1, 4, 4});
  data::save_tensors(dir.path() + "/train.pt", images, torch::tensor({0, 1, 2, 1, 0}));
  const std::string toml = "[small]\ntype = \"tensors\"\npath = \"" + dir.path() +
                           "\"\nclasses = 3\nsplits = { train = \"train.pt\", test = \"missing.pt\" }\n";
  const Registry registry = Registry::parse(toml, "t.toml", "");
  const auto train = data::open_dataset(registry.at("small"), "train");
  ASSERT_EQ(train->size(), 5u);
  EXPECT_EQ(train->get(3).label, 1);
  EXPECT_TRUE(torch::equal(train->get(2).image, images[2]));
  const std::string problem = data::check_readable(registry.at("small"));
  EXPECT_TRUE(contains(problem, "missing.pt")) << problem;

  const Registry fewer =
      Registry::parse("[small]\ntype = \"tensors\"\npath = \"" + dir.path() + "\"\nclasses = 2\n", "t.toml", "");
  try {
    data::open_dataset(fewer.at("small"), "train");
    FAIL() << "no error";
  } catch (const DataError& error) {
    EXPECT_TRUE(contains(error.what(), "train.pt: label 2 of example #2")) << error.what();
  }
}

TEST(DatasetsCommand, ListsEveryEntryAndWhetherItIsReadable) {
  TemporaryDirectory dir;
  const std::string registry =
      write_file(dir.path() + "/Data.toml", "[fashion]\ntype = \"fashion-mnist\"\npath = \"" FASHION_MNIST_DIR
                                            "\"\n\n"
                                            "[gone]\ntype = \"image-folder\"\npath = \"no-such-folder\"\n");
  const auto run = run_process({LOCKSTEP_TOOL, "datasets", "--data-toml", registry});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "fashion  fashion-mnist  " FASHION_MNIST_DIR "  splits test,train  readable"))
      << run.output;
  EXPECT_TRUE(
      contains(run.output, "gone  image-folder  " + dir.path() + "/no-such-folder  splits train  NOT READABLE: "))
      << run.output;

  const auto overridden =
      run_process({LOCKSTEP_TOOL, "datasets", "--data-toml", registry, "--data-path", "gone=" FASHION_MNIST_DIR});
  EXPECT_TRUE(contains(overridden.output, "gone  image-folder  " FASHION_MNIST_DIR "  splits train  NOT READABLE"))
      << overridden.output;

  const auto from_environment = run_process({LOCKSTEP_TOOL, "datasets"}, {{"LOCKSTEP_DATA_TOML", registry}});
  EXPECT_TRUE(contains(from_environment.output, "datasets in " + registry)) << from_environment.output;

  const auto built_in = run_process({LOCKSTEP_TOOL, "datasets"});
  EXPECT_TRUE(
      contains(built_in.output, "fashion-mnist  fashion-mnist  " FASHION_MNIST_DIR "  splits test,train  readable"))
      << built_in.output;
}

TEST(DatasetsCommand, AnUnknownTypeEndsWithOneLineNamingFileAndLine) {
  TemporaryDirectory dir;
  const std::string registry = write_file(dir.path() + "/Data.toml", "[x]\ntype = \"hdf5\"\npath = \"/x\"\n");
  const auto run = run_process({LOCKSTEP_TOOL, "datasets", "--data-toml", registry});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_EQ(run.output, "lockstep datasets: " + registry +
                            ":2: dataset 'x' has unknown type 'hdf5' "
                            "(known: fashion-mnist, imagenet, image-folder, tensors, shards)\n");
}

}  // namespace
}  // namespace lockstep::testing
