"""`ClassMatcher`: the controller's `class_matches` (group members by `resourceClass`), on the scheduler's class engine.

A `group` broker strategy may name a ResourceClass instead of a Configuration (DESIGN.md section 5). Which Instances
belong to a class is the scheduler's rule (section 6), so the matcher uses the scheduler's own pieces: the classes
are resolved by `scheduler.classes.resolve_each` (nested classes included; a refused class matches nothing) and an
Instance's attributes are `api.instance_properties` (its brokerProperties plus `Kind`, `configuration` and
`node`; `Kind` needs the Instance's Configuration, which the controller's cache provides).

It runs beside the controller (a fleet part of its own; `devplace controller` starts it first): informers over
ResourceClasses and Configurations under a `Supervisor`, synced before `start` returns, so the controller (started
after it) decides its first pass with every class known. Both informers are views of the process's shared feeds
(`store.InformerSet`): beside a controller, the Configurations are listed and watched once for both. `bind(controller)`
connects the two: a class added, deleted or changed calls the controller's `classes_changed` (which reconciles group
Configurations again): the controller does not watch classes itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from devplace import errors
from devplace.api import instance_properties
from devplace.clocks import Clock
from devplace.controller import _inputs as inputs
from devplace.scheduler import ResolvedClass, resolve_each
from devplace.store import Change, Informer, Store
from devplace.supervisors import Supervisor

if TYPE_CHECKING:
    from devplace.controller._controllers import Controller

log = logging.getLogger(__name__)


def _spec(obj: dict[str, Any], previous: Any) -> Any:
    return obj.get("spec")


class ClassMatcher:
    """Does an Instance belong to a ResourceClass? Callable as the controller's `class_matches` (module docstring)."""

    def __init__(self, store: Store, clock: Clock, *, name: str = "classes") -> None:
        self.supervisor = Supervisor(name, clock=clock)
        self.classes: Informer[Any] = Informer(store, "ResourceClass", _spec, name=f"{name} ResourceClasses")
        self.configurations: Informer[dict[str, Any]] = Informer(store, "Configuration", name=f"{name} Configurations")
        self.on_change: list[Callable[[], None]] = []
        self._resolved: dict[str, ResolvedClass] | None = None
        self._unsubscribe: Callable[[], None] | None = None

    def bind(self, controller: Controller) -> None:
        """Tell `controller` when classes change (module docstring)."""
        self.on_change[:] = [controller.classes_changed]

    async def start(self) -> None:
        self._unsubscribe = self.classes.subscribe(self._on_class)
        self.supervisor.loop("informer", self.classes.run)
        self.supervisor.loop("configurations", self.configurations.run)
        await self.classes.wait_synced()
        await self.configurations.wait_synced()

    async def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        await self.supervisor.stop()

    def is_idle(self) -> bool:
        return self.classes.synced.is_set() and self.configurations.synced.is_set() and self.supervisor.idle

    def _on_class(self, change: Change[Any]) -> None:
        if change.old is not None and change.new is not None and change.old == change.new:
            return  # a status write (the scheduler's): what classes match did not change
        self._resolved = None
        for hook in list(self.on_change):
            hook()

    def resolved(self) -> dict[str, ResolvedClass]:
        """Every valid class, resolved (cached until a class spec changes)."""
        if self._resolved is None:
            self._resolved = resolve_each({name: spec for (_, name), spec in self.classes.items()})[0]
        return self._resolved

    def __call__(self, class_name: str, instance: inputs.InstanceFacts) -> bool:
        cls = self.resolved().get(class_name)
        if cls is None:
            return False
        try:
            attributes = instance_properties(
                instance.wire, self.configurations.get(instance.namespace, instance.configuration)
            )
        except errors.Invalid as e:
            log.debug("Instance %s/%s matches no class: %s", instance.namespace, instance.name, e.message)
            return False
        return cls.matches(attributes)
