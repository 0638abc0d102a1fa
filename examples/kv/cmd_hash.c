/* kv_server: commands of hashes (HSET HGET HGETALL HDEL HLEN). SPDX-License-Identifier: LGPL-2.1-or-later */
#include "server.h"

const struct command_set cmds_hash = { NULL, 0 };
