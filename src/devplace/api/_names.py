"""Name rules, as Kubernetes applies them.

DNS-1123 subdomain for object names (<= 253, lowercase alphanumerics, '-' and '.'), DNS-1123 label for namespaces
(<= 63, no dots), qualified names for label keys (`prefix/name`). Each check returns the reason a name is refused,
or None; `require_*` raise `errors.Invalid` naming the field.
"""

from __future__ import annotations

import re

from devplace import errors

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
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
