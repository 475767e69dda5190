"""The stored fleet kinds (`Project`, `HpaResourceRequirement`, ...): group `fleet.devplace.io/v1alpha1`,
cluster-scoped, one per level of the /v2 hierarchy, registered with `devplace.api._registry` when this module is
imported (importing `devplace.placement` does it).

`metadata.name` is `Level.store_name(path)` (see `levels`). `spec.path` holds the EMCO path (typed access:
`FleetPath`), `spec.emco` the body as sent, validated against the level's body model in whichever dialect it came,
`spec.content` what a multipart file part brought (an app's chart manifests, a cluster's kubeconfig server),
`spec.labels` a cluster's labels (the body's plus those added over `/labels`); label `fleet.devplace.io/parent` holds
the parent's store name, so "list the children of X" is a label-selector list, and
`fleet.devplace.io/deployment-intent-group` marks everything below a deployment intent group so a plan reads each
kind of its subtree with one list. Each kind tells the OpenAPI documents its `spec.emco` schema through
`Resource.SCHEMA_MODELS` (the level's body).

The kinds live here, beside EMCO's bodies, and not in `devplace.api`, so that processes that never serve /v2 (the
node agent) do not build EMCO's models.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Self

from pydantic import model_validator

from devplace.api import Model, Resource, register
from devplace.placement._levels import (
    APP,
    CLUSTER,
    CLUSTER_PROVIDER,
    COMPOSITE_APP,
    DEPLOYMENT_INTENT,
    DEPLOYMENT_INTENT_GROUP,
    GENERIC_APP_INTENT,
    GENERIC_PLACEMENT_INTENT,
    HPA_CONSUMER,
    HPA_INTENT,
    HPA_REQUIREMENT,
    PROJECT,
    Level,
)

API_VERSION = "fleet.devplace.io/v1alpha1"
PARENT_LABEL = "fleet.devplace.io/parent"
DIG_LABEL = "fleet.devplace.io/deployment-intent-group"
CHILD_WRITES_ANNOTATION = "fleet.devplace.io/child-writes"


class FleetSpec(Model):
    """`path`: the EMCO path; `emco`: the body as sent; `content`: what a multipart file part brought (`manifests`
    and `chart` for an app, `server` for a cluster's kubeconfig); `labels`: a cluster's labels."""

    path: list[str]
    emco: dict[str, Any]
    content: dict[str, Any] | None = None
    labels: dict[str, str] | None = None


class FleetObject(Resource):
    """A stored fleet object; `spec.emco` must be a valid body of the kind's level."""

    NAMESPACED: ClassVar[bool] = False
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = (API_VERSION,)
    LEVEL: ClassVar[Level]

    spec: FleetSpec
    status: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _emco_body_is_valid(self) -> Self:
        level = type(self).LEVEL
        if len(self.spec.path) != len(level.all_params):
            raise ValueError(f"spec.path must have {len(level.all_params)} segments ({', '.join(level.all_params)})")
        level.body.parse(self.spec.emco, "spec.emco")
        return self


def _fleet_kind(level: Level, plural: str) -> Callable[[type[FleetObject]], type[FleetObject]]:
    def decorate(cls: type[FleetObject]) -> type[FleetObject]:
        cls.KIND = level.kind
        cls.PLURAL = plural
        cls.LEVEL = level
        cls.SCHEMA_MODELS = {("spec", "emco"): level.body}
        cls.__doc__ = (
            f"A {level.title} of the fleet placement API, stored as the /v2 fleet API (EMCO's paths) "
            "reads and writes it."
        )
        return register(cls)

    return decorate


@_fleet_kind(PROJECT, "projects")
class Project(FleetObject):
    pass


@_fleet_kind(COMPOSITE_APP, "compositeapps")
class CompositeApp(FleetObject):
    pass


@_fleet_kind(APP, "apps")
class App(FleetObject):
    pass


@_fleet_kind(DEPLOYMENT_INTENT_GROUP, "deploymentintentgroups")
class DeploymentIntentGroup(FleetObject):
    pass


@_fleet_kind(GENERIC_PLACEMENT_INTENT, "genericplacementintents")
class GenericPlacementIntent(FleetObject):
    pass


@_fleet_kind(GENERIC_APP_INTENT, "genericplacementappintents")
class GenericPlacementAppIntent(FleetObject):
    pass


@_fleet_kind(HPA_INTENT, "hpaintents")
class HpaIntent(FleetObject):
    pass


@_fleet_kind(HPA_CONSUMER, "hparesourceconsumers")
class HpaResourceConsumer(FleetObject):
    pass


@_fleet_kind(HPA_REQUIREMENT, "hparesourcerequirements")
class HpaResourceRequirement(FleetObject):
    pass


@_fleet_kind(DEPLOYMENT_INTENT, "deploymentintents")
class DeploymentIntent(FleetObject):
    pass


@_fleet_kind(CLUSTER_PROVIDER, "clusterproviders")
class ClusterProvider(FleetObject):
    pass


@_fleet_kind(CLUSTER, "clusters")
class Cluster(FleetObject):
    pass
