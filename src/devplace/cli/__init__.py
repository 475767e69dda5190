"""The `devplace` command."""

from devplace.cli.app import app, main

__all__ = ["app", "main"]
