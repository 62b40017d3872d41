# Whose Gloo lockstep builds against. One process must hold one Gloo: a libtorch that links
# its own Gloo into libtorch_cpu and exports its symbols (a pip torch's) would otherwise meet
# Debian's libgloo in the same process, and the loader would bind some calls to one copy and
# some to the other. Such a libtorch also ships Gloo's headers, so lockstep then builds
# against those and links libtorch_cpu for Gloo. Debian's libtorch links Debian's libgloo,
# and so does lockstep (src/comm/transports/gloo_compat.h covers the API differences).
set(LOCKSTEP_GLOO "auto" CACHE STRING "Whose Gloo to build against: auto, torch or debian")
set(LOCKSTEP_GLOO_FROM_TORCH OFF)
if(NOT LOCKSTEP_GLOO STREQUAL "debian")
  find_library(TORCH_CPU_LIBRARY torch_cpu HINTS "${TORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH)
  if(TORCH_CPU_LIBRARY AND EXISTS "${TORCH_INSTALL_PREFIX}/include/gloo/allreduce.h")
    execute_process(
      COMMAND sh -c "nm -D --defined-only '${TORCH_CPU_LIBRARY}' | grep -c ' _ZN4gloo9allreduce'"
      OUTPUT_VARIABLE torch_gloo_symbols OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(torch_gloo_symbols GREATER 0)
      set(LOCKSTEP_GLOO_FROM_TORCH ON)
    endif()
  endif()
endif()
if(LOCKSTEP_GLOO STREQUAL "torch" AND NOT LOCKSTEP_GLOO_FROM_TORCH)
  message(FATAL_ERROR "LOCKSTEP_GLOO=torch, but the libtorch found exports no Gloo (or ships no Gloo headers)")
endif()
if(LOCKSTEP_GLOO_FROM_TORCH)
  add_library(gloo INTERFACE IMPORTED)
  set_target_properties(gloo PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${TORCH_INSTALL_PREFIX}/include"
    INTERFACE_LINK_LIBRARIES "${TORCH_CPU_LIBRARY}")
  message(STATUS "lockstep: Gloo from libtorch (${TORCH_CPU_LIBRARY})")
else()
  find_package(Gloo REQUIRED)
  message(STATUS "lockstep: Gloo from Debian's libgloo")
endif()

# A libtorch that exports Gloo but ships no Gloo headers (the torch wheels since 2.x) leaves
# lockstep on Debian's libgloo with a second, newer Gloo in the process. Gloo's classes differ
# between the two (PrefixStore holds a reference in one, a shared_ptr in the other), so every
# Gloo call of lockstep's and of libgloo's own must bind to libgloo: named before libtorch in
# every program that links lockstep, libgloo is the copy the loader searches first.
set(lockstep_gloo_first "")
if(NOT LOCKSTEP_GLOO_FROM_TORCH)
  find_library(TORCH_CPU_LIBRARY torch_cpu HINTS "${TORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH)
  if(TORCH_CPU_LIBRARY)
    execute_process(
      COMMAND sh -c "nm -D --defined-only '${TORCH_CPU_LIBRARY}' | grep -c ' _ZN4gloo'"
      OUTPUT_VARIABLE torch_gloo_symbols OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(torch_gloo_symbols GREATER 0)
      get_target_property(lockstep_libgloo gloo LOCATION)
      set(lockstep_gloo_first "-Wl,--push-state,--no-as-needed,${lockstep_libgloo},--pop-state")
      message(STATUS "lockstep: ${TORCH_CPU_LIBRARY} exports Gloo too: ${lockstep_libgloo} goes before it")
    endif()
  endif()
endif()
