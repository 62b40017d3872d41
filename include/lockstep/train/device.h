#pragma once

#include <string>

#include <torch/types.h>

namespace lockstep::train {

/// The device a worker trains on (`lockstep train --device`): "cpu"; "cuda", the GPU of
/// local rank r (cuda:r mod the visible GPUs, so that ranks share GPUs when there are fewer);
/// "cuda:N"; or "auto", cuda when a GPU is visible, else cpu. CUDA that cannot be used
/// throws ConfigError saying why, starting with `choice`: a libtorch built without CUDA, or
/// no visible GPU.
torch::Device choose_device(const std::string& choice, int local_rank);

/// GPUs this process sees (0 in a CPU build).
int visible_gpus();

/// Makes kernels deterministic, so that a GPU run and its resumed twin agree bit for bit as
/// CPU runs do: cuDNN's deterministic algorithms without benchmarking, and libtorch's
/// deterministic implementations (a warning, not an error, for an op without one). cuBLAS
/// reads CUBLAS_WORKSPACE_CONFIG at its first use: this sets it (":4096:8") unless the user
/// has, so call it before any GPU work. Slower on a GPU; changes nothing on the CPU.
void use_deterministic_algorithms();

}  // namespace lockstep::train
