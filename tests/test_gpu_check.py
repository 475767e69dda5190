"""tools/gpu_check.py, as far as a machine without a GPU can take it: its pure parts, and its dry run (`--fake`, the
captured H200) through every step but CUDA, with the same processes the GPU machine runs."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.discovery.test_nvml import CAPTURE, H200_UUID

ROOT = Path(__file__).resolve().parents[1]


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "tools" / "gpu_check.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module
    spec.loader.exec_module(module)
    return module


gpu_check = load()


@pytest.mark.parametrize(
    ("cuda", "nvml", "close"),
    [(150754820096, 150754820096, True), (150_000_000_000, 150754820096, True), (80 * 2**30, 150754820096, False)],
)
def test_cuda_memory_agrees_with_nvml_within_one_percent(cuda: int, nvml: int, close: bool) -> None:
    assert gpu_check.memory_close(cuda, nvml) is close


def test_the_instances_the_scheduler_chose_are_read_from_the_pods_annotations() -> None:
    pod = {
        "metadata": {
            "annotations": {
                "scheduler.alpha.kubernetes.io/resClass_nvidia.high.mem_gpus-15791b": "1",
                "scheduler.alpha.kubernetes.io/resClass_other_gpus-000000": "1",
                "unrelated": "x",
            }
        }
    }
    assert gpu_check.chosen_instances(pod, "nvidia.high.mem") == ["gpus-15791b"]


def test_a_report_fails_on_any_failed_check_and_skips_do_not_count() -> None:
    report = gpu_check.Report()
    assert not report.ok  # nothing checked is no success
    report.add("a", True)
    report.add("b", None, "dry run")
    assert report.ok
    report.add("c", False, "why")
    assert not report.ok
    assert report.lines() == ["PASS  a", "SKIP  b: dry run", "FAIL  c: why", "gpu_check: FAILED (1 failed)"]


def test_the_manifests_are_seed_003s_classes_and_an_nvml_configuration() -> None:
    configuration, high, huge = gpu_check.manifests()
    assert configuration["spec"]["discoveryHandler"]["name"] == "nvml"
    assert configuration["spec"]["deviceKind"] == "nvidia-gpu"
    [term] = high["spec"]["resourceSelector"]
    assert term["matchExpressions"] == [
        {"key": "Kind", "operator": "In", "values": ["nvidia-gpu"]},
        {"key": "memory", "operator": "GtEq", "values": ["30G"]},
    ]
    assert huge["spec"]["resourceSelector"][0]["matchExpressions"][1]["values"] == ["200G"]


@pytest.mark.slow
def test_the_dry_run_passes_every_step_but_cuda_on_the_captured_h200(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gpu_check.py"), "--fake", str(CAPTURE), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=200,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "gpu_check.json").read_text())
    assert result["ok"] is True
    assert [c["ok"] for c in result["checks"]] == [True] * 10 + [None]  # CUDA: skipped without a GPU
    assert result["allocate"]["envs"]["NVIDIA_VISIBLE_DEVICES"] == H200_UUID
    assert result["exit_codes"] == {"kubelet-sim": 0, "agent": 0, "handler": 0, "scheduler": 0}
    assert done.stdout.splitlines()[-1] == "gpu_check: ok (0 failed)"
