/*
 * capture_pins.h - the pins a capture states of its checkpoint (config and
 * weight-file hashes), derived from the receipts' checkpoint pin
 * (receipts/pin.c) so a capture and a receipt name the same bytes the same
 * way. Moved out of harness/capture/capture.c: the harness may not include
 * receipts/ (layering, docs/architecture.md).
 */
#ifndef DSV4Q_CAPTURE_PINS_H
#define DSV4Q_CAPTURE_PINS_H

#include <stddef.h>

/* The pins of a checkpoint directory as a capture states them:
 * config_sha = SHA-256 of config.json; weights_sha (NULL: not computed) =
 * SHA-256 of the sha256sum listing of its weight files (reads every byte).
 * pin_json (may be NULL) receives dsv4q_pin_checkpoint's JSON, from which
 * weights_sha is derived (the receipt records it). 0 or -1 + message. */
int dsv4q_capture_pins(const char *model_dir, char config_sha[65], char weights_sha[65], char **pin_json,
                       char *err, size_t errlen);

#endif
