#include "lockstep/ddp/scripted_module.h"

#include <torch/script.h>

#include "lockstep/error.h"

namespace lockstep {
namespace {

// Registers `script`'s own parameters and buffers on `module`, and a child module for each
// of its submodules, so that names come out dotted as in Python ("features.0.weight").
void mirror(const torch::jit::Module& script, torch::nn::Module& module) {
  for (const auto& parameter : script.named_parameters(/*recurse=*/false)) {
    module.register_parameter(parameter.name, parameter.value, parameter.value.requires_grad());
  }
  for (const auto& buffer : script.named_buffers(/*recurse=*/false)) module.register_buffer(buffer.name, buffer.value);
  for (const auto& child : script.named_children()) {
    auto mirrored = std::make_shared<torch::nn::Module>(child.name);
    mirror(child.value, *mirrored);
    module.register_module(child.name, mirrored);
  }
}

}  // namespace

ScriptedModuleImpl::ScriptedModuleImpl(const torch::jit::Module& script)
    : torch::nn::Module("ScriptedModule"), script_(std::make_unique<torch::jit::Module>(script)) {
  mirror(*script_, *this);
  torch::nn::Module::train(script_->is_training());
}

ScriptedModuleImpl::~ScriptedModuleImpl() = default;

torch::Tensor ScriptedModuleImpl::forward(const torch::Tensor& input) {
  const auto output = script_->forward({input});
  if (!output.isTensor()) {
    throw ConfigError("the scripted module's forward() returned a " + output.tagKind() + ", not one tensor");
  }
  return output.toTensor();
}

void ScriptedModuleImpl::train(bool on) {
  script_->train(on);
  torch::nn::Module::train(on);
}

torch::jit::Module& ScriptedModuleImpl::script() { return *script_; }

ScriptedModule load_scripted_module(const std::string& path) {
  try {
    return ScriptedModule(torch::jit::load(path));
  } catch (const c10::Error& error) {
    std::string reason = error.what_without_backtrace();
    reason = reason.substr(0, reason.find('\n'));
    throw DataError(path + ": not a TorchScript module saved with torch.jit.save (" + reason + ")");
  }
}

}  // namespace lockstep
