"""Fleet placement (DESIGN.md section 7, seed 004): EMCO-style intents, concurrent placement controllers that return
partition candidates, a scheduler that combines them, and action controllers that patch manifests.

Pure decisions: `intents` (stored intents resolved into the controllers' data), `generic`, `hpa` (placement
controllers), `combiner` (the scheduler of controllers), `actions` (manifest patching), `reports` (decision documents
and EMCO's status), `charts` (chart archives and kubeconfigs from multipart file parts). I/O shells: `catalog` (the /v2
objects in the store, read back typed), `labels` (EMCO's cluster labels), `inventory` (static and live cluster
inventories), `members` (objects handed to member clusters and taken back), `service` (the lifecycle: plan, approve,
instantiate, status, terminate).

Callers import the module they need (`from devplace.placement import catalog, service`): the package re-exports
nothing.
"""

__all__: list[str] = []
