"""The devplace API server: the Kubernetes-style resource API and the EMCO-style fleet API (/v2)."""

__all__: list[str] = []
