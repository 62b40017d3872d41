// A worker the synchronize(module) tests start as real processes. Its first argument picks a
// scenario; it prints what went wrong and exits non-zero when anything does.
#include <string>

#include <torch/torch.h>

#include "lockstep/lockstep.h"
#include "support/rank_bytes.h"

using namespace lockstep::testing;

namespace {

// ---- synchronize(module) ----

void module_from(int root) {
  const int r = lockstep::rank();
  torch::manual_seed(r);
  Net net(4);
  for (int k = 0; k <= r; ++k) net->forward(torch::randn({5, 6}) * (r + 1));  // buffers differ
  // Tensors the collectives cannot take as they are: other dtypes, not contiguous.
  net->register_buffer("mask", torch::tensor({r == 0, r == 1, r == 2}));
  net->register_buffer("counts", torch::full({2}, 7 * r, torch::kShort));
  net->register_parameter("transposed", torch::randn({3, 2}).t());
  const bool differed = gather(module_bytes(*net))[root] != module_bytes(*net);
  if (r != root && !differed) fail("parameters equal root's before synchronize: nothing is tested");

  lockstep::synchronize(net, root);
  expect_same_as_root(root, module_bytes(*net), "parameters and buffers after synchronize");
  if (!net->fc1->weight.requires_grad() || !net->fc1->weight.is_leaf()) {
    fail("fc1.weight is no longer a leaf that requires grad");
  }
  lockstep::synchronize(*net, root);  // the Module& and shared_ptr forms compile and agree
  lockstep::synchronize(net.ptr(), root);
  expect_same_as_root(root, module_bytes(*net), "parameters after synchronizing again");
}

void mismatched_modules() {
  Net net(lockstep::rank() == 1 ? 5 : 4);
  expect_error<lockstep::MismatchError>("MismatchError", [&] { lockstep::synchronize(*net); });
  Net same(4);
  lockstep::synchronize(*same);  // the group is still usable afterwards
}

void mismatched_roots() {
  Net net(4);
  expect_error<lockstep::MismatchError>("MismatchError", [&] { lockstep::synchronize(*net, lockstep::rank() % 2); });
  expect_error<lockstep::Error>("Error", [&] { lockstep::synchronize(*net, 7); });
}
}  // namespace

int main(int argc, char** argv) {
  return run_scenario(argc, argv,
                      {{"module", module_from},
                       {"mismatched-modules", [](int) { mismatched_modules(); }},
                       {"mismatched-roots", [](int) { mismatched_roots(); }}});
}
