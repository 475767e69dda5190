"""CEL selectors per device (issue #23): compiled once with the verdict cached, against a first-time evaluation,
over 5,000 devices x 10 classes (the seed's classes compiled to DeviceClasses, devices mapped by `api.dradevices`);
and the library choice: every CEL library for Python that is importable here, scored on Kubernetes' DRA test vectors
(tests/fixtures/dra/cel-conformance.yaml, conformance first) and timed on one selector (speed second).

Figures (all in this run): `first_us` compiles nothing (compilation is memoized) but builds the device's CEL value
and evaluates; `cached_us` answers from `Verdicts`; `cold_compile_us` compiles one class expression from scratch.
`hostile`: how long refusing each hostile selector takes (`refused_ms`, the median of fresh compiles: a refusal is
never memoized), how long the largest valid selector (10 KiB of conjunctions) takes to compile, and how long
validating a ResourceClaim of distinct such selectors takes (`claim_s`, `claim_bytes`: near the 3 MiB body limit in
a full run), the work the API server does off its event loop for one such body.
Only cel-expr-python is a dependency; cel-python (`celpy`) and common-expression-language (`cel`) are scored when
installed (`pip install cel-python common-expression-language` beside the project to reproduce the choice).
"""

from __future__ import annotations

import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

import yaml

from devplace import errors
from devplace.api import (
    DRIVER,
    DeviceInput,
    DeviceSelector,
    Requirement,
    ResourceClaim,
    Verdicts,
    compile_class,
    compile_selector,
    dra_device,
)

VECTORS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "dra" / "cel-conformance.yaml"


def _classes(n: int) -> list[DeviceSelector]:
    out = []
    for i in range(n):
        out.append(
            DeviceSelector(
                [
                    [Requirement("Kind", "In", ("gpu",)), Requirement("memory", "GtEq", (f"{8 * (i % 5 + 1)}Gi",))],
                    [Requirement("Kind", "In", ("nic",)), Requirement("speed", "GtEq", (f"{10 * (i + 1)}GBPS",))],
                ]
            )
        )
    return out


def _devices(n: int, rng: random.Random) -> list[dict[str, str]]:
    out = []
    for i in range(n):
        if i % 2:
            gpu = {"Kind": "gpu", "memory": f"{rng.choice([8, 16, 24, 32, 40, 80])}Gi", "model": f"m{i % 7}"}
            out.append({**gpu, "serial": f"gpu-{i:05d}"})  # every device distinct: a first verdict is a miss
        else:
            nic = {"Kind": "nic", "speed": f"{rng.choice([10, 25, 40, 100])}GBPS", "node": f"node-{i % 50}"}
            out.append({**nic, "serial": f"nic-{i:05d}"})
    return out


def _per_device(devices: int, classes: int) -> dict[str, Any]:
    rng = random.Random(20260723)
    expressions = [
        compile_class(f"c{i}", s)["spec"]["selectors"][0]["cel"]["expression"] for i, s in enumerate(_classes(classes))
    ]
    compile_selector("true")  # the engine is built once per process: not part of a class's compile
    compile_selector.cache_clear()
    started = time.perf_counter()
    selectors = [compile_selector(e) for e in expressions]
    cold_compile_us = (time.perf_counter() - started) / len(expressions) * 1e6
    attrs = _devices(devices, rng)
    started = time.perf_counter()
    inputs = [DeviceInput(DRIVER, dra_device(f"d{i}", a).to_wire()) for i, a in enumerate(attrs)]
    build_us = (time.perf_counter() - started) / len(inputs) * 1e6
    verdicts = Verdicts(size=devices * classes * 2)
    started = time.perf_counter()
    first = [verdicts.verdict(s, d) for d in inputs for s in selectors]
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    again = [verdicts.verdict(s, d) for d in inputs for s in selectors]
    cached_s = time.perf_counter() - started
    assert first == again
    pairs = devices * classes
    return {
        "devices": devices,
        "classes": classes,
        "matches": sum(1 for v in first if v is True),
        "cold_compile_us": round(cold_compile_us, 1),
        "device_value_us": round(build_us, 1),
        "first_us": round(first_s / pairs * 1e6, 2),
        "cached_us": round(cached_s / pairs * 1e6, 3),
        "first_over_cached": round(first_s / cached_s, 1),
        "hits": verdicts.hits,
        "misses": verdicts.misses,
    }


def vector_device(spec: dict[str, Any] | None) -> DeviceInput:
    """The device of a conformance vector, its shorthands expanded: `generate_attributes: N` (Kubernetes'
    "expensive" device: N attributes with the longest names), `generate_ints: N`, and a list attribute
    `{strings: {generate: FORMAT, count: N}}`. tests/api/test_cel.py reads the vectors through it too."""
    spec = dict(spec or {})
    driver = spec.pop("driver", "")
    attributes: dict[str, Any] = {}
    for name, value in (spec.get("attributes") or {}).items():
        if name == "generate_attributes":
            for i in range(value):
                suffix = f"-{i}"
                attributes[f"dra.example.com/{'x' * (32 - len(suffix))}{suffix}"] = {"string": "abc"}
        elif name == "generate_ints":
            for i in range(value):
                attributes[f"dra.example.com/attr{i}"] = {"int": i}
        elif isinstance(value, dict) and isinstance(next(iter(value.values())), dict):
            kind, generated = next(iter(value.items()))
            attributes[name] = {kind: [generated["generate"] % i for i in range(generated["count"])]}
        else:
            attributes[name] = value
    device = {"attributes": attributes, "capacity": spec.get("capacity") or {}}
    if "allowMultipleAllocations" in spec:
        device["allowMultipleAllocations"] = spec["allowMultipleAllocations"]
    return DeviceInput(driver, device)


