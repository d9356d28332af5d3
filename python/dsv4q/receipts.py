"""Signed receipts from Python: ``dsv4q_receipt_write`` (receipts/receipts.h)
over ctypes, so a pytest run leaves the same hash-chained, Ed25519-signed
record in SQLite as `dsv4q qualify --receipts DB` (docs/receipts.md), and
`dsv4q receipts verify --db DB` checks it.

Owns only the argument marshalling; hashing, signing and the database are
the C library's.
"""
from __future__ import annotations

import ctypes
import hashlib
import json

from ._lib import DSV4QError, enc, errbuf, lib

_FIELDS = ["kind", "command_line", "backend_id", "backend_version", "backend_sha256", "checkpoint_pin_json",
           "tokens_pin", "config_json", "profile", "widths", "gate_file", "gate_sha256", "metrics_json", "verdict"]


class _Receipt(ctypes.Structure):
    _fields_ = [(f, ctypes.c_char_p) for f in _FIELDS]


lib.dsv4q_receipt_write.restype = ctypes.c_int
lib.dsv4q_receipt_write.argtypes = [ctypes.c_char_p, ctypes.POINTER(_Receipt), ctypes.c_char_p,
                                    ctypes.POINTER(ctypes.c_longlong), ctypes.c_char_p, ctypes.c_size_t]


def write(db, *, kind="qualify", verdict, metrics, key=None, **fields):
    """Append one receipt to ``db`` (created if needed). ``verdict``: pass,
    fail, info or error; ``metrics``: a JSON-serialisable object; other
    fields by name (command_line, backend_id, profile, widths, gate_file,
    ...). ``key``: the signing key path (None = the default key; "" =
    unsigned). Returns the receipt id."""
    unknown = set(fields) - set(_FIELDS)
    if unknown:
        raise DSV4QError("dsv4q.receipts.write: unknown field(s) %s" % ", ".join(sorted(unknown)))
    if fields.get("gate_file") and not fields.get("gate_sha256"):
        with open(fields["gate_file"], "rb") as f:
            fields["gate_sha256"] = hashlib.sha256(f.read()).hexdigest()
    r = _Receipt()
    r.kind, r.verdict = enc(kind), enc(verdict)
    r.metrics_json = enc(json.dumps(metrics, sort_keys=True, allow_nan=False, default=str))
    for k, v in fields.items():
        setattr(r, k, enc(v) if v is not None else None)
    rid = ctypes.c_longlong(0)
    err = errbuf()
    if lib.dsv4q_receipt_write(enc(db), ctypes.byref(r), enc(key) if key is not None else None, ctypes.byref(rid),
                               err, len(err)):
        raise DSV4QError(err.value.decode())
    return rid.value
