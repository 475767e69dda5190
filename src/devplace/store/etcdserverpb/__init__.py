"""Generated gRPC stubs of the etcd v3 API subset the etcd store speaks (see tools/protos.py); do not edit."""
