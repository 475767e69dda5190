"""The `devplace` command."""

import os

# gRPC's C core logs connection teardown ("Got goaway") to stderr unless told otherwise, and reads this only
# before `grpc` is first imported; a user's own setting wins.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from devplace.cli.app import app, main

__all__ = ["app", "main"]
