// What the DDP tests run on every rank, as real processes (ddp_worker) and as replicas on
// threads (ddp_replicas_test). Each scenario trains with DistributedDataParallel and checks
// itself against a single-process reference that the rank computes on the concatenated
// batch; it prints what went wrong and returns non-zero. Draws from libtorch's default
// generator are made in with_replica_generator, so that replicas draw as processes would.
#include "ddp_scenarios.h"

#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <string>

#include <torch/serialize.h>
#include <torch/torch.h>

#include "comm/sixteen_bit_means.h"
#include "lockstep/lockstep.h"

namespace {

using torch::Tensor;

constexpr int kSteps = 20;
constexpr int kBatch = 4;       // per rank and micro-batch
thread_local int failures = 0;  // per replica
// Where models and batches live: the CPU, or a GPU (tests/gpu). Per replica, like failures.
thread_local torch::Device device = torch::kCPU;

// A trunk, an optional branch, a head: the branch gets no gradient when it is skipped.
struct BranchyImpl : torch::nn::Module {
  BranchyImpl()
      : trunk(register_module("trunk", torch::nn::Linear(8, 16))),
        branch(register_module("branch", torch::nn::Linear(16, 16))),
        head(register_module("head", torch::nn::Linear(16, 4))) {}
  Tensor forward(const Tensor& x, bool use_branch) {
    Tensor h = torch::relu(trunk(x));
    if (use_branch) h = h + torch::relu(branch(h));
    return head(h);
  }
  torch::nn::Linear trunk, branch, head;
};
TORCH_MODULE(Branchy);

struct Case {
  std::string model;      // mlp, cnn (with BatchNorm) or branchy
  std::string optimizer;  // sgd or adam
  int micro_batches;      // 2: the first under no_sync()
};

std::shared_ptr<torch::nn::Module> make_model_on_cpu(const std::string& kind) {
  if (kind == "mlp") {
    return torch::nn::Sequential(torch::nn::Linear(8, 16), torch::nn::ReLU(), torch::nn::Linear(16, 16),
                                 torch::nn::ReLU(), torch::nn::Linear(16, 4))
        .ptr();
  }
  if (kind == "cnn") {
    // No conv bias before BatchNorm: its true gradient is zero, and Adam would turn the
    // rounding noise standing in for it into full-size steps.
    return torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3).bias(false)),
                                 torch::nn::BatchNorm2d(4), torch::nn::ReLU(), torch::nn::MaxPool2d(2),
                                 torch::nn::Flatten(), torch::nn::Linear(4 * 5 * 5, 3))
        .ptr();
  }
  return Branchy().ptr();
}

