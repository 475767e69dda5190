"""devplace: share and place hardware, from a fleet of clusters down to a single device slot.

gRPC's C core writes INFO lines to stderr (e.g. `chttp2_transport.cc:1403] ... Got goaway` whenever a plugin server
stops under an open stream) that users must not see. It reads `GRPC_VERBOSITY` once, when grpc is first imported, and
every devplace module that imports grpc is imported after this package, so the default is set here: ERROR, unless
the user set the variable themselves.
"""

import os

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

__version__ = "0.1.0"

__all__ = ["__version__"]
