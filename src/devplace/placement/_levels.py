"""The /v2 hierarchy: one `Level` per collection (projects, composite apps, ..., clusters), the paths that name
objects in it (`FleetPath`), and the store names those paths get.

A path is the tuple of every identifying string from the root: `("my-proj1", "my-capp1", "v1.0", "my-dig1")` for a
deployment intent group (a composite app is identified by name and version). EMCO names are not DNS-1123 and the
hierarchy must be part of the key, so a stored object's `metadata.name` is `Level.store_name(path)`: a readable
sanitised prefix of the leaf name plus a 20-hex blake2b digest of the kind and the full EMCO path (at most 61
characters, hence also a valid label value). Each level names its body model (`bodies`, `consumers`,
`requirements`); the stored kinds (`kinds`) are made from the levels. Each level also keeps what EMCO answers about it
word for word: its duplicate text (`exists`, the 409's message) and the query parameter its collection is looked up by.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from devplace import errors
from devplace.placement._bodies import (
    AppBody,
    ClusterBody,
    ClusterProviderBody,
    CompositeAppBody,
    DeploymentIntentBody,
    DeploymentIntentGroupBody,
    EmcoBody,
    GenericAppIntentBody,
    GenericPlacementIntentBody,
    HpaIntentBody,
    ProjectBody,
)
from devplace.placement._consumers import HpaConsumerBody
from devplace.placement._requirements import HpaRequirementBody


def _sanitized(name: str, limit: int = 40) -> str:
    text = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return text[:limit].rstrip("-")


@dataclass(frozen=True)
class Level:
    """One collection of the /v2 hierarchy: its stored kind, URL segment, path parameters, parent and body model.

    A path is the tuple of every identifying string from the root: `("my-proj1", "my-capp1", "v1.0", "my-dig1")` for
    a deployment intent group (a composite app is identified by name and version); `FleetPath` reads it by name.
    """

    kind: str
    title: str
    segment: str
    params: tuple[str, ...]
    parent: Level | None
    body: type[EmcoBody]
    exists: str = ""
    """EMCO's answer to a duplicate (409), word for word: `Project already exists`."""
    query: str | None = None
    """EMCO's look-up query parameter on the collection (`hpa-intents?intent=NAME`), if it has one."""

    @property
    def chain(self) -> tuple[Level, ...]:
        """Root first, self last."""
        out: list[Level] = []
        level: Level | None = self
        while level is not None:
            out.append(level)
            level = level.parent
        return tuple(reversed(out))

    @property
    def all_params(self) -> tuple[str, ...]:
        return tuple(p for level in self.chain for p in level.params)

    @property
    def parent_width(self) -> int:
        return len(self.all_params) - len(self.params)

    def identity(self, body: EmcoBody) -> tuple[str, ...]:
        """The path segment a body names: its name (and version for a composite app)."""
        if isinstance(body, CompositeAppBody):
            return (body.metadata.name, body.version)
        return (body.metadata.name,)

    def store_name(self, path: tuple[str, ...]) -> str:
        digest = hashlib.blake2b(
            "\x00".join((self.kind, *path)).encode("utf-8", "surrogatepass"), digest_size=10
        ).hexdigest()
        prefix = _sanitized(path[-len(self.params)]) if path else ""
        return f"{prefix}-{digest}" if prefix else f"{self.kind.lower()}-{digest}"

    def describe(self, path: tuple[str, ...]) -> str:
        """`hpa intent "fwall-hpa-intent"`, `composite app "my-capp1" version "v1.0"`."""
        own = path[len(path) - len(self.params) :]
        if len(own) == 2:
            return f'{self.title} "{own[0]}" version "{own[1]}"'
        return f'{self.title} "{own[0]}"' if own else self.title

    @property
    def children(self) -> tuple[Level, ...]:
        return tuple(level for level in LEVELS if level.parent is self)

    @property
    def under_dig(self) -> bool:
        """Is this a strict descendant of a deployment intent group?"""
        return DEPLOYMENT_INTENT_GROUP in self.chain[:-1]


