#!/usr/bin/env python3
"""interop_numpy_rng.py - oracle/pcg64 against numpy itself.

Owns: the broad check that dsv4q's C reimplementation of
np.random.default_rng(seed).integers(low, high, size=n, dtype=np.int64)
(oracle/pcg64.c) gives numpy's draws, over many seeds and bounds: every
Engram multiplier draw the V4.1 reference can make for layer ids 0..63 and
a spread of compressed vocabulary sizes (seed 10007 * L, bound
max(1, (int64 max // V) // 2)), plus random seeds of one to three 32-bit
words and random bounds covering all of numpy's range classes (the 32-bit
Lemire path, rng == 2^32 - 1, the 64-bit Lemire path, negative lows).
Refuses: to compute any expected value itself; every number in the vector
file comes from numpy.

Needs: python3 with numpy (make pydeps), and the built C test binary
(build/tests/test_v41_rng), whose numpy_vector_file case reads the file
named by DSV4Q_RNG_VECTORS. Line format (the C side parses it):
    w_0 w_1 ... ; low high n ; v_1 ... v_n
with w the seed's little-endian uint32 words.

Usage, from the repository root:
    python3 tests/interop_numpy_rng.py [BINARY]
Exit status 0 when the binary reproduced every line.
"""
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

I64 = np.iinfo(np.int64)


def words(seed):
    if seed == 0:
        return [0]
    out = []
    while seed:
        out.append(seed & 0xFFFFFFFF)
        seed >>= 32
    return out


def line(seed, low, high, n):
    v = np.random.default_rng(seed).integers(low=low, high=high, size=(n,), dtype=np.int64)
    return "%s ; %d %d %d ; %s\n" % (" ".join(map(str, words(seed))), low, high, n, " ".join(str(int(x)) for x in v))


def vectors():
    out = []
    # every multiplier draw of the Engram hash for these sizes and layers
    for V in (1, 2, 3, 40, 321, 1000, 99092, 129280, 2**31 - 1):
        bound = max(1, (I64.max // V) // 2)
        for L in range(64):
            out.append(line(10007 * L, 0, bound, 8))
    rnd = random.Random(20260910)
    spans = [1, 2, 3, 7, 10, 1000, 2**31, 2**32 - 1, 2**32, 2**32 + 1, 2**33 + 17, 2**62, 2**63 - 1]
    for _ in range(400):
        seed = rnd.choice([rnd.randrange(2**32), rnd.randrange(2**64), rnd.randrange(2**96)])
        low = rnd.choice([0, 0, 1, -7, -2**40, 2**40, -2**62])
        span = rnd.choice(spans + [rnd.randrange(1, 2**63)])
        high = low + span
        if high > I64.max:
            continue
        out.append(line(seed, low, high, rnd.randrange(1, 40)))
    return out


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/tests/test_v41_rng"
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rng_vectors.txt")
        with open(path, "w") as f:
            f.writelines(vectors())
        env = dict(os.environ, DSV4Q_RNG_VECTORS=path)
        r = subprocess.run([binary], env=env, capture_output=True, text=True)
        sys.stdout.write(r.stdout[-3000:])
        sys.stderr.write(r.stderr[-3000:])
        if r.returncode != 0 or "SKIPPED" in r.stdout or "numpy vectors:" not in r.stdout:
            print("interop_numpy_rng: FAILED")
            return 1
    print("interop_numpy_rng: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
