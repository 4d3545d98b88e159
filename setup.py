"""Builds the optional C speed-ups of ``check`` (migrate_v3/_speedups.c).

Everything else is declared in pyproject.toml. Without a C compiler the build
still succeeds and ``check`` runs the Python versions of the same functions
(migrate_v3/scan.py); the module records the SHA-256 of the source it was
built from, so a test can tell when an editable install holds a stale build.
"""

import hashlib
from pathlib import Path

from setuptools import Extension, setup

SOURCE = Path(__file__).parent / "migrate_v3" / "_speedups.c"
SHA = hashlib.sha256(SOURCE.read_bytes()).hexdigest()

setup(
    ext_modules=[
        Extension(
            "migrate_v3._speedups",
            ["migrate_v3/_speedups.c"],
            define_macros=[("SPEEDUPS_SOURCE_SHA256", f'"{SHA}"')],
            optional=True,
        )
    ]
)
