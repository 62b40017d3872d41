include(CMakePackageConfigHelpers)

# Installed, liblockstep still finds the NCCL it was linked against: a torch wheel's folder
# is on no loader path (in the build tree, CMake's build RPATH names it). The tool and
# users' programs reach NCCL only through liblockstep, so its RUNPATH is the one needed.
if(LOCKSTEP_NCCL)
  get_filename_component(nccl_lib_dir "${NCCL_LIBRARY}" DIRECTORY)
  if(NOT nccl_lib_dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
    set_property(TARGET lockstep APPEND PROPERTY INSTALL_RPATH "${nccl_lib_dir}")
  endif()
endif()

install(TARGETS lockstep EXPORT lockstepTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/lockstep DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/lockstep)
install(EXPORT lockstepTargets NAMESPACE lockstep:: DESTINATION ${config_dir})
configure_package_config_file(cmake/lockstepConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/lockstepConfig.cmake INSTALL_DESTINATION ${config_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/lockstepConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/lockstepConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/lockstepConfigVersion.cmake DESTINATION ${config_dir})
install(FILES data/Data.toml DESTINATION ${CMAKE_INSTALL_DATADIR}/lockstep)