@dataclass(frozen=True)
class FleetPath:
    """An EMCO path read by parameter name (`path["hpaIntent"]`), never by position."""

    level: Level
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.names) != len(self.level.all_params):
            raise errors.Invalid(
                f"{self.level.title}: a path has {len(self.level.all_params)} names "
                f"({', '.join(self.level.all_params)}), not {len(self.names)}"
            )

    def __getitem__(self, param: str) -> str:
        try:
            return self.names[self.level.all_params.index(param)]
        except ValueError:
            raise KeyError(f"a {self.level.title} path has no {param!r}") from None

    @property
    def leaf(self) -> str:
        """The object's own name (a composite app's, not its version)."""
        return self.names[self.level.parent_width]

    def up(self, level: Level) -> FleetPath:
        """The path of the enclosing object of `level`."""
        if level not in self.level.chain:
            raise KeyError(f"a {self.level.title} is not below a {level.title}")
        return FleetPath(level, self.names[: len(level.all_params)])


PROJECT = Level("Project", "project", "projects", ("project",), None, ProjectBody, exists="Project already exists")
COMPOSITE_APP = Level(
    "CompositeApp",
    "composite app",
    "composite-apps",
    ("compositeApp", "version"),
    PROJECT,
    CompositeAppBody,
    exists="CompositeApp already exists",
)
APP = Level("App", "app", "apps", ("app",), COMPOSITE_APP, AppBody, exists="App already exists")
DEPLOYMENT_INTENT_GROUP = Level(
    "DeploymentIntentGroup",
    "deployment intent group",
    "deployment-intent-groups",
    ("deploymentIntentGroup",),
    COMPOSITE_APP,
    DeploymentIntentGroupBody,
    exists="DeploymentIntent already exists",  # sic: EMCO's text for a deployment intent group
)
GENERIC_PLACEMENT_INTENT = Level(
    "GenericPlacementIntent",
    "generic placement intent",
    "generic-placement-intents",
    ("genericPlacementIntent",),
    DEPLOYMENT_INTENT_GROUP,
    GenericPlacementIntentBody,
    exists="Intent already exists",
)
GENERIC_APP_INTENT = Level(
    "GenericPlacementAppIntent",
    "app intent",
    "app-intents",
    ("appIntent",),
    GENERIC_PLACEMENT_INTENT,
    GenericAppIntentBody,
    exists="AppIntent already exists",
    query="app",
)
HPA_INTENT = Level(
    "HpaIntent",
    "hpa intent",
    "hpa-intents",
    ("hpaIntent",),
    DEPLOYMENT_INTENT_GROUP,
    HpaIntentBody,
    exists="Intent already exists",
    query="intent",
)
HPA_CONSUMER = Level(
    "HpaResourceConsumer",
    "hpa resource consumer",
    "hpa-resource-consumers",
    ("consumer",),
    HPA_INTENT,
    HpaConsumerBody,
    exists="Consumer already exists",
    query="consumer",
)
HPA_REQUIREMENT = Level(
    "HpaResourceRequirement",
    "resource requirement",
    "resource-requirements",
    ("requirement",),
    HPA_CONSUMER,
    HpaRequirementBody,
    exists="Resource already exists",
    query="resource",
)
DEPLOYMENT_INTENT = Level(
    "DeploymentIntent",
    "deployment intent",
    "intents",
    ("deploymentIntent",),
    DEPLOYMENT_INTENT_GROUP,
    DeploymentIntentBody,
    exists="Intent already exists",
)
CLUSTER_PROVIDER = Level(
    "ClusterProvider",
    "cluster provider",
    "cluster-providers",
    ("clusterProvider",),
    None,
    ClusterProviderBody,
    exists="ClusterProvider already exists",
)
CLUSTER = Level(
    "Cluster", "cluster", "clusters", ("cluster",), CLUSTER_PROVIDER, ClusterBody, exists="Cluster already exists"
)

LEVELS: tuple[Level, ...] = (
    PROJECT,
    COMPOSITE_APP,
    APP,
    DEPLOYMENT_INTENT_GROUP,
    GENERIC_PLACEMENT_INTENT,
    GENERIC_APP_INTENT,
    HPA_INTENT,
    HPA_CONSUMER,
    HPA_REQUIREMENT,
    DEPLOYMENT_INTENT,
    CLUSTER_PROVIDER,
    CLUSTER,
)
