#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lockstep/data/dataset.h"

namespace lockstep::data {

/// Fashion-MNIST's ten class names, in label order.
const std::vector<std::string>& fashion_mnist_classes();

/// Reads one split of Fashion-MNIST (or MNIST) from `dir`, which holds
/// `<prefix>-images-idx3-ubyte[.gz]` and `<prefix>-labels-idx1-ubyte[.gz]`: prefix "train"
/// (60000 examples) or "t10k" (10000). Images are uint8 1×28×28, labels 0..9.
std::shared_ptr<TensorDataset> read_fashion_mnist(const std::string& dir, const std::string& prefix);

}  // namespace lockstep::data
