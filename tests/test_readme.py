"""README.md's "A short session", run as pasted, so the README and the code cannot drift apart.

The shell block is taken from README.md and run by bash in a fresh directory holding `examples/` and `.venv` (links to
the repository's), with `HOME` there too (kubectl's cache) and `make` a shell function that accepts only `make venv`
(the venv exists already). The only edit is the port: the session's 8080 becomes a free loopback port. A marker is
printed before each command, so each command's output is checked on its own; every command of the block must have a
check here (or be listed as printing nothing worth checking), so a command added to the README needs one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.servers import free_port

ROOT = Path(__file__).resolve().parent.parent
MARK = "@@@ command "


def session_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"^## A short session\n\n```sh\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    assert found, "README.md has no '## A short session' shell block"
    return found.group(1)


def command_of(line: str) -> str:
    """The command of a session line, without its trailing comment."""
    return re.split(r"\s+#\s", line, maxsplit=1)[0].strip()


def _lines(*patterns: str) -> Callable[[str], None]:
    def check(output: str) -> None:
        for pattern in patterns:
            assert re.search(pattern, output, re.MULTILINE), f"no line matches {pattern!r} in:\n{output}"

    return check


def _instances_yaml(output: str) -> None:
    listed = yaml.safe_load(output)
    assert listed["kind"] == "List"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["akri-debug-echo-482878"]


def _configurations_json(output: str) -> None:
    listed = json.loads(output)
    assert listed["kind"] == "ConfigurationList"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["akri-debug-echo"]  # shared-gpus is devplace.io


CONFIGURATIONS = _lines(
    r"^default\s+akri-debug-echo\s+debugEcho\s+2\s+true\s+perNode\s", r"^default\s+shared-gpus\s+sim\s+4\s+false\s"
)

CHECKS: dict[str, Callable[[str], None] | None] = {
    "make venv": None,
    ". .venv/bin/activate": None,
    "devplace apply -f examples/manifests": _lines(
        r"^Configuration default/akri-debug-echo created$",
        r"^Instance default/akri-debug-echo-482878 created$",
        r"^ResourceClass big-gpu created$",
    ),
    "devplace get configurations": CONFIGURATIONS,
    "devplace get instances -o yaml": _instances_yaml,
    "devplace --help": _lines(r"^Usage: devplace \[OPTIONS\] COMMAND", r"^\s+wait-ready\s"),
    "devplace server --store sqlite:///devplace.db --host 127.0.0.1 --port PORT --write-kubeconfig "
    "devplace.kubeconfig &": None,
    "devplace wait-ready --server http://127.0.0.1:PORT": None,
    "curl -s 127.0.0.1:PORT/apis/akri.sh/v0/namespaces/default/configurations | python -m json.tool": (
        _configurations_json
    ),
    "KUBECONFIG=devplace.kubeconfig kubectl get akrii -o wide": _lines(
        r"^akri-debug-echo-482878\s+akri-debug-echo\s+true\s+node-a,node-b\s"
    ),
    "KUBECONFIG=devplace.kubeconfig kubectl explain configurations.spec.brokerSpec": _lines(r"^FIELD: brokerSpec"),
    "DEVPLACE_STORE=http://127.0.0.1:PORT devplace get configurations": CONFIGURATIONS,
    "devplace apply -f examples/scheduling": _lines(r"^Pod default/trainer created$"),
    "devplace explain pod trainer": _lines(r"^node-a\s+fits$", r"^node-b\s+no device matches class big-gpu$"),
    "devplace scheduler --store sqlite:///devplace.db &": None,
    "KUBECONFIG=devplace.kubeconfig kubectl wait resourceclasses.devplace.io/big-gpu "
    "--for=jsonpath='{.status.requested}'=1": _lines(r"^resourceclass.devplace.io/big-gpu condition met$"),
    "kill %1 %2": None,
    "devplace get pod trainer -o yaml | grep -A1 annotations": _lines(
        r"^\s+scheduler.alpha.kubernetes.io/resClass_big-gpu_shared-gpus-a1b2c3: '1'$"
    ),
    "devplace get resourceclasses": _lines(r"^big-gpu\s+4\s+1\s"),
    "devplace get brokers": _lines(r"^default\s+akri-debug-echo\s+perNode\s", r"^default\s+shared-gpus\s+perNode\s"),
}


def test_every_command_of_the_session_has_a_check() -> None:
    commands = [command_of(line).replace("8080", "PORT") for line in session_block().splitlines() if line.strip()]
    assert commands == list(CHECKS)


def test_the_short_session_runs_as_pasted(tmp_path: Path) -> None:
    for tool in ("kubectl", "curl"):
        if shutil.which(tool) is None:
            pytest.skip(f"the session needs {tool}")
    block = session_block()
    assert block.count("8080") == 4, "the session's port changed: update this test's port substitution"
    port = free_port()
    lines = [line.replace("8080", str(port)) for line in block.splitlines() if line.strip()]
    script = ["set -e -o pipefail", 'make() { [ "$*" = venv ]; }']  # the venv is there; any other target fails
    for index, line in enumerate(lines):
        script += [f"echo '{MARK}{index}'", line]
    (tmp_path / "session.sh").write_text("\n".join(script) + "\n")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEVPLACE_", "KUBECONFIG", "VIRTUAL_ENV"))}
    env |= {"HOME": str(tmp_path), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"}
    with (tmp_path / "output").open("w+") as log:
        proc = subprocess.Popen(
            ["bash", "session.sh"], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = proc.wait(timeout=100)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            # The session's own background jobs are in its process group; if it failed before `kill %1 %2`, stop them.
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        log.seek(0)
        output = log.read()
    assert code == 0, output
    assert "connection refused" not in output.lower(), output
    assert "localhost:8080" not in output, output  # kubectl's fallback when it has no kubeconfig
    sections = re.split(rf"^{MARK}(\d+)\n", output, flags=re.MULTILINE)[1:]
    outputs = {int(sections[i]): sections[i + 1] for i in range(0, len(sections), 2)}
    assert sorted(outputs) == list(range(len(lines)))
    for index, line in enumerate(lines):
        check = CHECKS[command_of(line).replace(str(port), "PORT")]
        if check is not None:
            check(outputs[index])
