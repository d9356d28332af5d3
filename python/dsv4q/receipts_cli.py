"""``dsv4q-receipts``: receipt verification from an installed package, with no
dsv4q binary at hand (dsv4q.receipts.verify, the library's own verifier).

    dsv4q-receipts verify [ID | --all] [--pubkey FILE] [--allow-unsigned] [--db FILE]

Prints the verifier's report; exit 0 OK, 1 FAILED or NOT VERIFIED (a receipt
with no verified signature, without --allow-unsigned), 2 usage or unreadable database / key,
as `dsv4q receipts verify` (docs/receipts.md).
"""
from __future__ import annotations

import argparse
import sys


def main(argv=None):
    ap = argparse.ArgumentParser(prog="dsv4q-receipts", description="verify a dsv4q receipts database")
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verify", help="verify the hash chain and signatures")
    v.add_argument("id", nargs="?", type=int, default=0, help="one receipt (and its link to ID-1); default all")
    v.add_argument("--all", action="store_true", help="every receipt (the default)")
    v.add_argument("--pubkey", metavar="FILE", default=None, help="every receipt must be signed by this key")
    v.add_argument("--allow-unsigned", action="store_true",
                   help="pass receipts with no verified signature (else NOT VERIFIED)")
    v.add_argument("--db", metavar="FILE", default=None, help="receipts database ($DSV4Q_DB, else ./dsv4q.db)")
    a = ap.parse_args(argv)
    if a.all and a.id:
        ap.error("an ID and --all exclude each other")
    if a.id < 0:
        ap.error("ID must be positive")
    from . import DSV4QError, receipts
    try:
        r = receipts.verify(a.db, id=a.id, pubkey=a.pubkey, allow_unsigned=a.allow_unsigned)
    except DSV4QError as e:
        print("dsv4q-receipts verify: %s" % e, file=sys.stderr)
        return 2
    sys.stdout.write(r.report)
    return 0 if r.ok else 1


if __name__ == "__main__":
    sys.exit(main())
