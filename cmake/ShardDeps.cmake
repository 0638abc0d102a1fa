# Dependencies come from pkg-config; each failure names the Debian package that provides it.
find_package(PkgConfig)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "pkg-config not found: apt-get install -y pkg-config")
endif()
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)

function(shard_require_pkg target module debian_pkg)
  pkg_check_modules(${target} QUIET IMPORTED_TARGET GLOBAL ${module})
  if(NOT ${target}_FOUND)
    message(FATAL_ERROR "shard needs ${module} (pkg-config module '${module}' not found): "
                        "apt-get install -y ${debian_pkg}")
  endif()
endfunction()

# liburcu.pc is the memb flavour (membarrier-based readers, no signals).
shard_require_pkg(URCU liburcu liburcu-dev)
shard_require_pkg(XXHASH libxxhash libxxhash-dev)
if(SHARD_BUILD_TESTS)
  shard_require_pkg(CRITERION criterion libcriterion-dev)
endif()
# libsodium's SipHash-2-4: what test_kv_hash checks kv_server's own SipHash against (siphash.h).
if(SHARD_BUILD_TESTS)
  shard_require_pkg(SODIUM libsodium libsodium-dev)
endif()
