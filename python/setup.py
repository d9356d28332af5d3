"""Build hook of the dsv4q Python package: bundle libdsv4q.so and the default
gate file into the wheel, so `pip install ./python` gives a self-contained
package on the machine that built the library.

The library is required: without it the build fails with a message saying
to run `make` (a package that installs "successfully" and then cannot
import is worse than a refused install). $DSV4Q_LIB names another
libdsv4q.so to bundle (e.g. one from `make install`).

The wheel carries a native library, so it is a platform wheel
(py3-none-<platform>: any Python 3, no CPython ABI, this machine's
architecture), never py3-none-any.
"""
import os
import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

try:   # setuptools >= 70.1 ships bdist_wheel itself
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:   # older setuptools: the wheel package's (absent = no wheel built here)
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:
        bdist_wheel = None

HERE = Path(__file__).resolve().parent


def library():
    """The libdsv4q.so to bundle: $DSV4Q_LIB, else the tree's build/. Exits
    with the reason when there is none."""
    lib = Path(os.environ.get("DSV4Q_LIB") or HERE.parent / "build" / "libdsv4q.so")
    if not lib.is_file():
        sys.exit("dsv4q: %s not found: build the library first (`make` in the dsv4q tree, %s), then "
                 "`pip install ./python` again; or set DSV4Q_LIB=/path/to/libdsv4q.so"
                 % (lib, HERE.parent))
    return lib


class BuildPyWithLib(build_py):
    def run(self):
        lib = library()
        super().run()
        gates = HERE.parent / "gates" / "default.json"
        dst = Path(self.build_lib) / "dsv4q" / "_lib"
        dst.mkdir(parents=True, exist_ok=True)
        shutil.copy2(lib, dst / "libdsv4q.so")
        print("dsv4q: bundled %s" % lib)
        if gates.exists():
            shutil.copy2(gates, dst / "default.json")


CMDS = {"build_py": BuildPyWithLib}
if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False   # a native .so inside: platlib, platform tag

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat   # ctypes only: no CPython ABI dependency

    CMDS["bdist_wheel"] = PlatformWheel

setup(cmdclass=CMDS)
