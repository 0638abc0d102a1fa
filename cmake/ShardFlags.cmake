# shard_flags: warnings and sanitizers shared by every target of this project (never exported).
add_library(shard_flags INTERFACE)
target_compile_options(shard_flags INTERFACE -Wall -Wextra -Wshadow -Wstrict-prototypes
                       $<$<BOOL:${SHARD_WERROR}>:-Werror>)

if(SHARD_SANITIZE)
  string(REPLACE "," ";" _shard_sans "${SHARD_SANITIZE}")
  foreach(_s IN LISTS _shard_sans)
    if(NOT _s MATCHES "^(address|undefined|thread)$")
      message(FATAL_ERROR "SHARD_SANITIZE: unknown sanitizer '${_s}' (address, undefined, thread)")
    endif()
  endforeach()
  if("thread" IN_LIST _shard_sans AND "address" IN_LIST _shard_sans)
    message(FATAL_ERROR "SHARD_SANITIZE: thread cannot be combined with address")
  endif()
  string(REPLACE ";" "," _shard_san_flag "${_shard_sans}")
  # Sanitizers must see every object, the library's included, so they apply globally.
  add_compile_options(-fsanitize=${_shard_san_flag} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_shard_san_flag})
endif()
