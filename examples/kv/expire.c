/* kv_server: keys that expire. SPDX-License-Identifier: LGPL-2.1-or-later */
#include "store.h"
