#pragma once

#include <memory>
#include <string>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

// torch/script.h is heavy; only scripted_module.cpp needs the whole of it.
namespace torch::jit {
struct Module;
}  // namespace torch::jit

namespace lockstep {

/// A TorchScript module (Python's `torch.jit.script(model).save(path)`, loaded with
/// load_scripted_module or torch::jit::load) seen as a torch::nn::Module, so that
/// DistributedDataParallel, the Trainer, checkpoints and synchronize() take it as they take
/// any module. It holds the scripted module's own parameter and buffer tensors (not copies)
/// under the same dotted names as Python's state_dict(); train()/eval() switch the scripted
/// module's mode; forward() runs its scripted forward on one tensor.
class ScriptedModuleImpl : public torch::nn::Module {
 public:
  explicit ScriptedModuleImpl(const torch::jit::Module& script);
  ~ScriptedModuleImpl() override;

  /// The scripted forward(input), which must return one tensor.
  torch::Tensor forward(const torch::Tensor& input);
  void train(bool on = true) override;
  /// The scripted module, sharing its tensors with this one (save() it to keep the weights).
  torch::jit::Module& script();

 private:
  std::unique_ptr<torch::jit::Module> script_;
};
TORCH_MODULE(ScriptedModule);

/// Loads a TorchScript file; DataError naming the file when it cannot be read or is not one.
ScriptedModule load_scripted_module(const std::string& path);

}  // namespace lockstep
