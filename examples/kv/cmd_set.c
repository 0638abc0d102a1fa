/* kv_server: commands of sets (SADD SPOP SMEMBERS SCARD SISMEMBER). SPDX-License-Identifier: LGPL-2.1-or-later */
#include "server.h"

const struct command_set cmds_set = { NULL, 0 };
