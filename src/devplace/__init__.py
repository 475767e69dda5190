"""devplace: share and place hardware, from a fleet of clusters down to a single device slot."""

__version__ = "0.1.0"

__all__ = ["__version__"]
