"""Kubernetes API machinery: what makes devplace's resource API speak to kubectl and Kubernetes clients as
Kubernetes' own API server does, over the kinds of `devplace.api`.

- `openapis`: the OpenAPI v2/v3 documents, generated from the kind registry (`gnostics`: their protobuf form);
- `patches`: JSON, merge and strategic merge patches (`fieldtypes`: Kubernetes' merge keys of the built-in types);
- `managedfields`: server-side apply's field ownership;
- `tables`: the columns of `kubectl get` (and of `devplace get`);
- `crds`: CustomResourceDefinitions of devplace's kinds, for a real cluster;
- `subresources`: which kinds serve `/status` and `/scale`.

Pure, no I/O: the server (`devplace.server`) and the CLI use these; the object model never does.
"""