// Initialised on the CPU, so that every device starts from the same values.
std::shared_ptr<torch::nn::Module> make_model(const std::string& kind) {
  auto model = make_model_on_cpu(kind);
  model->to(device);
  return model;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::string& kind, torch::nn::Module& model) {
  if (kind == "sgd") {
    return std::make_unique<torch::optim::SGD>(model.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  }
  return std::make_unique<torch::optim::Adam>(model.parameters(), torch::optim::AdamOptions(0.01));
}

// The loss of one chunk of kBatch samples: chunk c of micro-batch m of this step's global batch,
// which every process generates identically.
Tensor chunk_loss(const Case& c, torch::nn::Module& model, int step, int micro, int chunk, int world) {
  const int64_t rows = static_cast<int64_t>(kBatch) * world;
  const bool images = c.model == "cnn";
  Tensor x, y;
  lockstep::with_replica_generator([&] {
    torch::manual_seed(10000 + step * 10 + micro);
    x = images ? torch::randn({rows, 1, 12, 12}) : torch::randn({rows, 8});
    y = images ? torch::randint(0, 3, {rows}) : torch::randn({rows, 4});
  });
  x = x.narrow(0, chunk * kBatch, kBatch).to(device);
  y = y.narrow(0, chunk * kBatch, kBatch).to(device);
  if (c.model == "branchy") {
    auto& branchy = dynamic_cast<BranchyImpl&>(model);
    return torch::mse_loss(branchy.forward(x, (step + chunk) % 3 != 0), y);
  }
  auto& sequential = dynamic_cast<torch::nn::SequentialImpl&>(model);
  Tensor out = sequential.forward(x);
  return images ? torch::cross_entropy_loss(out, y) : torch::mse_loss(out, y);
}

Tensor flat_parameters(torch::nn::Module& model) {
  std::vector<Tensor> parts;
  for (const auto& p : model.parameters()) parts.push_back(p.detach().flatten());
  return torch::cat(parts);
}

// Parameters and floating-point buffers (BatchNorm's running statistics) in one vector.
Tensor flat_state(torch::nn::Module& model) {
  std::vector<Tensor> parts{flat_parameters(model)};
  for (const auto& b : model.buffers()) {
    if (b.is_floating_point()) parts.push_back(b.flatten());
  }
  return torch::cat(parts);
}

void expect_identical_across_ranks(torch::nn::Module& model, const std::string& what,
                                   const lockstep::ProcessGroup& group = lockstep::ProcessGroup()) {
  const auto all = lockstep::all_gather(flat_state(model), group);
  for (size_t r = 1; r < all.size(); ++r) {
    if (!torch::equal(all[r], all[0])) {
      ++failures;
      std::cerr << what << ": rank " << r << "'s parameters or buffers differ from rank 0's\n";
      return;
    }
  }
}

// One process on the concatenated batch: every rank's chunk, gradients averaged.
Tensor reference(const Case& c, int world) {
  std::shared_ptr<torch::nn::Module> model;
  lockstep::with_replica_generator([&] {
    torch::manual_seed(100);  // rank 0's initialisation, which DDP gives everyone
    model = make_model(c.model);
  });
  auto optimizer = make_optimizer(c.optimizer, *model);
  for (int step = 0; step < kSteps; ++step) {
    optimizer->zero_grad();
    for (int micro = 0; micro < c.micro_batches; ++micro) {
      for (int chunk = 0; chunk < world; ++chunk) {
        (chunk_loss(c, *model, step, micro, chunk, world) / (world * c.micro_batches)).backward();
      }
    }
    optimizer->step();
  }
  return flat_parameters(*model);
}

// `before_step`, when set, runs after each step's backward, before the optimizer's step.
Tensor train(const Case& c, lockstep::DDPOptions options,
             const std::function<void(torch::nn::Module&, int step)>& before_step = {}) {
  const int rank = options.group().rank(), world = options.group().size();
  std::shared_ptr<torch::nn::Module> model;
  lockstep::with_replica_generator([&] {
    torch::manual_seed(100 + rank);  // different on purpose: DDP must start everyone from rank 0
    model = make_model(c.model);
  });
  lockstep::DistributedDataParallel ddp(model, options.find_unused_parameters(c.model == "branchy"));
  auto optimizer = make_optimizer(c.optimizer, *model);
  const std::string what = c.model + "/" + c.optimizer + "/" + std::to_string(c.micro_batches);
  for (int step = 0; step < kSteps; ++step) {
    optimizer->zero_grad();
    if (c.micro_batches == 2) {
      auto accumulate_only = ddp.no_sync();
      (chunk_loss(c, *model, step, 0, rank, world) / 2).backward();
    }
    (chunk_loss(c, *model, step, c.micro_batches - 1, rank, world) / c.micro_batches).backward();
    if (before_step) before_step(*model, step);
    optimizer->step();
    expect_identical_across_ranks(*model, what + " step " + std::to_string(step), options.group());
  }
  return flat_parameters(*model);
}

void expect_close(const Tensor& got, const Tensor& want, double rtol, double atol, const std::string& what) {
  const double error = ((got - want).abs() - rtol * want.abs()).max().item<double>();
  if (error <= atol) return;
  ++failures;
  std::cerr << "rank " << lockstep::rank() << ": " << what << " differs from one process on the whole batch by "
            << (got - want).abs().max().item<double>() << "\n";
}

// With `out_dir`, rank 0 also saves each case's trained parameters there.
void equivalence(const std::string& out_dir) {
  for (const std::string model : {"mlp", "cnn", "branchy"}) {
    for (const std::string optimizer : {"sgd", "adam"}) {
      for (int micro : {1, 2}) {
        const Case c{model, optimizer, micro};
        const std::string name = model + "-" + optimizer + "-" + std::to_string(micro);
        const Tensor trained = train(c, lockstep::DDPOptions());
        expect_close(trained, reference(c, lockstep::world_size()), 1e-5, 1e-6, name + " micro-batches");
        if (!out_dir.empty() && lockstep::rank() == 0) torch::save(trained, out_dir + "/" + name + ".pt");
      }
    }
  }
  // Buckets of about 512 bytes: a few parameters each, many reductions in flight at once.
  const auto small_buckets = lockstep::DDPOptions().first_bucket_cap_mb(0.0005).bucket_cap_mb(0.0005);
  for (const Case c : {Case{"mlp", "sgd", 1}, Case{"cnn", "adam", 2}}) {
    expect_close(train(c, small_buckets), reference(c, lockstep::world_size()), 1e-5, 1e-6,
                 c.model + "/" + c.optimizer + " in 512-byte buckets");
  }
}

// The even and the odd ranks train apart, each pair with DDP on its own sub-group, while
// the default group checks on them: each pair matches one process on its own batch.
void sub_group_equivalence() {
  std::vector<int> evens, odds;
  for (int q = 0; q < lockstep::world_size(); ++q) (q % 2 == 0 ? evens : odds).push_back(q);
  const auto even = lockstep::new_group(evens);
  const auto odd = lockstep::new_group(odds);
  const auto& mine = lockstep::rank() % 2 == 0 ? even : odd;
  for (const Case c : {Case{"mlp", "sgd", 1}, Case{"cnn", "adam", 2}}) {
    expect_close(train(c, lockstep::DDPOptions().group(mine)), reference(c, mine.size()), 1e-5, 1e-6,
                 c.model + "/" + c.optimizer + " on the sub-group of rank " + std::to_string(lockstep::rank()));
    lockstep::barrier();
  }
  // DistributedOptimizer averages over its group only: rank r's gradient is r + 1 everywhere.
  Tensor w = torch::zeros({3}, torch::kDouble).requires_grad_();
  lockstep::DistributedOptimizer<torch::optim::SGD> optimizer(mine, std::vector<Tensor>{w},
                                                              torch::optim::SGDOptions(0.5));
  w.mutable_grad() = torch::full({3}, lockstep::rank() + 1.0, torch::kDouble);
  optimizer.step();
  double mean = 0;
  for (int q : mine.ranks()) mean += (q + 1.0) / mine.size();
  expect_close(w.detach(), torch::full({3}, -0.5 * mean, torch::kDouble), 0, 1e-12,
               "DistributedOptimizer on the sub-group of rank " + std::to_string(lockstep::rank()));
}

// Compressed buckets: the same training within the tolerance the docs state.
void compression() {
  const Case c{"mlp", "sgd", 1};
  const Tensor want = reference(c, lockstep::world_size());
  expect_close(train(c, lockstep::DDPOptions().comm_hook(lockstep::fp16_compress_hook())), want, 1e-2, 1e-3,
               "fp16 hook");
  expect_close(train(c, lockstep::DDPOptions().comm_hook(lockstep::bf16_compress_hook())), want, 5e-2, 5e-3,
               "bf16 hook");
}

// Avg (the default), Sum and an explicit factor: one backward against the reference's gradient.
void scaling() {
  const int world = lockstep::world_size();
  const Case c{"mlp", "sgd", 1};
  std::shared_ptr<torch::nn::Module> reference_model;
  lockstep::with_replica_generator([&] {
    torch::manual_seed(100);
    reference_model = make_model("mlp");
  });
  for (int chunk = 0; chunk < world; ++chunk) (chunk_loss(c, *reference_model, 0, 0, chunk, world) / world).backward();
  std::vector<Tensor> want;
  for (const auto& p : reference_model->parameters()) want.push_back(p.grad().flatten());
  const Tensor mean_gradient = torch::cat(want);

  const std::vector<std::pair<lockstep::DDPOptions, double>> cases = {
      {lockstep::DDPOptions(), 1.0},
      {lockstep::DDPOptions().reduce_op(lockstep::ReduceOp::Sum), world},
      {lockstep::DDPOptions().gradient_scale(0.25), 0.25 * world}};
  for (const auto& [options, factor] : cases) {
    std::shared_ptr<torch::nn::Module> model;
    lockstep::with_replica_generator([&] {
      torch::manual_seed(100);
      model = make_model("mlp");
    });
    lockstep::DistributedDataParallel ddp(model, options);
    chunk_loss(c, *model, 0, 0, lockstep::rank(), world).backward();
    std::vector<Tensor> got;
    for (const auto& p : model->parameters()) got.push_back(p.grad().flatten());
    expect_close(torch::cat(got), mean_gradient * factor, 1e-5, 1e-7, "gradient scaled by " + std::to_string(factor));
  }
}

// What a bucket holds when it is handed to the comm hook, bit for bit: this rank's
// gradients, accumulated and scaled as libtorch's copy_, add_out and mul_ compute them, for
// float32 and float64 models: in a backward where grad() is undefined, after a no_sync()
// one, where grad() holds that pass's gradient, and with grad() zeroed, where it must still
// be the same tensor afterwards. One bucket, laid out as ddp.buckets() says.
void bucket_contents() {
  const int rank = lockstep::rank(), world = lockstep::world_size();
  const double scale = 1.0 / world;
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    std::shared_ptr<torch::nn::Module> model, plain;
    lockstep::with_replica_generator([&] {
      torch::manual_seed(7);
      model = make_model("mlp");
      torch::manual_seed(7);
      plain = make_model("mlp");
    });
    model->to(dtype);
    plain->to(dtype);
    std::vector<Tensor> seen;
    const auto recording = [&seen](lockstep::GradBucket& bucket) {
      seen.push_back(bucket.buffer.clone());
      return lockstep::allreduce_hook()(bucket);
    };
    lockstep::DistributedDataParallel ddp(
        model, lockstep::DDPOptions().bucket_cap_mb(64).first_bucket_cap_mb(64).comm_hook(recording));
    // This rank's gradient of pass `pass` alone, per parameter, from the plain model.
    const auto gradients = [&](int pass) {
      const Tensor x =
          torch::full({2, 8}, 0.25 * (rank + 1) + pass, torch::TensorOptions().dtype(dtype).device(device));
      for (auto& p : plain->parameters()) p.mutable_grad() = Tensor();
      plain->as<torch::nn::Sequential>()->forward(x).pow(2).sum().backward();
      std::vector<Tensor> g;
      for (const auto& p : plain->parameters()) g.push_back(p.grad().clone());
      return std::make_pair(x, g);
    };
    // The bucket as libtorch's ops would fill it, in ddp.buckets()'s order.
    const auto expected = [&](const std::vector<Tensor>* so_far, const std::vector<Tensor>& grad) {
      std::vector<Tensor> parts;
      const auto buckets = ddp.buckets();
      for (size_t i : buckets.at(0)) {
        Tensor into = torch::empty_like(grad[i]);
        if (so_far != nullptr) {
          at::add_out(into, (*so_far)[i], grad[i]);
        } else {
          into.copy_(grad[i]);
        }
        parts.push_back(into.mul_(scale).flatten());
      }
      return torch::cat(parts);
    };
    const auto check = [&](const Tensor& want, const std::string& when) {
      if (seen.size() != 1 || !torch::equal(seen[0], want)) {
        std::cout << "rank " << rank << ": the " << c10::toString(dtype) << " bucket " << when
                  << " differs from the bits of libtorch's ops" << std::endl;
        ++failures;
      }
      seen.clear();
    };
    const auto [x0, g0] = gradients(0);
    const Tensor want0 = expected(nullptr, g0);
    model->as<torch::nn::Sequential>()->forward(x0).pow(2).sum().backward();
    check(want0, "of a first backward");

    for (auto& p : model->parameters()) p.mutable_grad() = Tensor();
    const auto [x1, g1] = gradients(1);
    {
      auto guard = ddp.no_sync();
      model->as<torch::nn::Sequential>()->forward(x1).pow(2).sum().backward();
    }
    const auto [x2, g2] = gradients(2);
    const Tensor want2 = expected(&g1, g2);
    model->as<torch::nn::Sequential>()->forward(x2).pow(2).sum().backward();
    check(want2, "after no_sync()");

    // grad() zeroed in place going in, as libtorch 1.x's zero_grad() leaves it: the bucket
    // holds the sum, and afterwards grad() is the very tensor it was, holding the reduced
    // gradient: the sum of every rank's bucket.
    std::vector<Tensor> before, zeros;
    for (auto& p : model->parameters()) {
      before.push_back(p.mutable_grad().zero_());
      zeros.push_back(torch::zeros_like(p));
    }
    const auto [x3, g3] = gradients(3);
    const Tensor want3 = expected(&zeros, g3);
    model->as<torch::nn::Sequential>()->forward(x3).pow(2).sum().backward();
    check(want3, "with grad() zeroed");
    std::vector<Tensor> reduced(before.size());
    const auto buckets = ddp.buckets();
    for (size_t slot = 0; slot < buckets.at(0).size(); ++slot) {
      const size_t i = buckets[0][slot];
      const Tensor& grad = model->parameters()[i].grad();
      if (!grad.is_same(before[i]) || grad.data_ptr() != before[i].data_ptr()) {
        std::cout << "rank " << rank << ": grad() of parameter " << i << " is not the tensor it was before backward"
                  << std::endl;
        ++failures;
      }
      reduced[slot] = grad.flatten();
    }
    const Tensor sum = torch::stack(lockstep::all_gather(want3)).sum(0);
    if (!torch::allclose(torch::cat(reduced), sum)) {
      std::cout << "rank " << rank << ": the " << c10::toString(dtype)
                << " grad() after backward is not the sum of every rank's bucket" << std::endl;
      ++failures;
    }
  }
}

