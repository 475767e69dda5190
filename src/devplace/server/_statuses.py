"""The one place devplace errors become HTTP responses.

HTTP-level refusals that are not devplace errors (405 on an unknown method, 500 on a bug) get the same `Status`
shape from `protocol_status_body`.

`ResourceVersionTooLarge` is answered as Kubernetes does: 504, reason `Timeout`, message `Timeout: Too large
resource version: N, current: M`, a `ResourceVersionTooLarge` cause and `retryAfterSeconds: 1`, which client-go
recognizes (it then relists).

Two dialects share one table: the Kubernetes-style resource API (`Invalid` -> 422 with a `Status` body listing
field causes) and the EMCO-style fleet API under /v2 (`Invalid` -> 400 "Invalid Input: ...", unparsable JSON -> 422).

| error                   | kubernetes | emco |
|-------------------------|-----------:|-----:|
| Malformed               |        400 |  422 |
| TooLarge                |        413 |  413 |
| Invalid                 |        422 |  400 |
| NotFound                |        404 |  404 |
| AlreadyExists           |        409 |  409 |
| Conflict                |        409 |  409 |
| Gone                    |        410 |  410 |
| ResourceVersionTooLarge |        504 |  504 |
| Refused                 |        409 |  409 |
| Unauthenticated         |        401 |  401 |
| Forbidden               |        403 |  403 |
| TooManyRequests         |        429 |  429 |
| Unavailable             |        503 |  503 |
| UnsupportedMediaType    |        415 |  415 |

A `Conflict` that names fields (a server-side apply conflict) lists them as `FieldManagerConflict` causes.

An `Invalid` answered with 422 about an object a write names (`Subject`: the URL's group and kind, the object's
name) is shaped as Kubernetes' `NewInvalid`: `details` carries `name`, `group` and `kind` beside the causes (empty
ones left out, as Kubernetes omits them), and the message reads `<Kind>[.<group>] "<name>" is invalid: <field>:
<reason>` (several fields: `[a: x, b: y]`), so kubectl prints `The <Kind> "<name>" is invalid: <field>: <reason>`.
Only one that names fields: kubectl prints no message beside a kind and name, so a whole-input `Invalid` keeps the
plain shape (kubectl: `The request is invalid: <message>`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from devplace import errors

Dialect = Literal["kubernetes", "emco"]


@dataclass(frozen=True)
class Subject:
    """The object a write names: its API group ("" for the core group), kind and name ("" when not given)."""

    group: str
    kind: str
    name: str

    def invalid(self, fields: tuple[errors.FieldError, ...]) -> str:
        """Kubernetes' message for an invalid object (module docstring)."""
        reasons = list(dict.fromkeys(str(f) for f in fields))
        listed = reasons[0] if len(reasons) == 1 else f"[{', '.join(reasons)}]"
        qualified = f"{self.kind}.{self.group}" if self.group else self.kind
        return f"{qualified} {json.dumps(self.name, ensure_ascii=False)} is invalid: {listed}"


_CODES: dict[type[errors.DevplaceError], tuple[int, int]] = {
    errors.Malformed: (400, 422),
    errors.TooLarge: (413, 413),
    errors.Invalid: (422, 400),
    errors.NotFound: (404, 404),
    errors.AlreadyExists: (409, 409),
    errors.Conflict: (409, 409),
    errors.ResourceVersionTooLarge: (504, 504),
    errors.Gone: (410, 410),
    errors.Refused: (409, 409),
    errors.Unauthenticated: (401, 401),
    errors.Forbidden: (403, 403),
    errors.TooManyRequests: (429, 429),
    errors.Unavailable: (503, 503),
    errors.UnsupportedMediaType: (415, 415),
}


def http_status(err: errors.DevplaceError, dialect: Dialect = "kubernetes") -> int:
    for cls in type(err).__mro__:
        if cls in _CODES:
            kube, emco = _CODES[cls]
            return kube if dialect == "kubernetes" else emco
    return 500


def status_body(
    err: errors.DevplaceError, dialect: Dialect = "kubernetes", subject: Subject | None = None
) -> dict[str, Any]:
    """A Kubernetes `Status` object (both dialects use it; EMCO clients read `message`); `subject` is the object the
    request names, if any (it shapes a 422, module docstring)."""
    code = http_status(err, dialect)
    message = err.message
    if dialect == "emco" and type(err) is errors.Invalid:
        message = f"Invalid Input: {err.message}"
    if isinstance(err, errors.ResourceVersionTooLarge):
        message = f"Timeout: {message}"
    body = protocol_status_body(code, err.reason, message)
    if isinstance(err, errors.ResourceVersionTooLarge):
        body["details"] = {
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        }
    if isinstance(err, errors.TooManyRequests):
        body["details"] = {"retryAfterSeconds": err.retry_after}
    if isinstance(err, errors.Invalid) and err.fields:
        causes = [{"field": f.path, "message": f.reason, "reason": "FieldValueInvalid"} for f in err.fields]
        body["details"] = {"causes": causes}
        if subject is not None and code == 422 and dialect == "kubernetes":
            named = {"name": subject.name, "group": subject.group, "kind": subject.kind}
            body["details"] = {**{k: v for k, v in named.items() if v}, "causes": causes}
            body["message"] = subject.invalid(err.fields)
    if isinstance(err, errors.Conflict) and err.fields:
        body["details"] = {
            "causes": [{"field": f.path, "message": f.reason, "reason": "FieldManagerConflict"} for f in err.fields]
        }
    return body


def protocol_status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
