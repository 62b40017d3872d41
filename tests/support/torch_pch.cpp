// The source CMake makes libtorch's precompiled header with (tests/CMakeLists.txt); the
// test programs reuse that header instead of each parsing libtorch's.
#include <torch/torch.h>
