"""Generated gRPC stubs (see tools/protos.py); do not edit."""