// gradient_as_bucket_view: every parameter's grad() lies in its bucket, the very memory the
// comm hook reduced, in the rebuilt buckets, and again after grad()
// was set undefined or replaced; trainings give the bits of copying out, with no_sync(),
// find_unused_parameters (branchy), clipping, grads replaced, and fp16 compression; a grad()
// of another shape is refused, naming the parameter.
void bucket_views() {
  const int world = lockstep::world_size();
  const auto views = lockstep::DDPOptions().gradient_as_bucket_view(true);
  const auto expect_same_bits = [](const Tensor& got, const Tensor& want, const std::string& what) {
    if (torch::equal(got, want)) return;
    ++failures;
    std::cerr << "rank " << lockstep::rank() << ": " << what << " with gradients as bucket views differs by "
              << (got - want).abs().max().item<double>() << " from copying them out\n";
  };
  for (const std::string model : {"mlp", "cnn", "branchy"}) {
    for (const std::string optimizer : {"sgd", "adam"}) {
      for (int micro : {1, 2}) {
        const Case c{model, optimizer, micro};
        const Tensor trained = train(c, views);
        const std::string name = model + "/" + optimizer + "/" + std::to_string(micro);
        expect_same_bits(trained, train(c, lockstep::DDPOptions()), name);
        expect_close(trained, reference(c, world), 1e-5, 1e-6, name + " with bucket views");
      }
    }
  }
  const Case mlp{"mlp", "sgd", 1};
  const auto clip = [](torch::nn::Module& m, int) { torch::nn::utils::clip_grad_norm_(m.parameters(), 0.05); };
  expect_same_bits(train(mlp, views, clip), train(mlp, lockstep::DDPOptions(), clip), "clipping");
  // Another tensor of the same shape in grad(), as some optimizers leave: summed into the
  // bucket like any grad(), and grad() is the bucket's view again after the next backward.
  const auto replace = [](torch::nn::Module& m, int step) {
    if (step % 3 != 1) return;
    for (auto& p : m.parameters()) p.mutable_grad() = p.grad().clone();
  };
  expect_same_bits(train(Case{"mlp", "sgd", 2}, views, replace),
                   train(Case{"mlp", "sgd", 2}, lockstep::DDPOptions(), replace), "grad() replaced");
  const auto fp16 = lockstep::DDPOptions().comm_hook(lockstep::fp16_compress_hook());
  expect_same_bits(train(mlp, lockstep::DDPOptions(fp16).gradient_as_bucket_view(true)), train(mlp, fp16),
                   "fp16 compression");

  // Where grad() lives: within the buffer the hook was handed for its bucket.
  std::shared_ptr<torch::nn::Module> model;
  lockstep::with_replica_generator([&] {
    torch::manual_seed(100);
    model = make_model("mlp");
  });
  std::vector<Tensor> handed;
  const auto recording = [&handed](lockstep::GradBucket& bucket) {
    handed.push_back(bucket.buffer);
    return lockstep::allreduce_hook()(bucket);
  };
  lockstep::DistributedDataParallel ddp(
      model, lockstep::DDPOptions(views).first_bucket_cap_mb(0.0005).bucket_cap_mb(0.0005).comm_hook(recording));
  const auto parameters = model->parameters();
  const auto expect_in_buckets = [&](const std::string& when) {
    const auto buckets = ddp.buckets();
    for (size_t b = 0; b < buckets.size(); ++b) {
      const char* begin = static_cast<const char*>(handed.at(b).data_ptr());
      const char* end = begin + handed[b].nbytes();
      for (size_t i : buckets[b]) {
        const Tensor& grad = parameters[i].grad();
        const char* at = grad.defined() ? static_cast<const char*>(grad.data_ptr()) : nullptr;
        if (at == nullptr || at < begin || at + grad.nbytes() > end) {
          ++failures;
          std::cerr << "rank " << lockstep::rank() << ": grad() of parameter " << i << " is not in bucket " << b
                    << "'s buffer " << when << "\n";
        }
      }
    }
    handed.clear();
  };
  for (int step = 0; step < 4; ++step) {
    if (step == 2) {
      for (auto& p : model->parameters()) p.mutable_grad() = Tensor();  // libtorch 2.x's zero_grad()
    }
    if (step == 3) {
      for (auto& p : model->parameters()) p.mutable_grad() = torch::zeros_like(p);
    }
    chunk_loss(mlp, *model, step, 0, lockstep::rank(), world).backward();
    // The first backward's buffers are gone: the buckets were rebuilt at its end.
    if (step > 0) {
      expect_in_buckets(std::vector<std::string>{"", "after a backward in the rebuilt buckets",
                                                 "after grad() was set undefined", "after grad() was replaced"}
                            .at(step));
    }
    handed.clear();
  }
  // A gradient of another shape: refused before any bucket left (the last parameter's
  // gradient comes first), on every rank alike.
  parameters.back().mutable_grad() = torch::zeros({3});
  try {
    chunk_loss(mlp, *model, 4, 0, lockstep::rank(), world).backward();
    ++failures;
    std::cerr << "rank " << lockstep::rank() << ": a grad() of shape [3] was not refused\n";
  } catch (const lockstep::Error& e) {
    std::cout << "rank " << lockstep::rank() << " refused: " << e.what() << std::endl;
  }
}

