"""Signed receipts from Python: ``dsv4q_receipt_write`` (receipts/receipts.h)
over ctypes, so a pytest run leaves the same hash-chained, Ed25519-signed
record in SQLite as `dsv4q qualify --receipts DB` (docs/receipts.md), and
``verify`` (the library's verifier, ``dsv4q_capi_receipts_verify``; also the
``dsv4q-receipts verify`` script and `dsv4q receipts verify`) checks it.

Owns only the argument marshalling; hashing, signing, verification and the
database are the C library's.
"""
from __future__ import annotations

import ctypes
import hashlib
import json

from ._lib import DSV4QError, enc, errbuf, lib, take_json

_FIELDS = ["kind", "command_line", "backend_id", "backend_version", "backend_sha256", "checkpoint_pin_json",
           "tokens_pin", "config_json", "profile", "widths", "gate_file", "gate_sha256", "metrics_json", "verdict"]


class _Receipt(ctypes.Structure):
    _fields_ = [(f, ctypes.c_char_p) for f in _FIELDS]


lib.dsv4q_capi_receipts_verify.restype = ctypes.c_void_p
lib.dsv4q_capi_receipts_verify.argtypes = [ctypes.c_char_p, ctypes.c_longlong, ctypes.c_char_p, ctypes.c_int,
                                           ctypes.c_char_p, ctypes.c_size_t]
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


class VerifyResult:
    """Outcome of ``verify``. ``ok``: True only when every receipt's hash,
    chain link and signature checked out (``status`` "OK"); ``status`` is
    "FAILED" for a problem (tampering, damage, a bad or missing signature)
    and "NOT VERIFIED" for receipts without a verified signature (unsigned,
    or signed by a key not given) that were not allowed.
    Counts: ``checked``, ``problems``, ``signatures_valid``, ``unsigned``,
    ``not_checked`` (signed by a key that was not given); ``head_id`` /
    ``head_hash``: the newest receipt checked; ``report``: the verifier's
    text (one line per problem or note, then the summary line)."""

    def __init__(self, d):
        self.__dict__.update(d)

    def __bool__(self):
        return bool(self.ok)

    def __repr__(self):
        return "VerifyResult(%s, checked=%d, problems=%d, unsigned=%d)" % (
            self.status, self.checked, self.problems, self.unsigned)


def verify(db=None, *, id=0, pubkey=None, allow_unsigned=False):
    """Verify the receipts database ``db`` (None = $DSV4Q_DB, else
    ./dsv4q.db) with the library's verifier, as `dsv4q receipts verify`
    does. ``id``: 0 = the whole chain, N = receipt N and its link to N-1.
    ``pubkey``: a .pub file every receipt must be signed by (strict); None =
    the default key's .pub if there is one (lenient: a receipt it cannot
    verify, unsigned or signed by another key, makes the result NOT
    VERIFIED unless ``allow_unsigned``); "" = no signature checks. Returns a VerifyResult (falsy unless OK); raises DSV4QError
    when the database cannot be read as a receipts database, the id does
    not exist or the key is unreadable."""
    if not isinstance(id, int) or isinstance(id, bool) or id < 0:
        raise DSV4QError("dsv4q.receipts.verify: id must be an integer >= 0 (got %r)" % (id,))
    err = errbuf()
    ptr = lib.dsv4q_capi_receipts_verify(enc(str(db)) if db is not None else None, id,
                                         enc(str(pubkey)) if pubkey is not None else None,
                                         1 if allow_unsigned else 0, err, len(err))
    return VerifyResult(take_json(ptr, err))
