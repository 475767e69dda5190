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
- `generic`, `hpa`: the placement controllers;
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

Callers import the module they need (`from devplace.placement import catalog, service`): the package re-exports
nothing. Whatever needs the fleet kinds registered (the server, the sim, the CLI, CRD generation) imports
`devplace.placement` first.
"""

from devplace.placement import kinds  # noqa: F401  (registers the fleet kinds)

__all__: list[str] = []
