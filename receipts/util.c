/*
 * util.c - the helper every file of receipts/ leans on, below all of
 * them: libsodium's one-time initialisation.
 *
 * It sat in receipts.c, which made keys.c and receipts.c call each other
 * (key loading one way, this the other). Here they depend on nothing of
 * receipts/, so the files of the room call downwards only:
 *     verify.c -> receipts.c -> keys.c -> util.c -> base/
 *     capture_pins.c -> pin.c -> util.c
 */
#include <sodium.h>

#include "base/util.h"
#include "receipts/receipts_internal.h"

int dsv4q_receipt_sodium(char *err, size_t errlen)
{
    if (sodium_init() < 0) return dsv4q_errf(err, errlen, "libsodium failed to initialize");
    return 0;
}


