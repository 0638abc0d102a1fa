# Install rules: headers, library, an exported CMake package and a pkg-config file.
include(CMakePackageConfigHelpers)

set(SHARD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/shard)
# One export set a library, so that a consumer of the shared one loads nothing that names the static
# one's private dependencies (liburcu, libxxhash: dev packages it does not need).
if(TARGET shard_shared)
  install(TARGETS shard_shared EXPORT shardSharedTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT shardSharedTargets NAMESPACE shard:: DESTINATION ${SHARD_CMAKE_DIR})
endif()
if(TARGET shard_static)
  install(TARGETS shard_static EXPORT shardStaticTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT shardStaticTargets NAMESPACE shard:: DESTINATION ${SHARD_CMAKE_DIR})
endif()
install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(SHARD_TSAN_SUPPRESSIONS ${CMAKE_INSTALL_DATADIR}/shard/tsan.supp)
configure_package_config_file(cmake/shardConfig.cmake.in
  ${PROJECT_BINARY_DIR}/shardConfig.cmake INSTALL_DESTINATION ${SHARD_CMAKE_DIR}
  PATH_VARS SHARD_TSAN_SUPPRESSIONS)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/shardConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/shardConfig.cmake ${PROJECT_BINARY_DIR}/shardConfigVersion.cmake
  DESTINATION ${SHARD_CMAKE_DIR})

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
# shard.pc's -lshard is the shared library wherever both are installed, and `pkg-config --static`
# can only add to Libs, not change it: the static library has a file of its own, which names the
# archive by its path and needs liburcu and libxxhash always (Requires, not Requires.private), so that
# `pkg-config --libs shard-static` alone is a working link line.
if(TARGET shard_static)
  set(SHARD_STATIC_FILE ${CMAKE_STATIC_LIBRARY_PREFIX}shard${CMAKE_STATIC_LIBRARY_SUFFIX})
  configure_file(cmake/shard-static.pc.in ${PROJECT_BINARY_DIR}/shard-static.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/shard-static.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()

# For users who run their program under ThreadSanitizer (docs/using.md: Sanitizing your program): the
# suppressions of races inside liburcu, whose inline read side shard compiles in. The .pc files name
# it (tsan_suppressions), and the CMake package (shard_TSAN_SUPPRESSIONS).
install(FILES tests/tsan.supp DESTINATION ${CMAKE_INSTALL_DATADIR}/shard)
