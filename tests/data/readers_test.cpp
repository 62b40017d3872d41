// The data readers: IDX, Fashion-MNIST, JPEG, image folders, ImageNet's Kaggle layout and
// tensors files, with the errors bad input must give.
#include <zlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lockstep/error.h"
#include "lockstep/data/fashion_mnist.h"
#include "lockstep/data/idx.h"
#include "lockstep/data/imagenet.h"
#include "lockstep/data/jpeg.h"
#include "support/expected_errors.h"
#include "support/world.h"

namespace lockstep::data {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;
using lockstep::testing::fresh_directory;

const std::string kFashion = FASHION_MNIST_DIR;

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// Inflates a .gz with zlib directly, independently of read_idx.
Bytes gunzip(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  Bytes bytes;
  unsigned char chunk[1 << 16];
  for (int got; (got = gzread(file, chunk, sizeof chunk)) > 0;) bytes.insert(bytes.end(), chunk, chunk + got);
  gzclose(file);
  return bytes;
}

using lockstep::testing::data_error;

::testing::AssertionResult mentions(const std::string& message, const std::string& part) {
  if (message.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << message << "\" does not mention \"" << part << "\"";
}

// An IDX header: magic 00 00 <type> <dims>, then each dimension big-endian.
Bytes idx_header(uint8_t type, const std::vector<uint32_t>& dims) {
  Bytes bytes = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) bytes.insert(bytes.end(), {uint8_t(d >> 24), uint8_t(d >> 16), uint8_t(d >> 8), uint8_t(d)});
  return bytes;
}

Bytes concat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A smooth RGB test picture: red rises left to right, green top to bottom, blue constant.
torch::Tensor gradient_image(int64_t height, int64_t width) {
  const auto x = torch::linspace(0, 255, width).expand({height, width});
  const auto y = torch::linspace(0, 255, height).unsqueeze(1).expand({height, width});
  return torch::stack({x, y, torch::full({height, width}, 200.0)}).round().to(torch::kUInt8);
}

void expect_close_pixels(const torch::Tensor& decoded, const torch::Tensor& original) {
  ASSERT_EQ(decoded.sizes(), original.sizes());
  const auto diff = (decoded.to(torch::kInt) - original.to(torch::kInt)).abs();
  EXPECT_LT(diff.to(torch::kFloat).mean().item<float>(), 3.0f);
  EXPECT_LT(diff.max().item<int>(), 40);
}

Bytes a_jpeg() { return encode_jpeg(gradient_image(64, 64)); }

TEST(FashionMnist, TrainHas60000ExamplesWith6000PerClass) {
  const auto train = read_fashion_mnist(kFashion, "train");
  ASSERT_EQ(train->size(), 60000u);
  EXPECT_EQ(train->num_classes(), 10);
  EXPECT_TRUE(torch::equal(torch::bincount(train->labels(), {}, 10), torch::full({10}, 6000, torch::kLong)));
  const Sample sample = train->get(59999);
  EXPECT_EQ(sample.image.sizes(), (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(sample.image.scalar_type(), torch::kUInt8);
}

TEST(FashionMnist, TestHas10000ExamplesWith1000PerClass) {
  const auto test = read_fashion_mnist(kFashion, "t10k");
  ASSERT_EQ(test->size(), 10000u);
  EXPECT_TRUE(torch::equal(torch::bincount(test->labels(), {}, 10), torch::full({10}, 1000, torch::kLong)));
  EXPECT_EQ(test->get(0).image.sizes(), (std::vector<int64_t>{1, 28, 28}));
}

TEST(FashionMnist, PixelsAndLabelsMatchTheRawFiles) {
  const auto train = read_fashion_mnist(kFashion, "train");
  const Bytes images = gunzip(kFashion + "/train-images-idx3-ubyte.gz");
  const Bytes labels = gunzip(kFashion + "/train-labels-idx1-ubyte.gz");
  ASSERT_EQ(images.size(), 16u + 60000u * 784u);
  ASSERT_EQ(labels.size(), 8u + 60000u);
  for (size_t i : {size_t{0}, size_t{1234}, size_t{59999}}) {
    const Sample sample = train->get(i);
    const Bytes expected(images.begin() + 16 + i * 784, images.begin() + 16 + (i + 1) * 784);
    const auto* pixels = sample.image.contiguous().data_ptr<uint8_t>();
    EXPECT_EQ(Bytes(pixels, pixels + 784), expected) << "image " << i;
    EXPECT_EQ(sample.label, int64_t{labels[8 + i]}) << "label " << i;
  }
}

TEST(FashionMnist, ClassNamesInLabelOrder) {
  EXPECT_EQ(fashion_mnist_classes(), (std::vector<std::string>{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                               "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"}));
}

TEST(FashionMnist, ReadsUncompressedFilesAndNamesBothOnACountMismatch) {
  const std::string dir = fresh_directory();
  write_bytes(dir + "/tiny-images-idx3-ubyte", concat(idx_header(0x08, {3, 28, 28}), Bytes(3 * 784, 7)));
  write_bytes(dir + "/tiny-labels-idx1-ubyte", concat(idx_header(0x08, {3}), Bytes{9, 0, 4}));
  const auto tiny = read_fashion_mnist(dir, "tiny");
  ASSERT_EQ(tiny->size(), 3u);
  EXPECT_EQ(tiny->get(2).label, 4);
  EXPECT_EQ(tiny->get(2).image.sum().item<int64_t>(), 7 * 784);

  write_bytes(dir + "/tiny-labels-idx1-ubyte", concat(idx_header(0x08, {2}), Bytes{9, 0}));
  const std::string message = data_error([&] { read_fashion_mnist(dir, "tiny"); });
  EXPECT_TRUE(mentions(message, dir + "/tiny-images-idx3-ubyte"));
  EXPECT_TRUE(mentions(message, dir + "/tiny-labels-idx1-ubyte"));
}

TEST(Idx, ReadsRawUint8) {
  const std::string path = fresh_directory() + "/bytes.idx";
  write_bytes(path, concat(idx_header(0x08, {2, 3}), Bytes{0, 1, 2, 253, 254, 255}));
  const torch::Tensor tensor = read_idx(path);
  EXPECT_EQ(tensor.scalar_type(), torch::kUInt8);
  EXPECT_TRUE(torch::equal(tensor, torch::tensor({0, 1, 2, 253, 254, 255}, torch::kUInt8).view({2, 3})));
}

TEST(Idx, ReadsRawBigEndianInt32AndFloat32) {
  const std::string dir = fresh_directory();
  write_bytes(dir + "/ints.idx", concat(idx_header(0x0C, {3}), Bytes{0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFE, 1, 2, 3, 4}));
  const torch::Tensor ints = read_idx(dir + "/ints.idx");
  EXPECT_EQ(ints.scalar_type(), torch::kInt);
  EXPECT_TRUE(torch::equal(ints, torch::tensor({1, -2, 0x01020304}, torch::kInt)));
  write_bytes(dir + "/floats.idx", concat(idx_header(0x0D, {1}), Bytes{0x3F, 0xC0, 0, 0}));
  EXPECT_EQ(read_idx(dir + "/floats.idx").item<float>(), 1.5f);
}

TEST(Idx, GzipRoundTripDetectedByContentNotName) {
  const Bytes raw = concat(idx_header(0x0B, {2, 2}), Bytes{0, 1, 0x80, 0, 0x12, 0x34, 0xFF, 0xFF});
  const std::string path = fresh_directory() + "/shorts.idx";  // no .gz: the magic bytes tell
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_EQ(gzwrite(file, raw.data(), raw.size()), static_cast<int>(raw.size()));
  gzclose(file);
  EXPECT_NE(read_bytes(path), raw);
  const torch::Tensor shorts = read_idx(path);
  EXPECT_TRUE(torch::equal(shorts, torch::tensor({1, -32768, 0x1234, -1}, torch::kShort).view({2, 2})));
}

TEST(Idx, MissingFileIsNamed) {
  const std::string path = fresh_directory() + "/absent-idx3-ubyte.gz";
  EXPECT_TRUE(mentions(data_error([&] { read_idx(path); }), path));
}

TEST(Idx, TruncatedGzipStreamIsNamed) {
  Bytes gz = read_bytes(kFashion + "/t10k-labels-idx1-ubyte.gz");
  gz.resize(gz.size() / 2);
  const std::string path = fresh_directory() + "/cut.gz";
  write_bytes(path, gz);
  const std::string message = data_error([&] { read_idx(path); });
  EXPECT_TRUE(mentions(message, path));
  EXPECT_TRUE(mentions(message, "truncated"));
}

TEST(Idx, CorruptGzipStreamIsNamed) {
  Bytes gz = read_bytes(kFashion + "/t10k-images-idx3-ubyte.gz");
  for (size_t i = gz.size() / 2; i < gz.size() / 2 + 64; ++i) gz[i] ^= 0xFF;
  const std::string path = fresh_directory() + "/flipped.gz";
  write_bytes(path, gz);
  EXPECT_TRUE(mentions(data_error([&] { read_idx(path); }), path));
}

TEST(Idx, WrongMagicSaysWhatWasFoundAndExpected) {
  const std::string path = fresh_directory() + "/not-idx";
  write_bytes(path, Bytes{0x12, 0x34, 0x08, 0x01, 0, 0, 0, 0});
  const std::string message = data_error([&] { read_idx(path); });
  EXPECT_TRUE(mentions(message, path));
  EXPECT_TRUE(mentions(message, "0x12340801"));
  EXPECT_TRUE(mentions(message, "expected"));
}

TEST(Idx, DimensionsNotMatchingTheFileSizeGiveBothNumbers) {
  const std::string path = fresh_directory() + "/short.idx";
  write_bytes(path, concat(idx_header(0x08, {2, 3}), Bytes(5, 0)));
  const std::string message = data_error([&] { read_idx(path); });
  EXPECT_TRUE(mentions(message, path));
  EXPECT_TRUE(mentions(message, "need 6 bytes"));
  EXPECT_TRUE(mentions(message, "has 5"));
}

TEST(Jpeg, FashionMnistImageRoundTripsAsGray) {
  const torch::Tensor image = read_fashion_mnist(kFashion, "t10k")->get(17).image;
  const torch::Tensor decoded = decode_jpeg(encode_jpeg(image, 95), 1, "fashion #17");
  EXPECT_EQ(decoded.scalar_type(), torch::kUInt8);
  expect_close_pixels(decoded, image);
}

TEST(Jpeg, RgbImageRoundTripsInChannelOrder) {
  const torch::Tensor image = gradient_image(32, 48);
  expect_close_pixels(decode_jpeg(encode_jpeg(image, 95), 3, "gradient"), image);
}

TEST(Jpeg, GrayJpegDecodedAsRgbHasThreeEqualChannels) {
  const torch::Tensor gray = gradient_image(16, 24).narrow(0, 0, 1).contiguous();
  const torch::Tensor rgb = decode_jpeg(encode_jpeg(gray, 95), 3, "gray");
  ASSERT_EQ(rgb.sizes(), (std::vector<int64_t>{3, 16, 24}));
  EXPECT_TRUE(torch::equal(rgb[0], rgb[1]));
  EXPECT_TRUE(torch::equal(rgb[0], rgb[2]));
}

TEST(Jpeg, EncodeRejectsWhatIsNotUint8ChwWithOneOrThreeChannels) {
  EXPECT_THROW(encode_jpeg(torch::zeros({3, 8, 8})), Error);
  EXPECT_THROW(encode_jpeg(torch::zeros({8, 8}, torch::kUInt8)), Error);
  EXPECT_THROW(encode_jpeg(torch::zeros({2, 8, 8}, torch::kUInt8)), Error);
}

TEST(Jpeg, GarbageAndOverwrittenDataAreCorrupt) {
  EXPECT_TRUE(mentions(data_error([] { decode_jpeg(Bytes(500, 0x5A), 3, "garbage.jpg"); }), "garbage.jpg"));
  Bytes jpeg = a_jpeg();
  // Repeated SOI markers in the middle of the scan data.
  for (size_t i = jpeg.size() / 2; i < jpeg.size() / 2 + 32; i += 2) {
    jpeg[i] = 0xFF;
    jpeg[i + 1] = 0xD8;
  }
  EXPECT_TRUE(mentions(data_error([&] { decode_jpeg(jpeg, 3, "overwritten.jpg"); }), "overwritten.jpg"));
}

TEST(Jpeg, TruncatedDataIsAnErrorNotAWarning) {
  Bytes jpeg = a_jpeg();
  jpeg.resize(jpeg.size() / 2);
  const std::string message = data_error([&] { decode_jpeg(jpeg, 3, "half.jpg"); });
  EXPECT_TRUE(mentions(message, "half.jpg"));
  EXPECT_TRUE(mentions(message, "Premature end of JPEG file"));
}

TEST(Jpeg, AFailedDecodeDoesNotSpoilTheNextOnTheSameThread) {
  // Some of these cuts end inside a Huffman table, which left TurboJPEG 2.1's handle unable
  // to decode the next image.
  const Bytes jpeg = a_jpeg();
  for (size_t cut = 100; cut < 500; cut += 10) {
    const Bytes header_part(jpeg.begin(), jpeg.begin() + cut);
    EXPECT_TRUE(mentions(data_error([&] { decode_jpeg(header_part, 3, "cut.jpg"); }), "cut.jpg"));
    expect_close_pixels(decode_jpeg(jpeg, 3, "whole.jpg"), gradient_image(64, 64));
  }
}

TEST(Jpeg, DecodesInManyThreadsAtOnce) {
  const Bytes jpeg = a_jpeg();
  const Bytes half(jpeg.begin(), jpeg.begin() + jpeg.size() / 2);
  std::atomic<int> decoded{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        if (decode_jpeg(jpeg, 3, "whole.jpg").size(0) == 3) ++decoded;
        if (!data_error([&] { decode_jpeg(half, 3, "half.jpg"); }).empty()) ++refused;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(decoded, 100);
  EXPECT_EQ(refused, 100);
}

TEST(Jpeg, MissingFileIsNamed) {
  const std::string path = fresh_directory() + "/absent.jpg";
  EXPECT_TRUE(mentions(data_error([&] { read_jpeg(path, 3); }), path));
}

TEST(ImageFolder, ClassesSortedAndLabelsRight) {
  const std::string root = fresh_directory();
  for (const char* name : {"zebra/b.jpg", "zebra/a.JPEG", "ant/x.jpeg", "mole/1.JPG"}) {
    fs::create_directories(fs::path(root + "/" + name).parent_path());
    write_bytes(root + "/" + name, a_jpeg());
  }
  write_text(root + "/mole/notes.txt", "not an image");
  write_text(root + "/readme.txt", "not a class");
  const auto folder = read_image_folder(root, 1);
  EXPECT_EQ(folder->classes(), (std::vector<std::string>{"ant", "mole", "zebra"}));
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"/ant/x.jpeg", 0}, {"/mole/1.JPG", 1}, {"/zebra/a.JPEG", 2}, {"/zebra/b.jpg", 2}};
  ASSERT_EQ(folder->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(folder->describe(i), root + expected[i].first);
    EXPECT_EQ(folder->get(i).label, expected[i].second);
  }
  EXPECT_EQ(folder->get(0).image.sizes(), (std::vector<int64_t>{1, 64, 64}));
}

TEST(ImageFolder, EmptyOrMissingFolderIsNamed) {
  const std::string root = fresh_directory();
  EXPECT_TRUE(mentions(data_error([&] { read_image_folder(root); }), root + " has no examples"));
  EXPECT_TRUE(mentions(data_error([&] { read_image_folder(root + "/absent"); }), root + "/absent"));
}

TEST(ImageFolder, CorruptAndTruncatedFilesAreNamedWhenRead) {
  const std::string root = fresh_directory();
  fs::create_directories(root + "/bad");
  Bytes half = a_jpeg();
  half.resize(half.size() / 2);
  write_bytes(root + "/bad/garbage.jpg", Bytes(300, 0x33));
  write_bytes(root + "/bad/half.jpg", half);
  const auto folder = read_image_folder(root);
  EXPECT_TRUE(mentions(data_error([&] { folder->get(0); }), root + "/bad/garbage.jpg"));
  EXPECT_TRUE(mentions(data_error([&] { folder->get(1); }), root + "/bad/half.jpg"));
}

// A tiny ImageNet in Kaggle's layout: three synsets, four train and two val images.
std::string tiny_imagenet(const std::string& eol = "\n") {
  const std::string root = fresh_directory();
  write_text(root + "/LOC_synset_mapping.txt",
             "n01440764 tench, Tinca tinca" + eol + "n01443537 goldfish" + eol + "n01484850 great white shark" + eol);
  write_text(root + "/LOC_train_solution.csv",
             "ImageId,PredictionString" + eol + "n01443537_1,n01443537 1 2 3 4 n01443537 5 6 7 8" + eol +
                 "n01443537_2,n01443537 1 2 3 4" + eol + "n01484850_7,n01484850 9 9 9 9" + eol +
                 "n01440764_3,n01440764 0 0 5 5" + eol);
  write_text(root + "/LOC_val_solution.csv", "ImageId,PredictionString" + eol +
                                                 "ILSVRC2012_val_00000001,n01484850 1 1 2 2" + eol +
                                                 "ILSVRC2012_val_00000002,n01440764 3 3 4 4" + eol);
  const std::string images = root + "/ILSVRC/Data/CLS-LOC/";
  for (const char* file :
       {"train/n01443537/n01443537_1", "train/n01443537/n01443537_2", "train/n01484850/n01484850_7",
        "train/n01440764/n01440764_3", "val/ILSVRC2012_val_00000001", "val/ILSVRC2012_val_00000002"}) {
    fs::create_directories(fs::path(images + file).parent_path());
    write_bytes(images + file + ".JPEG", encode_jpeg(torch::full({3, 8, 8}, 90, torch::kUInt8)));
  }
  return root;
}

void expect_tiny_imagenet(const std::string& root) {
  const auto train = read_imagenet(root, "train");
  EXPECT_EQ(train->classes(), (std::vector<std::string>{"n01440764", "n01443537", "n01484850"}));
  const std::string dir = root + "/ILSVRC/Data/CLS-LOC/";
  const std::vector<std::pair<std::string, int64_t>> train_files = {{"train/n01443537/n01443537_1.JPEG", 1},
                                                                    {"train/n01443537/n01443537_2.JPEG", 1},
                                                                    {"train/n01484850/n01484850_7.JPEG", 2},
                                                                    {"train/n01440764/n01440764_3.JPEG", 0}};
  ASSERT_EQ(train->size(), train_files.size());
  for (size_t i = 0; i < train_files.size(); ++i) {
    EXPECT_EQ(train->files()[i].path, dir + train_files[i].first);
    EXPECT_EQ(train->files()[i].label, train_files[i].second);
  }
  EXPECT_EQ(train->get(3).image.sizes(), (std::vector<int64_t>{3, 8, 8}));
  const auto val = read_imagenet(root, "val", 1);
  ASSERT_EQ(val->size(), 2u);
  EXPECT_EQ(val->files()[0].path, dir + "val/ILSVRC2012_val_00000001.JPEG");
  EXPECT_EQ(val->files()[0].label, 2);
  EXPECT_EQ(val->files()[1].path, dir + "val/ILSVRC2012_val_00000002.JPEG");
  EXPECT_EQ(val->files()[1].label, 0);
  EXPECT_EQ(val->get(1).image.sizes(), (std::vector<int64_t>{1, 8, 8}));
}

TEST(ImageNetLayout, ReadsTrainAndVal) { expect_tiny_imagenet(tiny_imagenet()); }

TEST(ImageNetLayout, ReadsWindowsLineEndings) { expect_tiny_imagenet(tiny_imagenet("\r\n")); }

TEST(ImageNetLayout, UnknownSynsetNamesCsvLine) {
  const std::string root = tiny_imagenet();
  const std::string csv = root + "/LOC_train_solution.csv";
  write_text(csv, "ImageId,PredictionString\nn01443537_1,n01443537 1 2 3 4\nn09999999_1,n09999999 1 2 3 4\n");
  const std::string message = data_error([&] { read_imagenet(root, "train"); });
  EXPECT_TRUE(mentions(message, csv + ":3"));
  EXPECT_TRUE(mentions(message, "n09999999"));
}

TEST(ImageNetLayout, MissingImageNamesCsvLineAndPath) {
  const std::string root = tiny_imagenet("\r\n");
  const std::string image = root + "/ILSVRC/Data/CLS-LOC/val/ILSVRC2012_val_00000002.JPEG";
  fs::remove(image);
  const std::string message = data_error([&] { read_imagenet(root, "val"); });
  EXPECT_TRUE(mentions(message, root + "/LOC_val_solution.csv:3"));
  EXPECT_TRUE(mentions(message, image));
}

TEST(ImageNetLayout, MalformedRowsAndMappingLinesNameFileAndLine) {
  const std::string root = tiny_imagenet();
  write_text(root + "/LOC_val_solution.csv", "ImageId,PredictionString\nno comma here\n");
  EXPECT_TRUE(mentions(data_error([&] { read_imagenet(root, "val"); }), root + "/LOC_val_solution.csv:2"));
  write_text(root + "/LOC_val_solution.csv", "ImageId,PredictionString\nILSVRC2012_val_00000001,\n");
  EXPECT_TRUE(mentions(data_error([&] { read_imagenet(root, "val"); }), root + "/LOC_val_solution.csv:2"));
  write_text(root + "/LOC_synset_mapping.txt", "n01440764 tench\n goldfish\n");
  EXPECT_TRUE(mentions(data_error([&] { read_imagenet(root, "val"); }), root + "/LOC_synset_mapping.txt:2"));
}

TEST(ImageNetLayout, HeaderOnlyCsvHasNoExamples) {
  const std::string root = tiny_imagenet();
  write_text(root + "/LOC_train_solution.csv", "ImageId,PredictionString\r\n");
  EXPECT_TRUE(
      mentions(data_error([&] { read_imagenet(root, "train"); }), root + "/LOC_train_solution.csv has no examples"));
}

TEST(ImageNetLayout, OtherSplitsAreAConfigError) { EXPECT_THROW(read_imagenet(tiny_imagenet(), "test"), ConfigError); }

TEST(TensorsFile, SaveLoadRoundTrip) {
  const torch::Tensor images = torch::randint(0, 256, {5, 1, 4, 4}, torch::kUInt8);
  const torch::Tensor labels = torch::tensor({0, 1, 2, 1, 0}, torch::kLong);
  const std::string path = fresh_directory() + "/five.pt";
  save_tensors(path, images, labels);
  const auto loaded = load_tensors(path, 3);
  ASSERT_EQ(loaded->size(), 5u);
  EXPECT_EQ(loaded->num_classes(), 3);
  EXPECT_TRUE(torch::equal(loaded->images(), images));
  EXPECT_TRUE(torch::equal(loaded->labels(), labels));
  EXPECT_TRUE(torch::equal(loaded->get(2).image, images[2]));
  EXPECT_EQ(loaded->get(2).label, 2);
  EXPECT_EQ(loaded->describe(2), path + " #2");
}

TEST(TensorsFile, ImagesWithoutChannelsAreReadAsOneChannel) {
  const std::string path = fresh_directory() + "/flat.pt";
  save_tensors(path, torch::zeros({2, 4, 6}, torch::kUInt8), torch::tensor({1, 0}, torch::kUInt8));
  const Sample sample = load_tensors(path, 2)->get(1);
  EXPECT_EQ(sample.image.sizes(), (std::vector<int64_t>{1, 4, 6}));
  EXPECT_EQ(sample.label, 0);
}

TEST(TensorsFile, BadContentsAreNamed) {
  const std::string dir = fresh_directory();
  const auto images = torch::zeros({3, 1, 2, 2}, torch::kUInt8);
  save_tensors(dir + "/label.pt", images, torch::tensor({0, 3, 1}));
  EXPECT_TRUE(mentions(data_error([&] { load_tensors(dir + "/label.pt", 3); }), dir + "/label.pt: label 3"));
  save_tensors(dir + "/count.pt", images, torch::tensor({0, 1}));
  EXPECT_TRUE(mentions(data_error([&] { load_tensors(dir + "/count.pt", 3); }), dir + "/count.pt"));
  save_tensors(dir + "/empty.pt", images.narrow(0, 0, 0), torch::zeros({0}, torch::kLong));
  EXPECT_TRUE(mentions(data_error([&] { load_tensors(dir + "/empty.pt", 3); }), dir + "/empty.pt has no examples"));
  EXPECT_TRUE(mentions(data_error([&] { load_tensors(dir + "/absent.pt", 3); }), dir + "/absent.pt"));
}

}  // namespace
}  // namespace lockstep::data
