# NCCL for the device backend nccl: the one that libtorch loads, never a second copy. A pip torch
# loads the nvidia-nccl wheel's libnccl.so.2 beside it; linking that file (its soname)
# makes the loader share it. NCCL_ROOT (variable or environment) points elsewhere, e.g. at
# the NCCL a libtorch archive was built with.
# Sets LOCKSTEP_NCCL, NCCL_LIBRARY and NCCL_INCLUDE_DIR.
#
# The torch is found through TORCH_INSTALL_PREFIX (<site-packages>/torch), which
# find_package(Torch) sets; tests/nccl_search sets it to a fake wheel.
set(LOCKSTEP_NCCL OFF)
if(NOT LOCKSTEP_CUDA)
  return()
endif()

get_filename_component(torch_site "${TORCH_INSTALL_PREFIX}/.." ABSOLUTE)
# nvidia/nccl is where the nvidia-nccl-cu12 and -cu13 wheels put it; nvidia/cu13 is where
# CUDA 13 wheels put the toolkit's libraries.
set(nccl_beside_torch
  ${NCCL_ROOT} $ENV{NCCL_ROOT} ${torch_site}/nvidia/nccl ${torch_site}/nvidia/cu13)

# NO_DEFAULT_PATH: otherwise CMAKE_PREFIX_PATH, CMAKE_LIBRARY_PATH and the system's folders
# come first, and a libnccl.so there (another NCCL) wins. NAMES_PER_DIR: the first folder
# with either name wins (a wheel has only libnccl.so.2, an NCCL_ROOT may have libnccl.so).
find_library(NCCL_LIBRARY NAMES libnccl.so.2 nccl NAMES_PER_DIR
  PATHS ${nccl_beside_torch} PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
if(NOT NCCL_LIBRARY)
  # No NCCL beside torch (a libtorch built against the system's): the rest of the system.
  find_library(NCCL_LIBRARY NAMES libnccl.so.2 nccl NAMES_PER_DIR)
endif()
if(NCCL_LIBRARY)
  # The header of the same NCCL, never another's (a system's /usr/include beside an NCCL found
  # elsewhere): <tree>/include beside <tree>/lib, <tree>/lib64 or <tree>/lib/<multiarch>.
  string(REGEX REPLACE "/lib(64)?(/[^/]+-linux-gnu)?/[^/]+$" "" nccl_tree "${NCCL_LIBRARY}")
  find_path(NCCL_INCLUDE_DIR nccl.h PATHS ${nccl_tree}/include NO_DEFAULT_PATH)
  if(NOT NCCL_INCLUDE_DIR)
    message(STATUS "lockstep: ${NCCL_LIBRARY} has no nccl.h in its tree; "
                   "NCCL_ROOT names an NCCL with both lib/ and include/")
  endif()
endif()

if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  set(LOCKSTEP_NCCL ON)
endif()
message(STATUS "lockstep: NCCL ${LOCKSTEP_NCCL} (${NCCL_LIBRARY}, ${NCCL_INCLUDE_DIR})")
