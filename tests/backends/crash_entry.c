/* crash_entry.c - a plugin whose entry point itself crashes (SIGSEGV). */
#include <signal.h>
#include "tests/backends/plugin_common.h"

const dsv4q_backend_v1 *dsv4q_backend_entry(void)
{
    raise(SIGSEGV);
    return NULL;
}
