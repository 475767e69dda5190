"""Fleet placement (DESIGN.md section 7, seed 004): EMCO-style intents, concurrent placement controllers that return
partition candidates, a scheduler that combines them, and action controllers that patch manifests.

Pure decisions: `generic`, `hpa` (placement controllers), `combiner` (the scheduler of controllers), `actions`
(manifest patching), `reports` (status documents). I/O shells: `catalog` (the /v2 objects in the store),
`inventory` (static and live cluster inventories), `service` (plan / instantiate / status).

Callers import the module they need (`from devplace.placement import catalog, service`): the package re-exports
nothing.
"""

__all__: list[str] = []
