# `make cuda-syntax`: every CUDA-only source (device_call_cuda.cpp, stream_marks_cuda.cpp,
# nccl_transport.cpp) compiled without linking, against the CUDA toolkit and libtorch's CUDA headers, so that machines without a GPU or a CUDA
# libtorch keep that code compiling. Debian's CPU libtorch ships c10's CUDA headers but not
# the one its CUDA build generates (cuda_cmake_macros.h), hence C10_CUDA_NO_CMAKE_CONFIGURE_FILE.
find_package(CUDAToolkit QUIET)
# The CUDA-only sources, beside their CPU twins; src/CMakeLists.txt compiles them in the CUDA build, the NCCL
# ones where it found NCCL.
set(LOCKSTEP_CUDA_SOURCES ${PROJECT_SOURCE_DIR}/src/comm/transports/device_call_cuda.cpp
                          ${PROJECT_SOURCE_DIR}/src/comm/transports/stream_marks_cuda.cpp)
set(LOCKSTEP_NCCL_SOURCES ${PROJECT_SOURCE_DIR}/src/comm/transports/nccl_transport.cpp)
if(CUDAToolkit_FOUND)
  set(cuda_syntax_includes
    "$<TARGET_PROPERTY:torch,INTERFACE_INCLUDE_DIRECTORIES>"
    ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src ${CUDAToolkit_INCLUDE_DIRS})
  add_custom_target(cuda_syntax
    COMMAND ${CMAKE_CXX_COMPILER} -std=c++${CMAKE_CXX_STANDARD} -fsyntax-only -Wall -DC10_CUDA_NO_CMAKE_CONFIGURE_FILE
            "-I$<JOIN:${cuda_syntax_includes},;-I>" ${LOCKSTEP_CUDA_SOURCES} ${LOCKSTEP_NCCL_SOURCES}
    COMMAND ${CMAKE_COMMAND} -E echo "cuda-syntax: the CUDA sources compile"
    COMMAND_EXPAND_LISTS VERBATIM)
else()
  add_custom_target(cuda_syntax
    COMMAND ${CMAKE_COMMAND} -E echo "cuda-syntax: no CUDA toolkit found; nothing to check")
endif()
