"""Only the optional C extension lives here; everything else is declared in setup.cfg.

``zkconsumer._records`` is the record batch v2 decoder in C (zkconsumer/_records.c). It is optional: without a C
compiler the build goes on and zkconsumer uses the pure-Python decoder (zkconsumer/consumer/fast_records.py).
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("zkconsumer._records", ["zkconsumer/_records.c"], optional=True,
                             extra_compile_args=["-O2"])])
