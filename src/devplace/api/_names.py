"""Name rules, as Kubernetes applies them.

DNS-1123 subdomain for object names (<= 253, lowercase alphanumerics, '-' and '.'), DNS-1123 label for namespaces
(<= 63, no dots), qualified names for label keys (`prefix/name`). Each check returns the reason a name is refused,
or None; `require_*` raise `errors.Invalid` naming the field. `generated_suffix` is the 5-character tail Kubernetes
gives generated names (its alphabet, no vowels), made from a seed so that a name made twice comes out the same;
`controller_reference` the ownerReference of an object's controller.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from devplace import errors

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The characters of a generated name's suffix (Kubernetes' `utilrand` alphabet: no vowels, no look-alikes)."""


def generated_suffix(seed: str, length: int = 5) -> str:
    """`length` characters of Kubernetes' generated-name alphabet, the same for the same seed."""
    digest = hashlib.blake2b(seed.encode(), digest_size=max(8, length)).digest()
    return "".join(_SUFFIX_ALPHABET[b % len(_SUFFIX_ALPHABET)] for b in digest[:length])


def controller_reference(api_version: str, kind: str, name: str, uid: str | None = None) -> dict[str, Any]:
    """The ownerReference of an object's controller (deleting the owner deletes it, and waits for it in the
    foreground); `uid` left out when unknown (an owner not created yet)."""
    out: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    if uid:
        out["uid"] = uid
    return out


_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def dns1123_label_problem(value: str) -> str | None:
    if not value:
        return "must not be empty"
    if len(value) > 63:
        return f"must be no more than 63 characters (got {len(value)})"
    if not _LABEL.match(value):
        return (
            f"{value!r} must consist of lower case alphanumeric characters or '-', "
            "and must start and end with an alphanumeric character"
        )
    return None


def dns1123_subdomain_problem(value: str) -> str | None:
    if not value:
        return "must not be empty"
    if len(value) > 253:
        return f"must be no more than 253 characters (got {len(value)})"
    if not _SUBDOMAIN.match(value):
        return (
            f"{value!r} must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return None


def label_key_problem(key: str) -> str | None:
    prefix, sep, name = key.rpartition("/")
    if sep:
        if not prefix:
            return f"{key!r}: prefix part must not be empty"
        problem = dns1123_subdomain_problem(prefix)
        if problem:
            return f"{key!r}: prefix part {problem}"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return (
            f"{key!r}: name part must be 1-63 characters of alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric character"
        )
    return None


def label_value_problem(value: str) -> str | None:
    if value == "":
        return None
    if len(value) > 63 or not _QUALIFIED_NAME.match(value):
        return (
            f"{value!r} must be at most 63 characters of alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric character"
        )
    return None


def require_dns1123_subdomain(path: str, value: str) -> str:
    problem = dns1123_subdomain_problem(value)
    if problem:
        raise errors.Invalid.field(path, problem)
    return value


def require_dns1123_label(path: str, value: str) -> str:
    problem = dns1123_label_problem(value)
    if problem:
        raise errors.Invalid.field(path, problem)
    return value
