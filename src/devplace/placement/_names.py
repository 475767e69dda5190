"""EMCO's names, and how they are spelled in Kubernetes.

Names follow EMCO, not Kubernetes: `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`, at most 128 characters
(`core-fwall-RAM-needs`). A consumer's workload and container names are EMCO's free strings (`HttpClient`), matched
against the app's manifests through `kube_name`, a deterministic Kubernetes spelling. A cluster label is written as
EMCO's /labels lists it: the key alone when its value is empty (`edge`), else `key=value` (`zone=east`).

The `checked_*` functions are the bodies' pydantic validators: they return the value, or raise `ValueError` naming
the problem.
"""

from __future__ import annotations

import re

from devplace.api import dns1123_label_problem, dns1123_subdomain_problem, label_key_problem, label_value_problem

EMCO_NAME_MAX = 128
EMCO_NAME_PATTERN = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def emco_name_problem(value: str) -> str | None:
    if not value:
        return "must not be empty"
    if len(value) > EMCO_NAME_MAX:
        return f"must be no more than {EMCO_NAME_MAX} characters (got {len(value)})"
    if not EMCO_NAME_PATTERN.match(value):
        return (
            f"{value!r} must consist of alphanumerics, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return None


def checked_emco_name(value: str) -> str:
    problem = emco_name_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def kube_name(value: str, *, label: bool = False) -> str:
    """The Kubernetes spelling of an EMCO name, deterministically: a valid DNS-1123 subdomain (or label, for container
    names) is kept as it is; anything else is lowercased, every run of other characters becomes one '-', and the
    ends are trimmed (`HttpClient` -> `httpclient`, `core_fwall` -> `core-fwall`). Empty when nothing is left."""
    problem = dns1123_label_problem(value) if label else dns1123_subdomain_problem(value)
    if problem is None:
        return value
    text = re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")
    return text[: 63 if label else 253].rstrip("-")


def checked_kube_spelling(value: str, *, label: bool = False) -> str:
    if not value:
        raise ValueError("must not be empty")
    if not kube_name(value, label=label):
        raise ValueError(f"{value!r} has no letter or digit to make a Kubernetes name of")
    return value


def checked_labels(value: dict[str, str]) -> dict[str, str]:
    for key, val in value.items():
        problem = label_key_problem(key) or label_value_problem(val)
        if problem:
            raise ValueError(f"label {key}={val!r}: {problem}")
    return value


def split_cluster_label(text: str) -> tuple[str, str | None]:
    """`gpu` -> ("gpu", None) (any value), `zone=east` -> ("zone", "east")."""
    key, sep, value = text.partition("=")
    return key, (value if sep else None)


def cluster_label_text(key: str, value: str) -> str:
    """How EMCO's /labels lists a cluster label: the key alone when its value is empty, else `key=value`."""
    return f"{key}={value}" if value else key


def checked_cluster_label(value: str) -> str:
    key, val = split_cluster_label(value)
    problem = label_key_problem(key) or (None if val is None else label_value_problem(val))
    if problem:
        raise ValueError(problem)
    return value
