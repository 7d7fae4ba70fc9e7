##===- runtime/Package.cmake - Install rules and kvqConfig ----*- cmake -*-===##
#
# `cmake --install` puts libkvq_runtime, its headers, kvq-opt and the CMake
# package (kvqConfig.cmake, KVQSpec.cmake) under the prefix, so that a host
# application can `find_package(kvq)` and use kvq::runtime and kvq_add_spec.
#
##===----------------------------------------------------------------------===##

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(KVQ_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kvq)

install(TARGETS KVQRuntime EXPORT kvqTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES
  include/kvq/kvq.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvq)
install(FILES
  include/kvq/Runtime/Artifact.h
  include/kvq/Runtime/Backend.h
  include/kvq/Runtime/Cache.h
  include/kvq/Runtime/DeviceDriver.h
  include/kvq/Runtime/Runtime.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvq/Runtime)
# What the C++ headers above include of the runtime's foundations.
install(FILES include/kvq/ABI/ManifestSchema.h include/kvq/ABI/CacheLayout.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvq/ABI)
install(FILES include/kvq/Support/Status.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvq/Support)
# The compiler kvq_add_spec runs (the target is defined in tools/).
install(PROGRAMS $<TARGET_FILE:kvq-opt> DESTINATION ${CMAKE_INSTALL_BINDIR})

install(EXPORT kvqTargets NAMESPACE kvq::
  DESTINATION ${KVQ_INSTALL_CMAKEDIR})
configure_package_config_file(
  ${KVQ_SOURCE_DIR}/cmake/kvqConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/kvqConfig.cmake
  INSTALL_DESTINATION ${KVQ_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/kvqConfigVersion.cmake
  VERSION 0.1.0 COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/kvqConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/kvqConfigVersion.cmake
  ${KVQ_SOURCE_DIR}/cmake/KVQSpec.cmake
  DESTINATION ${KVQ_INSTALL_CMAKEDIR})
