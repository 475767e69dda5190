"""The cluster-level controller: broker Pods, Jobs, Services and pool ConfigMaps for Configurations; node cleanup.

Pure decisions (`strategies`, `pools`, `services`, `plans`, `nodes`, `statuses`, combined by `decisions.decide`)
and one thin I/O shell (`Controller`, in `controllers`) that feeds them from informers and writes by CAS.
"""

from devplace.controller.controllers import Controller
from devplace.controller.decisions import Decision, Settings, decide

__all__ = ["Controller", "Decision", "Settings", "decide"]
