"""The query parameters of the resource API, one table for both documents that describe them.

Each parameter is written once, with two texts: Kubernetes' own description, which the OpenAPI documents kubectl
reads (`openapis`) publish as the apiserver does, and what devplace does with it, which the server's own
interactive docs (`/docs`, FastAPI's OpenAPI 3) show. A parameter Kubernetes does not publish (`includeObject`, read
from the Table media type; `resourceVersion` on a delete, a precondition Kubernetes takes in DeleteOptions) has no
Kubernetes text and is left out of the Kubernetes documents.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Parameter:
    name: str
    type: str
    """JSON type: "string", "boolean" or "integer"."""
    served: str
    """What devplace does with it."""
    kubernetes: str | None
    """Kubernetes' description, or None where Kubernetes does not publish the parameter."""
    enum: tuple[str, ...] = ()
    minimum: int | None = None

    def swagger(self) -> dict[str, Any]:
        """The Swagger 2.0 form Kubernetes publishes (no enum: Kubernetes' documents carry none)."""
        if self.kubernetes is None:
            raise ValueError(f"Kubernetes does not publish the query parameter {self.name!r}")
        return {
            "description": self.kubernetes,
            "in": "query",
            "name": self.name,
            "type": self.type,
            "uniqueItems": True,
        }

    def openapi3(self) -> dict[str, Any]:
        """The OpenAPI 3 form of the server's own docs, with the values devplace accepts."""
        schema: dict[str, Any] = {"type": self.type}
        if self.enum:
            schema["enum"] = list(self.enum)
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        return {"name": self.name, "in": "query", "required": False, "schema": schema, "description": self.served}


PRETTY = Parameter(
    "pretty", "string", "accepted; JSON is always indented", "If 'true', then the output is pretty printed."
)
FORCE = Parameter(
    "force",
    "boolean",
    "server-side apply: take the fields other managers own instead of answering 409",
    'Force is going to "force" Apply requests: it re-acquires conflicting fields owned by other people.',
)
_DRY_RUN = Parameter(
    "dryRun",
    "string",
    "validate and admit (a delete: check the preconditions), store nothing",
    "When present, indicates that modifications should not be persisted. The only valid value is All: the request "
    "is validated and admitted, and the object that would be stored is returned.",
    enum=("All",),
)
_RESOURCE_VERSION = "resourceVersion sets a constraint on what resource versions a request may be served from."

LIST_QUERY: tuple[Parameter, ...] = (
    Parameter(
        "allowWatchBookmarks",
        "boolean",
        "watch: send BOOKMARK events",
        "allowWatchBookmarks requests watch events with type BOOKMARK.",
    ),
    Parameter(
        "continue",
        "string",
        "list: the token of the previous page's metadata.continue",
        "The continue option should be set when retrieving more results from the server.",
    ),
    Parameter(
        "fieldSelector",
        "string",
        "Kubernetes field selector, e.g. `spec.nodeName=node-a`: metadata.name, metadata.namespace and the kind's "
        "field labels (400 for any other field)",
        "A selector to restrict the list of returned objects by their fields.",
    ),
    Parameter(
        "includeObject",
        "string",
        "Table rows carry",
        None,
        enum=("None", "Metadata", "Object"),
    ),
    Parameter(
        "labelSelector",
        "string",
        "Kubernetes label selector, e.g. `app=x,tier in (a,b)`",
        "A selector to restrict the list of returned objects by their labels.",
    ),
    Parameter(
        "limit",
        "integer",
        "list: at most this many items, then `continue`",
        "limit is a maximum number of responses to return for a list call.",
        minimum=0,
    ),
    Parameter(
        "resourceVersion",
        "string",
        "list: at least this revision (504 if the store has not reached it); watch: events after this revision",
        _RESOURCE_VERSION,
    ),
    Parameter(
        "resourceVersionMatch",
        "string",
        "list: how to read it",
        "resourceVersionMatch determines how resourceVersion is applied to list calls.",
        enum=("NotOlderThan", "Exact"),
    ),
    Parameter(
        "timeoutSeconds",
        "integer",
        "watch: end the stream after this long",
        "Timeout for the list/watch call.",
        minimum=0,
    ),
    Parameter(
        "watch",
        "boolean",
        "stream watch events instead of listing",
        "Watch for changes to the described resources and return them as a stream of add, update and remove "
        "notifications.",
    ),
)
"""A list or watch of a collection."""

WRITE_QUERY: tuple[Parameter, ...] = (
    _DRY_RUN,
    Parameter(
        "fieldManager",
        "string",
        "the writer's name",
        "fieldManager is a name associated with the actor or entity that is making these changes.",
    ),
    Parameter(
        "fieldValidation",
        "string",
        "unknown fields: refuse (default), drop with a Warning header, or drop",
        "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate "
        "fields. Valid values are Ignore, Warn and Strict.",
        enum=("Strict", "Warn", "Ignore"),
    ),
)
"""A create, replace or patch (`fieldValidation` only where the server checks fields itself)."""

DELETE_QUERY: tuple[Parameter, ...] = (
    _DRY_RUN,
    Parameter(
        "gracePeriodSeconds",
        "integer",
        "accepted; deletion is immediate",
        "The duration in seconds before the object should be deleted.",
        minimum=0,
    ),
    Parameter(
        "propagationPolicy",
        "string",
        "accepted; dependents are left as they are (no garbage collector)",
        "Whether and how garbage collection will be performed: Orphan, Background or Foreground.",
        enum=("Orphan", "Background", "Foreground"),
    ),
    Parameter("resourceVersion", "string", "delete only if the object is at this revision", None),
)
"""A delete of one object."""
