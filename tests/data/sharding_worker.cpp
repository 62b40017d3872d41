// A worker the sharding test starts as real processes: each rank reads its share of
// Fashion-MNIST's test split through a PrefetchLoader whose rank and world come from
// lockstep::init(), then the ranks compare what they read. Rank 0 prints one summary line.
#include <cstdlib>
#include <iostream>
#include <vector>

#include <torch/torch.h>

#include "lockstep/data/loader.h"
#include "lockstep/data/registry.h"
#include "lockstep/lockstep.h"

namespace {

namespace data = lockstep::data;

int64_t label_sum(const data::Dataset& dataset, const torch::Tensor& indices) {
  int64_t sum = 0;
  for (int64_t i = 0; i < indices.numel(); ++i) sum += dataset.get(indices[i].item<int64_t>()).label;
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t batch_size = argc > 1 ? std::atoll(argv[1]) : 64;
  lockstep::init();
  const auto registry = data::Registry::load_default();
  const auto dataset = data::open_dataset(registry.at("fashion-mnist"), "test");
  data::PrefetchLoader loader(
      dataset, data::LoaderOptions().sampler(data::SamplerOptions().batch_size(batch_size).seed(7)).threads(2));
  loader.set_epoch(1);

  int64_t batches = 0, labels_read = 0;
  while (auto batch = loader.next()) {
    ++batches;
    labels_read += batch->labels.sum().item<int64_t>();
  }
  const auto& mine = loader.sampler().indices();
  const auto indices = torch::tensor(std::vector<int64_t>(mine.begin(), mine.end()));
  const auto all_indices = lockstep::all_gather(indices);  // the same length on every rank, or it fails
  const auto all_batches = lockstep::all_gather(torch::tensor({batches}));
  auto read_sum = torch::tensor({labels_read});
  lockstep::all_reduce(read_sum);

  if (lockstep::rank() == 0) {
    const auto everything = torch::cat(all_indices);
    std::cout << "ranks " << lockstep::world_size() << " batches";
    for (const auto& b : all_batches) std::cout << " " << b.item<int64_t>();
    std::cout << " samples " << everything.numel() << " distinct " << std::get<0>(torch::_unique(everything)).numel()
              << " labels read " << read_sum.item<int64_t>() << " of the sampled indices "
              << label_sum(*dataset, everything) << std::endl;
  }
  lockstep::shutdown();
  return 0;
}
