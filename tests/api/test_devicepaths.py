"""A Configuration's device paths (`devplace.io/device-paths`): its annotation, else the part's default; apply
refuses a value that names no path, naming the annotation; a stored value that breaks the rule reads as the default."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import api, errors

FIELD = 'metadata.annotations["devplace.io/device-paths"]'


def configuration(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "cams", "namespace": "default"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": meta,
        "spec": {"discoveryHandler": {"name": "debugEcho", "discoveryDetails": ""}, "capacity": 2},
    }


@pytest.mark.parametrize("paths", ["device-plugins", "dra", "both"])
def test_the_annotation_names_the_paths_and_overrides_the_default(paths: str) -> None:
    obj = api.normalize(configuration({api.DEVICE_PATHS_ANNOTATION: paths}))
    for default in api.DEVICE_PATHS:
        assert api.device_paths(obj, default) == paths


@pytest.mark.parametrize("default", ["device-plugins", "dra", "both"])
def test_a_configuration_without_the_annotation_or_unknown_takes_the_default(default: api.DevicePaths) -> None:
    assert api.device_paths(api.normalize(configuration()), default) == default
    assert api.device_paths(configuration({"other": "dra"}), default) == default
    assert api.device_paths(None, default) == default  # the Configuration is gone
    assert api.device_paths(configuration({api.DEVICE_PATHS_ANNOTATION: "DRA"}), default) == default  # stored badly


@pytest.mark.parametrize("value", ["DRA", "device-plugin", "", "dra,device-plugins", " both"])
def test_apply_refuses_a_value_that_names_no_path_naming_the_annotation(value: str) -> None:
    with pytest.raises(errors.Invalid) as refused:
        api.normalize(configuration({api.DEVICE_PATHS_ANNOTATION: value}))
    assert [str(f) for f in refused.value.fields] == [f"{FIELD}: {value!r} is not one of device-plugins, dra, both"]


@given(st.text(max_size=20))
def test_any_value_is_either_a_path_read_back_or_refused(value: str) -> None:
    obj = configuration({api.DEVICE_PATHS_ANNOTATION: value})
    if value in api.DEVICE_PATHS:
        assert api.device_paths(api.normalize(obj), "both") == value
    else:
        with pytest.raises(errors.Invalid, match=r"metadata\.annotations\[\"devplace\.io/device-paths\"\]"):
            api.normalize(obj)
