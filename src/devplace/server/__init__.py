"""The devplace API server: the Kubernetes-style resource API and the EMCO-style fleet API (/v2), one FastAPI app
over one `Store`.

- `app`: `create_app`, `running`, `EmbeddedServer`: the app and its in-process server; `routetables`: the route
  FastAPI's router would choose, found in a few steps instead of a walk over every route;
- `resources`: the resource API (get, list, create, replace, delete); `requests`: what a request asks for, read
  purely (its target, body and write options); `lists`: paging and resourceVersion rules;
- `watches`: watch streams; `limits`: how many watches and how long a stalled one waits;
- `connections`: how long a request's headers and body may take, connections per address, cutting a connection;
- `patches`: PATCH in its four types, on objects, /status and /scale;
- `representations`: objects or Tables, by `Accept`; `bodies`: request bodies, capped and decoded off the loop, in
  the media types each verb takes; `framing`: requests refused for their framing (Content-Length with chunked
  encoding, too many query parameters, too large a head) before anything else reads them;
- `discoveries`: API discovery; `openapis`: /openapi/v2 and /openapi/v3;
- `health`: /livez and /readyz, with Kubernetes' named checks; `metrics`: /metrics, and kube-apiserver's request
  metrics counted around the whole app;
- `namespaces`: Namespaces deleted with everything in them (Terminating meanwhile), `default` always there;
- `deployments`: the Deployment status the server answers, devplace running no Deployment controller (so `kubectl
  rollout status` ends, saying why);
- `reviews`: `kubectl auth can-i` and `whoami` (self reviews, answered from `authz`); `protobufs`: the protobuf
  envelope of the reviews kubectl sends as protobuf;
- `emco`: the /v2 fleet API;
- `classdevices`: the read-only `devices` subresource of ResourceClasses and DeviceClasses (what each selects);
- `ui`: the dashboard at /ui (static files, live through the watch API) and Swagger UI at /docs, both without
  outside assets;
- `authn`, `authz`, `guards`: who a request comes from, what it may do, and the shells that enforce both;
- `statuses`: the one place a devplace error becomes an HTTP status (why a PUT is a 409: a `Conflict`, stale
  resourceVersion, from the store's compare-and-swap; or a `Refused` rule).

One door: every module here is private; this face is what the package promises (pinned by tests/test_faces.py).
"""

from devplace.server._app import DEFAULT_MAX_BODY_BYTES, EmbeddedServer, create_app, running
from devplace.server._authn import Auth, TlsFiles, Tokens, uvicorn_options
from devplace.server._connections import ConnectionLimits
from devplace.server._discoveries import api_resource_list
from devplace.server._limits import DEFAULT_MAX_WATCHES, DEFAULT_STALL_TIMEOUT
from devplace.server._statuses import http_status

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_WATCHES",
    "DEFAULT_STALL_TIMEOUT",
    "Auth",
    "ConnectionLimits",
    "EmbeddedServer",
    "TlsFiles",
    "Tokens",
    "api_resource_list",
    "create_app",
    "http_status",
    "running",
    "uvicorn_options",
]
