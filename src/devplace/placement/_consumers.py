"""Hpa resource consumers: the bodies that name the workload an hpa intent's requirements are for.

Two dialects of one body, told apart by shape:

- seed 004's nested `spec.consumer{apiVersion, kind, name, container-name}` plus `spec.replicas`;
- EMCO's flat `spec{apiVersion, kind, replicas, name, container}` (22.x) or `spec{api-version, ..., container-name}`
  (21.x), any apiVersion string (`v19`).

`Workload` is the one typed view of both. Its names are EMCO's free strings (`HttpClient`), matched against the
app's manifests through `names.kube_name`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import AliasChoices, Field, field_validator

from devplace import errors
from devplace.api import Model
from devplace.placement._bodies import EmcoBody
from devplace.placement._names import checked_kube_spelling, kube_name

WorkloadKind = Literal["Deployment", "StatefulSet", "DaemonSet", "Job", "Pod"]
"""The kinds an HPA resource consumer may name (EMCO's action controller only ever patched Deployments)."""


@dataclass(frozen=True)
class Workload:
    """What an hpa resource consumer names, whatever the dialect: the Kubernetes object (and container) that
    receives the resources, the replicas to run, and whether it wants exclusive CPUs (devplace)."""

    api_version: str
    kind: str
    name: str
    container: str | None
    replicas: int | None
    exclusive_cpus: bool = False

    @property
    def object_name(self) -> str:
        """The manifest's `metadata.name` this consumer targets (`kube_name` of the EMCO name)."""
        return kube_name(self.name)

    @property
    def container_name(self) -> str | None:
        return None if self.container is None else kube_name(self.container, label=True)


class ConsumerRef(Model):
    """Seed 004's nested consumer: the Kubernetes object (and container) that receives the resources."""

    api_version: str = Field(min_length=1)
    kind: WorkloadKind
    name: str
    container_name: str | None = Field(
        None,
        validation_alias=AliasChoices("container-name", "containerName", "container_name", "container"),
        serialization_alias="container-name",
    )

    @field_validator("name")
    @classmethod
    def _name_ok(cls, value: str) -> str:
        return checked_kube_spelling(value)

    @field_validator("container_name")
    @classmethod
    def _container_ok(cls, value: str | None) -> str | None:
        return None if value is None else checked_kube_spelling(value, label=True)


class SeedConsumerSpec(Model):
    consumer: ConsumerRef
    replicas: int | None = Field(None, ge=1, le=10_000)
    exclusive_cpus: bool = False


class FlatConsumerSpec(Model):
    """EMCO's flat consumer: 21.x spells `api-version` and `container-name`, 22.x `apiVersion` and `container`.
    EMCO requires only `name`; `kind` defaults to Deployment, the one kind EMCO's action controller handled."""

    api_version: str | None = Field(None, validation_alias=AliasChoices("apiVersion", "api-version"), min_length=1)
    kind: WorkloadKind = "Deployment"
    replicas: int | None = Field(None, ge=1, le=10_000)
    name: str
    container: str | None = Field(
        None, validation_alias=AliasChoices("container", "container-name", "containerName"), min_length=1
    )
    exclusive_cpus: bool = False

    @field_validator("name")
    @classmethod
    def _name_ok(cls, value: str) -> str:
        return checked_kube_spelling(value)

    @field_validator("container")
    @classmethod
    def _container_ok(cls, value: str | None) -> str | None:
        return None if value is None else checked_kube_spelling(value, label=True)


class HpaConsumerBody(EmcoBody):
    """An hpa resource consumer, seed-nested or EMCO-flat; `workload` is the one typed view of both."""

    @classmethod
    def dialect(cls, obj: dict[str, Any]) -> type[EmcoBody]:
        if cls is not HpaConsumerBody:
            return cls
        spec = obj.get("spec")
        return SeedConsumerBody if isinstance(spec, dict) and "consumer" in spec else FlatConsumerBody

    @property
    def workload(self) -> Workload:
        raise NotImplementedError

    @property
    def replicas_field(self) -> str:
        return "spec.replicas"

    def check(self) -> None:
        target = self.workload
        if target.replicas is not None and target.kind in ("DaemonSet", "Pod"):
            raise errors.Invalid.field(self.replicas_field, f"a {target.kind} has no replica count")


class SeedConsumerBody(HpaConsumerBody):
    spec: SeedConsumerSpec

    @property
    def workload(self) -> Workload:
        ref = self.spec.consumer
        return Workload(
            ref.api_version, ref.kind, ref.name, ref.container_name, self.spec.replicas, self.spec.exclusive_cpus
        )


class FlatConsumerBody(HpaConsumerBody):
    spec: FlatConsumerSpec

    @property
    def workload(self) -> Workload:
        s = self.spec
        api_version = s.api_version or ("batch/v1" if s.kind == "Job" else "v1" if s.kind == "Pod" else "apps/v1")
        return Workload(api_version, s.kind, s.name, s.container, s.replicas, s.exclusive_cpus)


HpaConsumerBody.DIALECTS = (SeedConsumerBody, FlatConsumerBody)
