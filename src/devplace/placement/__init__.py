"""Fleet placement (DESIGN.md section 7, seed 004): EMCO-style intents, concurrent placement controllers that return
partition candidates, a scheduler that combines them, and action controllers that patch manifests.

EMCO's objects, pure (importing the package imports `kinds`, which registers the stored kinds):

- `names`: EMCO's name rules, their Kubernetes spellings (`kube_name`) and cluster label text;
- `bodies`: `EmcoBody` and the other levels' /v2 bodies, in each dialect (seed, 21.x, 22.x);
- `consumers`: hpa resource consumer bodies and `Workload`, the one typed view of their dialects;
- `requirements`: hpa resource requirement bodies, `Need` and the unit maths (`requirement_quantities`);
- `levels`: the /v2 hierarchy: `Level`, `LEVELS`, `FleetPath` and the store names of EMCO paths;
- `kinds`: the stored kinds of group `fleet.devplace.io/v1alpha1` (`FleetObject`), registered in `api.registry`.

Pure decisions:

- `intents`: stored intents resolved into the controllers' data;
- `candidates`: partition candidates, what a placement controller says about each app;
- `controllers`: how the placement controllers (`generic`, `hpa`) run: all at once, each under its own timeout;
- `combiner`: the scheduler of controllers;
- `actions`: manifest patching;
- `reports`: decision documents and EMCO's status;
- `charts`: chart archives and kubeconfigs from multipart file parts.

I/O shells:

- `catalog`: the /v2 objects in the store, read back typed;
- `labels`: EMCO's cluster labels;
- `inventory`: static and live cluster inventories;
- `members`: objects handed to member clusters and taken back;
- `service`: the lifecycle: plan, approve, instantiate, status, terminate.

Whatever needs the fleet kinds registered (the server, the sim, the CLI, CRD generation) imports `devplace.placement`
first. One door: every module here is private; this face is what the package promises (pinned by
tests/test_faces.py).
"""

from devplace.placement import _kinds  # noqa: F401  (registers the fleet kinds)
from devplace.placement._bodies import ClusterLabelBody
from devplace.placement._catalog import cluster_labels
from devplace.placement._charts import chart_manifests, kubeconfig_server
from devplace.placement._labels import ClusterLabels
from devplace.placement._levels import (
    APP,
    CLUSTER,
    DEPLOYMENT_INTENT_GROUP,
    HPA_CONSUMER,
    HPA_INTENT,
    HPA_REQUIREMENT,
    LEVELS,
    Level,
)
from devplace.placement._names import cluster_label_text, split_cluster_label
from devplace.placement._reports import parse_status_query
from devplace.placement._service import PlacementService

__all__ = [
    "APP",
    "CLUSTER",
    "DEPLOYMENT_INTENT_GROUP",
    "HPA_CONSUMER",
    "HPA_INTENT",
    "HPA_REQUIREMENT",
    "LEVELS",
    "ClusterLabelBody",
    "ClusterLabels",
    "Level",
    "PlacementService",
    "chart_manifests",
    "cluster_label_text",
    "cluster_labels",
    "kubeconfig_server",
    "parse_status_query",
    "split_cluster_label",
]
