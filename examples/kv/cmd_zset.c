/* kv_server: commands of sorted sets (ZADD ZPOPMIN ZRANGE ZSCORE ZCARD). SPDX-License-Identifier: LGPL-2.1-or-later */
#include "server.h"

const struct command_set cmds_zset = { NULL, 0 };