// float16 and bfloat16 parameters whose gradients overflow when summed: Avg gives their
// mean, rounded once from float32 buckets (exactly rounded where the float32 arithmetic is
// exact, on 2 ranks; within one unit in the last place otherwise).
void sixteen_bit_means() {
  const int rank = lockstep::rank(), world = lockstep::world_size();
  constexpr int64_t kNumel = 2048;
  auto model = std::make_shared<torch::nn::Module>();
  for (const auto dtype : {torch::kHalf, torch::kBFloat16}) {
    model->register_parameter(c10::toString(dtype), torch::zeros({kNumel}, dtype));
  }
  lockstep::DistributedDataParallel ddp(model);
  Tensor loss = torch::zeros({});
  for (const auto& p : model->parameters()) {
    loss = loss + (p.to(torch::kFloat) *
                   lockstep::testing::overflowing_input(rank, world, kNumel, p.scalar_type()).to(torch::kFloat))
                      .sum();
  }
  loss.backward();  // each gradient is this rank's input, exactly
  for (const auto& p : model->parameters()) {
    Tensor sum = torch::zeros({kNumel}, torch::kDouble);
    for (int r = 0; r < world; ++r)
      sum += lockstep::testing::overflowing_input(r, world, kNumel, p.scalar_type()).to(torch::kDouble);
    const Tensor want = lockstep::testing::correctly_rounded_mean(sum, world, p.scalar_type());
    const Tensor got = p.grad();
    const int64_t off_by = (got.view(torch::kShort).to(torch::kInt) - want.view(torch::kShort).to(torch::kInt))
                               .abs()
                               .max()
                               .item<int64_t>();
    if (got.scalar_type() != p.scalar_type() || off_by > (world == 2 ? 0 : 1)) {
      ++failures;
      std::cerr << "rank " << rank << ": the " << c10::toString(p.scalar_type()) << " gradient is " << off_by
                << " units in the last place off its mean\n";
    }
  }
}