def _libraries(rounds: int) -> dict[str, Any]:
    cases = [c for c in yaml.safe_load(VECTORS.read_text()) if "skip" not in c]
    expression = 'device.attributes["dra.example.com"].name == "fish" && device.driver == "dra.example.com"'
    data = {"device": {"driver": "dra.example.com", "attributes": {"dra.example.com": {"name": "fish"}}}}
    out: dict[str, Any] = {"vectors": len(cases)}

    def score(verdict_of: Any, guarded: bool = False) -> int:
        right = 0
        for case in cases:
            if guarded and "cost_error" in case["expect"]:
                continue  # an unbounded loop: a library without a cost limit would run it for minutes (counted wrong)
            expect = case["expect"]
            try:
                got: Any = verdict_of(case)
            except Exception:
                got = "error"
            wanted = expect.get("match", "error")
            right += got == wanted
        return right

    def ours(case: dict[str, Any]) -> Any:
        try:
            selector = compile_selector(case["expression"], new=case.get("env") == "new")
        except Exception:
            return "error"
        return selector.matches(vector_device(case.get("device")))

    selector = compile_selector(expression)
    single = DeviceInput("dra.example.com", {"attributes": {"name": {"string": "fish"}}})
    out["cel-expr-python"] = {"conformant": score(ours), "eval_us": _time(lambda: selector.matches(single), rounds)}
    try:
        import celpy  # type: ignore[import-untyped, import-not-found, unused-ignore]

        env = celpy.Environment()
        program = env.program(env.compile(expression))
        activation = celpy.json_to_cel(data)

        def celpy_verdict(case: dict[str, Any]) -> Any:
            return bool(env.program(env.compile(case["expression"])).evaluate({}))

        out["cel-python"] = {
            "conformant": score(celpy_verdict, guarded=True),
            "eval_us": _time(lambda: program.evaluate(activation), rounds),
        }
    except ImportError:
        out["cel-python"] = "not installed"
    try:
        import cel  # type: ignore[import-untyped, import-not-found, unused-ignore]

        compiled = cel.compile(expression)

        def rust_verdict(case: dict[str, Any]) -> Any:
            return bool(cel.compile(case["expression"]).execute({}))

        out["common-expression-language"] = {
            "conformant": score(rust_verdict, guarded=True),
            "eval_us": _time(lambda: compiled.execute(data), rounds),
        }
    except ImportError:
        out["common-expression-language"] = "not installed"
    return out


HOSTILE = {
    "nested_5000_deep": "(" * 5000 + "true" + ")" * 5000,
    "one_megabyte": "true && " * 131072 + "true",
    "over_the_cost_budget": "["
    + ",".join(map(str, range(60)))
    + "].all(x, x > 0 && ["
    + ",".join(map(str, range(60)))
    + "].all(y, ["
    + ",".join(map(str, range(60)))
    + "].all(z, x + y + z > 0)))",
    "quadratic_over_attributes": "device.attributes.all(d, device.attributes[d].all(k, "
    "device.attributes.all(e, device.attributes[e].all(k2, true))))",
}


def _largest_valid(tag: str) -> str:
    """A valid selector of nearly 10 KiB: conjunctions over the device's driver (distinct per `tag`)."""
    term = f'device.driver == "{tag}"'
    return " && ".join([term] * (10_000 // (len(term) + 4)))


def _problem(expression: str) -> str | None:
    try:
        compile_selector(expression)
    except errors.Invalid as e:
        return e.message
    return None


def _hostile(rounds: int, selectors: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, expression in HOSTILE.items():
        samples, reason = [], ""
        for _ in range(rounds):
            started = time.perf_counter()
            problem = _problem(expression)
            samples.append(time.perf_counter() - started)
            assert problem is not None, name
            reason = problem[:60]
        out[name] = {"refused_ms": round(statistics.median(samples) * 1e3, 3), "reason": reason}
    samples = []
    for i in range(rounds):
        expression = _largest_valid(f"bench-{i}")
        started = time.perf_counter()
        assert _problem(expression) is None
        samples.append(time.perf_counter() - started)
    out["largest_valid_ms"] = round(statistics.median(samples) * 1e3, 3)
    requests = [
        {
            "name": f"r{r}",
            "exactly": {
                "deviceClassName": "c",
                "selectors": [{"cel": {"expression": _largest_valid(f"claim-{r}-{s}")}} for s in range(9)],
            },
        }
        for r in range(max(1, selectors // 9))
    ]
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "heavy", "namespace": "default"},
        "spec": {"devices": {"requests": requests}},
    }
    started = time.perf_counter()
    assert list(ResourceClaim.model_validate(claim).problems()) == []
    out["claim_s"] = round(time.perf_counter() - started, 3)
    out["claim_selectors"] = 9 * len(requests)
    out["claim_bytes"] = len(json.dumps(claim))
    return out


def _time(call: Any, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return round(statistics.median(samples) * 1e6, 2)


def run(quick: bool = False) -> dict[str, Any]:
    per_device = _per_device(200 if quick else 5_000, 10)
    libraries = _libraries(50 if quick else 2_000)
    hostile = _hostile(3 if quick else 20, 18 if quick else 279)
    return {
        "per_device": per_device,
        "libraries": libraries,
        "hostile": hostile,
        "ratios": {"first_over_cached": per_device["first_over_cached"]},
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
