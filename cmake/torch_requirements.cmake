# What the libtorch that find_package(Torch) found asks of the build, whichever it is:
# Debian's, pytorch.org's archive or a wheel's torch/ folder (docs/GPU.md, README).

# The C++ standard: the newer of C++17 and the one Torch's headers require. Torch states its
# minimum only as an #error in torch/all.h (`__cplusplus < 201703L`), not in its CMake files.
# A newer standard asked for with -DCMAKE_CXX_STANDARD is kept.
set(lockstep_torch_header_standard 14)
foreach(dir IN LISTS TORCH_INCLUDE_DIRS)
  if(EXISTS "${dir}/torch/all.h")
    file(STRINGS "${dir}/torch/all.h" checks REGEX "__cplusplus < 20[0-9][0-9][0-9][0-9]L")
    foreach(check IN LISTS checks)
      string(REGEX MATCH "__cplusplus < 20([0-9][0-9])" _ "${check}")
      if(CMAKE_MATCH_1 GREATER lockstep_torch_header_standard)
        set(lockstep_torch_header_standard ${CMAKE_MATCH_1})
      endif()
    endforeach()
  endif()
endforeach()
set(lockstep_torch_standard 17)
if(lockstep_torch_header_standard GREATER lockstep_torch_standard)
  set(lockstep_torch_standard ${lockstep_torch_header_standard})
endif()
if(NOT CMAKE_CXX_STANDARD OR CMAKE_CXX_STANDARD LESS lockstep_torch_standard)
  set(CMAKE_CXX_STANDARD ${lockstep_torch_standard})
endif()
message(STATUS "lockstep: C++${CMAKE_CXX_STANDARD} (Torch's headers ask for C++${lockstep_torch_header_standard})")

# The C++ ABI: Debian's libraries that lockstep links (Gloo, GTest, toml++, Open MPI) use the
# compiler's default _GLIBCXX_USE_CXX11_ABI; a libtorch built with the other one fails only at
# link time, with undefined references to std::string functions that name no culprit.
string(REGEX MATCH "_GLIBCXX_USE_CXX11_ABI=([01])" torch_abi_flag "${TORCH_CXX_FLAGS}")
if(torch_abi_flag)
  set(lockstep_torch_abi ${CMAKE_MATCH_1})
  set(probe "${CMAKE_BINARY_DIR}/CMakeFiles/lockstep_abi_probe.cpp")
  file(WRITE "${probe}" "#include <string>\n")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -E -dM "${probe}" OUTPUT_VARIABLE macros RESULT_VARIABLE failed)
  if(NOT failed AND macros MATCHES "#define _GLIBCXX_USE_CXX11_ABI ([01])")
    set(lockstep_system_abi ${CMAKE_MATCH_1})
    if(NOT lockstep_system_abi STREQUAL lockstep_torch_abi)
      # The leading space keeps CMake from wrapping the message: it stays one line.
      message(FATAL_ERROR " lockstep: Torch at ${Torch_DIR} is built with _GLIBCXX_USE_CXX11_ABI=${lockstep_torch_abi} (its TORCH_CXX_FLAGS) but this system's libraries (Gloo, GTest, toml++, Open MPI) use _GLIBCXX_USE_CXX11_ABI=${lockstep_system_abi}: use a libtorch built with _GLIBCXX_USE_CXX11_ABI=${lockstep_system_abi} (pytorch.org's cxx11-abi archive, or a pip wheel of torch 2.7 or newer) and point CMAKE_PREFIX_PATH at it")
    endif()
  endif()
endif()