// Buckets launch while backward still runs: the first parameter's gradient, computed last,
// comes after all but the last bucket has been handed to the communicator. Only the last
// launch of each backward pass is marked last, the one the hooks reduce on the spot.
void overlap() {
  using Clock = std::chrono::steady_clock;
  torch::nn::Sequential model;
  lockstep::with_replica_generator([&] {
    for (int i = 0; i < 6; ++i) {
      model->push_back(torch::nn::Linear(256, 256));
      model->push_back(torch::nn::Tanh());
    }
  });
  std::vector<Clock::time_point> launches;
  std::vector<bool> marked_last;
  const auto recording = [&](lockstep::GradBucket& bucket) {
    launches.push_back(Clock::now());
    marked_last.push_back(bucket.last);
    return lockstep::allreduce_hook()(bucket);
  };
  lockstep::DistributedDataParallel ddp(
      model, lockstep::DDPOptions().first_bucket_cap_mb(0.25).bucket_cap_mb(0.25).comm_hook(recording));
  Clock::time_point last_gradient;
  const Tensor first_weight = model->parameters().front();
  first_weight.register_hook([&](const Tensor&) { last_gradient = Clock::now(); });
  for (int step = 0; step < 3; ++step) {
    launches.clear();
    marked_last.clear();
    Tensor x;
    lockstep::with_replica_generator([&] { x = torch::randn({32, 256}); });
    model->forward(x).pow(2).mean().backward();
  }
  size_t early = 0;
  for (const auto& t : launches) early += t < last_gradient;
  std::cout << "rank " << lockstep::rank() << ": " << ddp.buckets().size() << " buckets, " << early
            << " launched before the last gradient was computed" << std::endl;
  if (ddp.buckets().size() < 4 || early + 1 < launches.size()) ++failures;
  std::vector<bool> only_the_final_one(launches.size(), false);
  only_the_final_one.back() = true;
  if (marked_last != only_the_final_one) {
    std::cout << "rank " << lockstep::rank() << ": GradBucket::last is not set on the final launch alone" << std::endl;
    ++failures;
  }
}

