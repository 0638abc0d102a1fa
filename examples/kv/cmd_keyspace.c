/* kv_server: commands of the keyspace as a whole (SCAN KEYS RANDOMKEY FLUSHDB FLUSHALL MEMORY), run
 * by the admin thread over every worker (scan.c). SPDX-License-Identifier: LGPL-2.1-or-later */
#include "server.h"

static const struct command table[] = {
    { "SCAN", -2, CMD_ADMIN, 0, NULL, NULL, scan_scan, 0, large_reply_bound, false, false },
    { "KEYS", 2, CMD_ADMIN, 0, NULL, NULL, scan_keys, 0, large_reply_bound, false, false },
    { "RANDOMKEY", 1, CMD_ADMIN, 0, NULL, NULL, scan_randomkey, 0, NULL, false, false },
    { "FLUSHDB", -1, CMD_ADMIN, 0, NULL, NULL, scan_flush, 0, NULL, false, false },
    { "FLUSHALL", -1, CMD_ADMIN, 0, NULL, NULL, scan_flush, 0, NULL, false, false },
    { "MEMORY", -2, CMD_ADMIN, 0, NULL, NULL, scan_memory, 0, NULL, false, false },
};

const struct command_set cmds_keyspace = { table, sizeof table / sizeof table[0] };
