/* shard_version, shard_version_string. SPDX-License-Identifier: LGPL-2.1-or-later */
#include "shard/common.h"

#define STR_(x) #x
#define STR(x) STR_(x)

SHARD_API unsigned shard_version(void)
{
    return SHARD_VERSION_HEX;
}

SHARD_API const char *shard_version_string(void)
{
    return STR(SHARD_VERSION_MAJOR) "." STR(SHARD_VERSION_MINOR) "." STR(SHARD_VERSION_PATCH);
}
