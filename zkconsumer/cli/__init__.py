"""The ``zkconsumer`` command line: parse, call the library, print. Nothing else lives here."""
from .main import cli, main  # noqa: F401
