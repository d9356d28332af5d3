"""Build hook of the dsv4q Python package: bundle libdsv4q.so and the default
gate file into the wheel when the tree has them (after `make`), so
`pip install ./python` gives a self-contained package on the machine that
built the library. Without them the package finds the library at run time
($DSV4Q_LIB, pkg-config after `make install`, the system loader).
"""
import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPyWithLib(build_py):
    def run(self):
        super().run()
        lib = Path(os.environ.get("DSV4Q_LIB") or HERE.parent / "build" / "libdsv4q.so")
        gates = HERE.parent / "gates" / "default.json"
        dst = Path(self.build_lib) / "dsv4q" / "_lib"
        if lib.exists():
            dst.mkdir(parents=True, exist_ok=True)
            shutil.copy2(lib, dst / "libdsv4q.so")
            print("dsv4q: bundled %s" % lib)
        else:
            print("dsv4q: %s not found; the package will look for libdsv4q.so at run time" % lib)
        if gates.exists():
            dst.mkdir(parents=True, exist_ok=True)
            shutil.copy2(gates, dst / "default.json")


setup(cmdclass={"build_py": BuildPyWithLib})
