"""Fleet placement (DESIGN.md section 7, seed 004): EMCO-style intents, concurrent placement controllers that return
partition candidates, a scheduler that combines them, and action controllers that patch manifests.

Pure decisions: `generic`, `hpa` (placement controllers), `combiner` (the scheduler of controllers), `actions`
(manifest patching), `reports` (status documents). I/O shells: `catalog` (the /v2 objects in the store),
`inventory` (static and live cluster inventories), `service` (plan / instantiate / status).
"""

from devplace.placement.candidates import Because, Candidate, Reason
from devplace.placement.catalog import Catalog
from devplace.placement.combiner import AppPlacement, Decision, Outcome, combine
from devplace.placement.controllers import PlacementContext, PlacementController, default_controllers, register
from devplace.placement.inventory import ClusterInventory, ClusterRef, NodeInventory
from devplace.placement.labels import ClusterLabels
from devplace.placement.service import PlacementService

__all__ = [
    "AppPlacement",
    "Because",
    "Candidate",
    "Catalog",
    "ClusterInventory",
    "ClusterLabels",
    "ClusterRef",
    "Decision",
    "NodeInventory",
    "Outcome",
    "PlacementContext",
    "PlacementController",
    "PlacementService",
    "Reason",
    "combine",
    "default_controllers",
    "register",
]
