/* kv_server: commands of the keyspace as a whole (SCAN KEYS FLUSHDB FLUSHALL). SPDX-License-Identifier: LGPL-2.1-or-later */
#include "server.h"

const struct command_set cmds_keyspace = { NULL, 0 };
