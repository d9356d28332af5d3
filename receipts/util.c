/*
 * util.c - the two helpers every file of receipts/ leans on, below all of
 * them: libsodium's one-time initialisation, and the old name of the error
 * formatter.
 *
 * They sat in receipts.c, which made keys.c and receipts.c call each other
 * (key loading one way, these the other). Here they depend on nothing of
 * receipts/, so the files of the room call downwards only:
 *     verify.c -> receipts.c -> keys.c -> util.c -> base/
 *     capture_pins.c -> pin.c -> util.c
 */
#include <stdarg.h>
#include <stdio.h>
#include <sodium.h>

#include "base/util.h"
#include "receipts/receipts_internal.h"

int dsv4q_rcpt_sodium(char *err, size_t errlen)
{
    if (sodium_init() < 0) return dsv4q_errf(err, errlen, "libsodium failed to initialize");
    return 0;
}

/* receipts/ itself calls dsv4q_errf; this name stays for cli/cmd_receipts.c
 * until it does too. */
void dsv4q_rcpt_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (!err || errlen == 0) return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
