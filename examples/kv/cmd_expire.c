/* kv_server: commands of expiry (EXPIRE PEXPIRE EXPIREAT TTL PTTL PERSIST). SPDX-License-Identifier: LGPL-2.1-or-later */
#include "server.h"

const struct command_set cmds_expire = { NULL, 0 };
