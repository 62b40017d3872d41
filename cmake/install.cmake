include(CMakePackageConfigHelpers)

# Installed, the library and the tool still find a libtorch that is on no loader path
# (pytorch.org's archive, a wheel's torch/lib with its NCCL and CUDA libraries): every folder
# outside the system's that they were linked from is in their RUNPATH. In the build tree,
# CMake's build RPATH does the same.
set_target_properties(lockstep lockstep_cli PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

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
