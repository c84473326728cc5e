"""Only the compiled part of kbus lives here (everything else is in pyproject.toml): the record scan that produce
validation runs on every batch (kbus/protocol/_recordscan.c; kbus/protocol/record_scan.py says why)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("kbus.protocol._recordscan", ["kbus/protocol/_recordscan.c"], extra_compile_args=["-O2"]),
    ]
)