int different_models() {
  torch::nn::Sequential model;
  lockstep::with_replica_generator([&] {
    model = torch::nn::Sequential(torch::nn::Linear(8, lockstep::rank() == 1 ? 32 : 16), torch::nn::Linear(16, 4));
  });
  try {
    lockstep::DistributedDataParallel ddp(model);
  } catch (const lockstep::MismatchError& e) {
    std::cout << "rank " << lockstep::rank() << " MismatchError: " << e.what() << std::endl;
    return 0;
  }
  std::cout << "rank " << lockstep::rank() << " no error" << std::endl;
  return 1;
}

int unused_without_flag() {
  Branchy model = nullptr;
  Tensor x;
  lockstep::with_replica_generator([&] {
    model = Branchy();
    x = torch::randn({2, 8});
  });
  lockstep::DistributedDataParallel ddp(model);
  try {
    torch::mse_loss(model->forward(x, /*use_branch=*/false), torch::zeros({2, 4})).backward();
  } catch (const lockstep::Error& e) {
    std::cout << "rank " << lockstep::rank() << " Error: " << e.what() << std::endl;
    return 0;
  }
  return 1;
}

}  // namespace

int run_ddp_scenario(const std::string& scenario, const std::string& out_dir, const std::string& on) {
  failures = 0;
  device = torch::Device(on);
  int code = 0;
  if (scenario == "equivalence") {
    equivalence(out_dir);
  } else if (scenario == "scaling") {
    scaling();
  } else if (scenario == "sub-group-equivalence") {
    sub_group_equivalence();
  } else if (scenario == "compression") {
    compression();
  } else if (scenario == "overlap") {
    overlap();
  } else if (scenario == "bucket-views") {
    bucket_views();
  } else if (scenario == "bucket-contents") {
    bucket_contents();
  } else if (scenario == "16-bit-means") {
    sixteen_bit_means();
  } else if (scenario == "different-models") {
    code = different_models();
  } else if (scenario == "unused-without-flag") {
    code = unused_without_flag();
  } else {
    std::cerr << "unknown scenario '" << scenario << "'\n";
    code = 2;
  }
  if (failures > 0) code = 1;
  if (code == 0) std::cout << "rank " << lockstep::rank() << ": " << scenario << " ok" << std::endl;
  return code;
}
