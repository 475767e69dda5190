import grpc
import pytest

from devplace import errors
from devplace.deviceplugin._errors import grpc_code
from devplace.server._statuses import http_status, status_body


def test_invalid_is_a_value_error_and_names_the_field() -> None:
    err = errors.Invalid.field("spec.capacity", "must be at least 1")
    assert isinstance(err, ValueError)
    assert str(err) == "spec.capacity: must be at least 1"
    assert err.fields == (errors.FieldError("spec.capacity", "must be at least 1"),)


@pytest.mark.parametrize(
    ("error", "kubernetes", "emco"),
    [
        (errors.Invalid("x"), 422, 400),
        (errors.Malformed("x"), 400, 422),
        (errors.TooLarge("x"), 413, 413),
        (errors.NotFound("x"), 404, 404),
        (errors.AlreadyExists("x"), 409, 409),
        (errors.Conflict("x"), 409, 409),
        (errors.Gone("x"), 410, 410),
        (errors.ResourceVersionTooLarge("x"), 504, 504),
        (errors.Refused("x"), 409, 409),
        (errors.Unauthenticated("x"), 401, 401),
        (errors.Forbidden("x"), 403, 403),
        (errors.TooManyRequests("x"), 429, 429),
        (errors.Unavailable("x"), 503, 503),
        (errors.UnsupportedMediaType("x"), 415, 415),
        (errors.DevplaceError("x"), 500, 500),
    ],
)
def test_every_error_maps_to_its_http_status_in_both_dialects(
    error: errors.DevplaceError, kubernetes: int, emco: int
) -> None:
    assert http_status(error, "kubernetes") == kubernetes
    assert http_status(error, "emco") == emco


def test_status_body_of_invalid_lists_each_field_cause() -> None:
    err = errors.Invalid(
        "two problems",
        [errors.FieldError("metadata.name", "bad"), errors.FieldError("spec.capacity", "too small")],
    )
    body = status_body(err)
    assert body["kind"] == "Status"
    assert body["code"] == 422
    assert body["reason"] == "Invalid"
    assert [c["field"] for c in body["details"]["causes"]] == ["metadata.name", "spec.capacity"]


def test_emco_dialect_prefixes_invalid_input() -> None:
    body = status_body(errors.Invalid.field("spec.weight", "must be 1..10"), "emco")
    assert body["code"] == 400
    assert body["message"] == "Invalid Input: spec.weight: must be 1..10"


def test_a_too_large_resource_version_is_answered_as_kubernetes_does() -> None:
    err = errors.ResourceVersionTooLarge.at(100_000, 6)
    assert isinstance(err, errors.Gone)  # a client relists, as for an expired revision
    assert status_body(err) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Timeout: Too large resource version: 100000, current: 6",
        "reason": "Timeout",
        "details": {
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        },
        "code": 504,
    }


def test_a_too_large_resource_version_crosses_grpc_as_out_of_range_like_gone() -> None:
    assert grpc_code(errors.ResourceVersionTooLarge.at(7, 6)) == grpc.StatusCode.OUT_OF_RANGE
    assert grpc_code(errors.TooLarge("x")) == grpc.StatusCode.INVALID_ARGUMENT
