# Install rules: headers, library, an exported CMake package and a pkg-config file.
include(CMakePackageConfigHelpers)

install(TARGETS shard EXPORT shardTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(SHARD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/shard)
install(EXPORT shardTargets NAMESPACE shard:: DESTINATION ${SHARD_CMAKE_DIR})
configure_package_config_file(cmake/shardConfig.cmake.in
  ${PROJECT_BINARY_DIR}/shardConfig.cmake INSTALL_DESTINATION ${SHARD_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/shardConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/shardConfig.cmake ${PROJECT_BINARY_DIR}/shardConfigVersion.cmake
  DESTINATION ${SHARD_CMAKE_DIR})

if(BUILD_SHARED_LIBS)
  set(SHARD_PC_CFLAGS "")
else()
  set(SHARD_PC_CFLAGS "-DSHARD_STATIC")
endif()
# Relocatable: the prefix is found from where the .pc file lies, so `cmake --install --prefix P`
# (which cannot rewrite a configured file) still gives pkg-config the right paths.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(SHARD_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _shard_pc_up "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  string(REGEX REPLACE "/$" "" _shard_pc_up "${_shard_pc_up}")
  set(SHARD_PC_PREFIX "\${pcfiledir}/${_shard_pc_up}")
endif()
configure_file(cmake/shard.pc.in ${PROJECT_BINARY_DIR}/shard.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/shard.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
