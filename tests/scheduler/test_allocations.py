"""DRA allocation for one pod on one node (scheduler._allocations, scheduler._claims).

Three kinds of evidence:
- Kubernetes' own allocator test table, carried as data (tests/fixtures/dra/allocator/kubernetes.yaml): every carried
  case gets Kubernetes' verdict, and with `first_fit` the devices Kubernetes' first fit picks;
- properties on random small instances: whatever is allocated keeps every rule (an independent checker below, written
  from the rules, not from the allocator), and a "no fit" agrees with an exhaustive search;
- the bounded search: a pathological instance ends with Undecided after the budget, never a wrong verdict.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devplace import errors
from devplace.api import DeviceInput, Quantity, compile_selector
from devplace.scheduler._allocations import Fit, NodeRef, NoFit, Snapshot, Undecided, available_on
from devplace.scheduler._claims import gather_pools, parse_claim, qualified

TABLE = yaml.safe_load((Path(__file__).parents[1] / "fixtures" / "dra" / "allocator" / "kubernetes.yaml").read_text())
CASES = TABLE["cases"]


def _held_claims(case: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Other claims' allocations, as ResourceClaim wire dicts, from the case's held device ids."""
    results: list[dict[str, Any]] = [
        {"request": "other", "driver": d, "pool": p, "device": n} for d, p, n in case.get("allocated", ())
    ]
    for i, share in enumerate(case.get("allocatedShares", ())):
        d, p, n = share["device"]
        results.append(
            {
                "request": "other",
                "driver": d,
                "pool": p,
                "device": n,
                "shareID": f"00000000-0000-4000-8000-{i:012d}",
                "consumedCapacity": share["consumedCapacity"],
            }
        )
    return [{"status": {"allocation": {"devices": {"results": results}}}}] if results else []


def _decide(case: Mapping[str, Any], first_fit: bool) -> Fit | NoFit | Undecided | errors.Invalid:
    snapshot = Snapshot(case["slices"], case["classes"], _held_claims(case))
    node = NodeRef(case["node"]["name"], case["node"]["labels"])
    try:
        return snapshot.allocate(node, case["claims"], first_fit=first_fit)
    except errors.Invalid as e:
        return e


def _amount(value: Any) -> Fraction:
    return Quantity(str(value)).as_fraction()


def _result_key(result: Mapping[str, Any]) -> tuple[Any, ...]:
    return (
        result["request"],
        result["driver"],
        result["pool"],
        result["device"],
        bool(result.get("adminAccess")),
        bool(result.get("shareID")) or bool(result.get("shared")),
        tuple(sorted((k, _amount(v)) for k, v in (result.get("consumedCapacity") or {}).items())),
        tuple(tuple(sorted(t.items())) for t in result.get("tolerations") or ()),
        tuple(result.get("bindingConditions") or ()),
        tuple(result.get("bindingFailureConditions") or ()),
    )


def _selector_key(selector: Mapping[str, Any] | None) -> Any:
    if selector is None:
        return None
    return sorted(
        tuple(
            sorted(
                (part, r["key"], r["operator"], tuple(sorted(r.get("values") or ())))
                for part in ("matchExpressions", "matchFields")
                for r in term.get(part) or ()
            )
        )
        for term in selector["nodeSelectorTerms"]
    )


def _same_allocation(got: Mapping[str, Any], want: Mapping[str, Any]) -> None:
    assert sorted(map(_result_key, got["devices"]["results"])) == sorted(map(_result_key, want["results"]))
    assert _selector_key(got.get("nodeSelector")) == _selector_key(want["nodeSelector"])
    if "config" in want:
        assert got["devices"].get("config", []) == want["config"]


def _expected(case: Mapping[str, Any]) -> str:
    return str((case.get("devplace") or {}).get("verdict", case["verdict"]))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_every_carried_kubernetes_case_gets_kubernetes_verdict(case: dict[str, Any]) -> None:
    outcome = _decide(case, first_fit=False)
    expected = _expected(case)
    if expected == "feasible":
        assert isinstance(outcome, Fit), outcome
        assert len(outcome.allocations) == len(case["claims"])
        assert check(case, outcome) == []
    else:
        assert isinstance(outcome, NoFit | errors.Invalid), outcome


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if _expected(c) == "feasible" and c.get("firstFitDetermined")],
    ids=lambda c: c["name"],
)
def test_first_fit_picks_the_devices_kubernetes_picks(case: dict[str, Any]) -> None:
    outcome = _decide(case, first_fit=True)
    assert isinstance(outcome, Fit), outcome
    assert len(outcome.allocations) == len(case["allocations"])
    for got, want in zip(outcome.allocations, case["allocations"], strict=True):
        _same_allocation(got, want)


def test_the_table_carries_most_of_kubernetes_cases_and_says_why_it_skips_the_rest() -> None:
    assert TABLE["upstreamCases"] == len(CASES) + len(TABLE["skipped"]) == 213
    assert len(CASES) >= 180
    assert all(s["skip"] for s in TABLE["skipped"])
    assert {c["verdict"] for c in CASES} == {"feasible", "infeasible", "error"}


def test_kubernetes_errors_are_refusals_that_say_what_is_wrong() -> None:
    by_name = {c["name"]: c for c in CASES}
    outcomes = {
        name: _decide(by_name[name], first_fit=False)
        for name in ("unknown-class", "duplicate-slice", "too-many-devices-total", "all-devices-of-the-incomplete-pool")
    }
    assert isinstance(outcomes["unknown-class"], NoFit)
    assert "device class unknown-class not found" in outcomes["unknown-class"].reason
    assert isinstance(outcomes["duplicate-slice"], NoFit)
    assert "invalid resource pools were encountered" in outcomes["duplicate-slice"].reason
    assert "duplicate device name device-1" in outcomes["duplicate-slice"].reason
    assert isinstance(outcomes["too-many-devices-total"], NoFit)
    assert "exceeds the claim limit of 32" in outcomes["too-many-devices-total"].reason
    assert isinstance(outcomes["all-devices-of-the-incomplete-pool"], NoFit)
    assert "currently being updated" in outcomes["all-devices-of-the-incomplete-pool"].reason
    unknown_mode = _decide(by_name["unknown-allocation-mode"], first_fit=False)
    assert isinstance(unknown_mode, errors.Invalid)
    assert "spec.devices.requests[0].exactly.allocationMode: unsupported count mode future-mode" in str(unknown_mode)


# -- an independent checker: the rules of dra.md section 3, from the wire inputs -------------------------------------


def _consumed(device: Any, requested: Mapping[str, Fraction]) -> dict[str, Fraction] | None:
    """Per capacity of the device, what one allocation consumes; None when the device cannot serve it."""
    out: dict[str, Fraction] = {}
    names = {qualified(k, device.driver): v for k, v in requested.items()}
    if any(k not in device.capacity for k in names):
        return None
    for key, cap in device.capacity.items():
        policy = cap.policy
        want = names.get(key)
        if want is None:
            amount = policy.default if policy and policy.default is not None else cap.value
        elif policy is None:
            amount = want
        elif policy.minimum is not None:
            amount = want if want > policy.minimum else policy.minimum
            if policy.step and want > policy.minimum:
                n = (want - policy.minimum) / policy.step
                amount = policy.minimum + policy.step * -(-n.numerator // n.denominator)
        elif policy.valid_values is not None:
            amount = next((v for v in policy.valid_values if v >= want), want)
        else:
            amount = want
        if policy is not None:
            if policy.minimum is not None and (
                amount < policy.minimum
                or (policy.maximum is not None and amount > policy.maximum)
                or (policy.step and (amount - policy.minimum) % policy.step)
            ):
                return None
            if policy.minimum is None and policy.valid_values is not None and amount not in policy.valid_values:
                return None
        if amount > cap.value:
            return None
        out[key] = amount
    return out


def _request_map(claim: Mapping[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Result request name -> (slot name, request fields)."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for r in claim["spec"]["devices"]["requests"]:
        if r.get("exactly") is not None:
            out[r["name"]] = (r["name"], r["exactly"])
        for s in r.get("firstAvailable") or ():
            out[f"{r['name']}/{s['name']}"] = (r["name"], s)
    return out


_SELECTED: dict[tuple[Any, ...], bool] = {}


def _selects(expressions: Sequence[str], device: Any) -> bool:
    key = (tuple(expressions), device.driver, json.dumps(device.wire, sort_keys=True))
    if key not in _SELECTED:
        cel = DeviceInput(device.driver, device.wire)
        _SELECTED[key] = all(compile_selector(e, new=False).matches(cel) for e in expressions)
    return _SELECTED[key]


def _usable_devices(case: Mapping[str, Any], pools: Mapping[tuple[str, str], Any]) -> list[Any]:
    node = case["node"]
    out = []
    for p in pools.values():
        if not p.complete or p.problem:
            continue
        for s in p.slices:
            for d in s.devices:
                locality = d.locality if s.per_device else s.locality
                if locality is not None and locality.reaches(node["name"], node["labels"]):
                    out.append(d)
    return out


def _all_set(
    case: Mapping[str, Any],
    fields: Mapping[str, Any],
    pools: Mapping[tuple[str, str], Any],
    classes: Mapping[str, list[str]],
    held_use: Mapping[tuple[str, str, str], Mapping[str, Fraction]],
) -> list[Any]:
    """What an All request must get: every usable device its selectors match whose capacity other claims left."""
    expressions = classes[fields["deviceClassName"]] + [s["cel"]["expression"] for s in fields.get("selectors") or ()]
    requested = {k: _amount(v) for k, v in ((fields.get("capacity") or {}).get("requests") or {}).items()}
    out = []
    for d in _usable_devices(case, pools):
        if not _selects(expressions, d):
            continue
        consumed = _consumed(d, requested)
        if consumed is None:
            continue
        used = held_use.get(d.id, {})
        if all(used.get(k, 0) + v <= d.capacity[k].value for k, v in consumed.items()):
            out.append(d)
    return out


def check(case: Mapping[str, Any], fit: Fit) -> list[str]:
    """Every way `fit` breaks a rule (empty when it keeps them all)."""
    problems: list[str] = []
    node = case["node"]
    pools = {(p.driver, p.name): p for p in gather_pools(case["slices"])}
    classes = {
        c["metadata"]["name"]: [s["cel"]["expression"] for s in c["spec"].get("selectors") or ()]
        for c in case["classes"]
    }
    held = set()
    held_use: dict[tuple[str, str, str], dict[str, Fraction]] = {}
    for other in _held_claims(case):
        for r in other["status"]["allocation"]["devices"]["results"]:
            device = (r["driver"], r["pool"], r["device"])
            if r.get("shareID"):
                use = held_use.setdefault(device, {})
                for k, v in r["consumedCapacity"].items():
                    use[qualified(k, r["driver"])] = use.get(qualified(k, r["driver"]), Fraction(0)) + _amount(v)
            else:
                held.add(device)

    def lookup(driver: str, pool: str, name: str) -> tuple[Any, Any] | None:
        p = pools.get((driver, pool))
        if p is None or not p.complete or p.problem:
            return None
        for s in p.slices:
            for d in s.devices:
                if d.name == name:
                    locality = d.locality if s.per_device else s.locality
                    if locality is not None and locality.reaches(node["name"], node["labels"]):
                        return d, p
        return None

    exclusive_users: dict[tuple[str, str, str], list[tuple[int, bool]]] = {}
    share_use: dict[tuple[str, str, str], dict[str, Fraction]] = {}
    counter_use: dict[tuple[str, str], dict[tuple[str, str], Fraction]] = {}
    charged: set[tuple[str, str, str]] = set()
    for c, (claim, allocation) in enumerate(zip(case["claims"], fit.allocations, strict=True)):
        requests = _request_map(claim)
        results = allocation["devices"]["results"]
        if len(results) > 32:
            problems.append(f"claim {c}: {len(results)} results")
        chosen: dict[str, str] = {}
        per_request: dict[str, list[Any]] = {}
        for r in results:
            if r["request"] not in requests:
                problems.append(f"claim {c}: unknown request {r['request']}")
                continue
            slot, fields = requests[r["request"]]
            if chosen.setdefault(slot, r["request"]) != r["request"]:
                problems.append(f"claim {c}: two alternatives of {slot} used")
            found = lookup(r["driver"], r["pool"], r["device"])
            if found is None:
                problems.append(f"claim {c}: {r['device']} is not a usable device of the node")
                continue
            device, pool = found
            per_request.setdefault(r["request"], []).append(device)
            if not _selects(
                classes[fields["deviceClassName"]] + [s["cel"]["expression"] for s in fields.get("selectors") or ()],
                device,
            ):
                problems.append(f"claim {c}: {device.name} does not match {r['request']}'s selectors")
            tolerations = fields.get("tolerations") or ()
            for taint in device.taints:
                if taint.effect in ("NoSchedule", "NoExecute") and not any(
                    (not t.get("effect") or t["effect"] == taint.effect)
                    and (not t.get("key") or t["key"] == taint.key)
                    and (t.get("operator") == "Exists" or (t.get("value") or "") == taint.value)
                    for t in tolerations
                ):
                    problems.append(f"claim {c}: {device.name} has an untolerated taint")
            requested = {k: _amount(v) for k, v in ((fields.get("capacity") or {}).get("requests") or {}).items()}
            consumed = _consumed(device, requested)
            if consumed is None:
                problems.append(f"claim {c}: {device.name} cannot serve {r['request']}'s capacity")
                continue
            admin = bool(fields.get("adminAccess"))
            if device.shared:
                if device.id in held and not admin:
                    problems.append(f"claim {c}: shared {device.name} is held exclusively")
                if not r.get("shareID"):
                    problems.append(f"claim {c}: shared {device.name} without a shareID")
                use = share_use.setdefault(device.id, dict(held_use.get(device.id, {})))
                for k, v in consumed.items():
                    use[k] = use.get(k, Fraction(0)) + v
                    if use[k] > device.capacity[k].value:
                        problems.append(f"claim {c}: {device.name}'s {k} is over-consumed")
                reported = {
                    qualified(k, device.driver): _amount(v) for k, v in (r.get("consumedCapacity") or {}).items()
                }
                if reported != consumed:
                    problems.append(f"claim {c}: {device.name} reports {reported}, consumes {consumed}")
            else:
                if not admin and (device.id in held or device.id in held_use):
                    problems.append(f"claim {c}: {device.name} is held by another claim")
                exclusive_users.setdefault(device.id, []).append((c, admin))
            if device.counters and not (device.shared and (device.id in charged or device.id in held_use)):
                charged.add(device.id)
                used = counter_use.setdefault((device.driver, device.pool), {})
                for set_name, counter, amount in device.counters:
                    used[(set_name, counter)] = used.get((set_name, counter), Fraction(0)) + amount
        for name, devices in per_request.items():
            _, fields = requests[name]
            if fields.get("allocationMode") == "All":
                want = {d.id for d in _all_set(case, fields, pools, classes, held_use)}
                if {d.id for d in devices} != want or len(devices) != len(want):
                    problems.append(f"claim {c}: {name} got {[d.name for d in devices]}, not all it matches")
                continue
            if len(devices) != fields.get("count", 1):
                problems.append(f"claim {c}: {name} got {len(devices)} devices, not {fields.get('count', 1)}")
            if len({d.id for d in devices}) != len(devices):
                problems.append(f"claim {c}: {name} got a device twice")
        for slot_request in claim["spec"]["devices"]["requests"]:
            if slot_request["name"] not in chosen:
                problems.append(f"claim {c}: request {slot_request['name']} got nothing")
        for constraint in claim["spec"]["devices"].get("constraints") or ():
            names = set(constraint.get("requests") or ())
            attribute = constraint.get("matchAttribute") or constraint.get("distinctAttribute")
            values = [
                d.attributes.get(attribute)
                for request, devices in per_request.items()
                if not names or request in names or request.split("/")[0] in names
                for d in devices
            ]
            if any(v is None for v in values):
                problems.append(f"claim {c}: a device lacks {attribute}")
            elif constraint.get("matchAttribute") and len(set(values)) > 1:
                problems.append(f"claim {c}: {attribute} differs: {values}")
            elif constraint.get("distinctAttribute") and len(set(values)) != len(values):
                problems.append(f"claim {c}: {attribute} repeats: {values}")
        if not available_on(allocation, NodeRef(node["name"], node["labels"])):
            problems.append(f"claim {c}: its node selector does not select the node")
    for device_id, users in exclusive_users.items():
        plain = [c for c, admin in users if not admin]
        if len(plain) > 1:
            problems.append(f"{device_id} given to {len(plain)} requests")
        admins = [c for c, admin in users if admin]
        if len(admins) != len(set(admins)):
            problems.append(f"{device_id} given twice in one claim with adminAccess")
    for (driver, pool_name), used in counter_use.items():
        pool = pools[(driver, pool_name)]
        for key, amount in used.items():
            before = sum(
                (
                    a
                    for s in pool.slices
                    for d in s.devices
                    if d.id in held or d.id in held_use
                    for cs, cn, a in d.counters
                    if (cs, cn) == key
                ),
                Fraction(0),
            )
            if before + amount > pool.counters[key]:
                problems.append(f"pool {pool_name}: counter {key} overdrawn")
    return problems


# -- properties on random small instances ----------------------------------------------------------------------------

_MODEL_A = 'device.attributes["driver-a"].model == "a"'
_NUMA_1 = 'device.attributes["driver-a"].numa == 1'


@st.composite
def instances(draw: st.DrawFn, max_devices: int = 4, max_units: int = 3) -> dict[str, Any]:
    """A node with a few devices (exclusive, shared with capacity, tainted, drawing on counters) in one or two
    pools, some held by other claims, and one or two claims with requests, alternatives and constraints."""
    n = draw(st.integers(1, max_devices))
    counters = draw(st.booleans())
    devices: list[dict[str, Any]] = []
    held: list[list[str]] = []
    shares: list[dict[str, Any]] = []
    for i in range(n):
        d: dict[str, Any] = {
            "name": f"d{i}",
            "attributes": {"numa": {"int": draw(st.integers(0, 1))}, "model": {"string": draw(st.sampled_from("ab"))}},
        }
        kind = draw(st.sampled_from(["plain", "plain", "capacity", "shared"]))
        if kind != "plain":
            d["capacity"] = {"mem": {"value": str(draw(st.integers(1, 4)))}}
        if kind == "shared":
            d["allowMultipleAllocations"] = True
        if draw(st.integers(0, 5)) == 0:
            d["taints"] = [{"key": "k", "value": "v", "effect": draw(st.sampled_from(["NoSchedule", "None"]))}]
        pool = "pool-1" if i % 2 == 0 or n < 3 else "pool-2"
        if counters and pool == "pool-1" and draw(st.booleans()):
            d["consumesCounters"] = [{"counterSet": "cs", "counters": {"c": {"value": str(draw(st.integers(1, 2)))}}}]
        held_now = draw(st.integers(0, 4)) == 0
        if held_now and kind == "shared":
            shares.append({"device": ["driver-a", pool, d["name"]], "consumedCapacity": {"mem": "1"}})
        elif held_now:
            held.append(["driver-a", pool, d["name"]])
        devices.append(d)
    slices = []
    for pool in ("pool-1", "pool-2"):
        members = [d for i, d in enumerate(devices) if ("pool-1" if i % 2 == 0 or n < 3 else "pool-2") == pool]
        if not members:
            continue
        extra = counters and pool == "pool-1"
        spec = {"driver": "driver-a", "pool": {"name": pool, "generation": 1, "resourceSliceCount": 2 if extra else 1}}
        slices.append(
            {"metadata": {"name": f"{pool}-devices"}, "spec": {**spec, "nodeName": "node-1", "devices": members}}
        )
        if extra:
            sets = [{"name": "cs", "counters": {"c": {"value": str(draw(st.integers(1, 3)))}}}]
            slices.append(
                {
                    "metadata": {"name": f"{pool}-counters"},
                    "spec": {**spec, "nodeName": "node-1", "sharedCounters": sets},
                }
            )

    def fields() -> dict[str, Any]:
        f: dict[str, Any] = {"deviceClassName": "class-a"}
        selector = draw(st.sampled_from([None, None, _MODEL_A, _NUMA_1]))
        if selector:
            f["selectors"] = [{"cel": {"expression": selector}}]
        if draw(st.integers(0, 4)) == 0:
            f["allocationMode"] = "All"
        else:
            f["allocationMode"] = "ExactCount"
            f["count"] = draw(st.integers(1, 2))
        if draw(st.integers(0, 2)) == 0:
            f["capacity"] = {"requests": {"mem": str(draw(st.integers(1, 2)))}}
        if draw(st.integers(0, 3)) == 0:
            f["tolerations"] = [{"key": "k", "operator": "Exists"}]
        return f

    claims = []
    units = draw(st.integers(1, max_units))
    per_claim = [units] if units == 1 or draw(st.booleans()) else [1, units - 1]
    for c, count in enumerate(per_claim):
        requests = []
        for r in range(count):
            if draw(st.integers(0, 3)) == 0:
                requests.append({"name": f"r{r}", "firstAvailable": [{"name": f"s{j}", **fields()} for j in range(2)]})
            else:
                requests.append({"name": f"r{r}", "exactly": fields()})
        devices_spec: dict[str, Any] = {"requests": requests}
        constraints = []
        for _ in range(draw(st.integers(0, 2))):
            kind = draw(st.sampled_from(["matchAttribute", "distinctAttribute"]))
            named = draw(st.sampled_from([[], [requests[0]["name"]], [r["name"] for r in requests]]))
            constraint = {kind: f"driver-a/{draw(st.sampled_from(['numa', 'model']))}"}
            if named:
                constraint["requests"] = named
            constraints.append(constraint)
        if constraints:
            devices_spec["constraints"] = constraints
        claims.append({"metadata": {"name": f"claim-{c}", "namespace": "default"}, "spec": {"devices": devices_spec}})
    return {
        "name": "random",
        "node": {"name": "node-1", "labels": {}},
        "classes": [
            {
                "metadata": {"name": "class-a"},
                "spec": {"selectors": [{"cel": {"expression": 'device.driver == "driver-a"'}}]},
            }
        ],
        "slices": slices,
        "allocated": held,
        "allocatedShares": shares,
        "claims": claims,
    }


def _exhaustive(case: Mapping[str, Any]) -> bool:
    """Is there any allocation at all? Every alternative and every combination of matching devices per request,
    each candidate judged by `check` alone."""
    pools = {(p.driver, p.name): p for p in gather_pools(case["slices"])}
    classes = {
        c["metadata"]["name"]: [s["cel"]["expression"] for s in c["spec"].get("selectors") or ()]
        for c in case["classes"]
    }
    held_use: dict[tuple[str, str, str], dict[str, Fraction]] = {}
    for share in case.get("allocatedShares", ()):
        held_use[tuple(share["device"])] = {f"driver-a/{k}": _amount(v) for k, v in share["consumedCapacity"].items()}  # type: ignore[index]
    usable = _usable_devices(case, pools)
    options: list[list[tuple[int, list[dict[str, Any]]]]] = []
    for c, claim in enumerate(case["claims"]):
        for r in claim["spec"]["devices"]["requests"]:
            alts = (
                [(r["name"], r["exactly"])]
                if r.get("exactly")
                else [(f"{r['name']}/{s['name']}", s) for s in r["firstAvailable"]]
            )
            choices: list[tuple[int, list[dict[str, Any]]]] = []
            for request_name, f in alts:
                expressions = classes[f["deviceClassName"]] + [s["cel"]["expression"] for s in f.get("selectors") or ()]
                if f.get("allocationMode") == "All":
                    sets = [_all_set(case, f, pools, classes, held_use)]
                    sets = [s for s in sets if s]
                else:
                    matching = [d for d in usable if _selects(expressions, d)]
                    sets = [list(s) for s in itertools.combinations(matching, f["count"])]
                requested = {k: _amount(v) for k, v in ((f.get("capacity") or {}).get("requests") or {}).items()}
                for s in sets:
                    results = []
                    for d in s:
                        entry: dict[str, Any] = {
                            "request": request_name,
                            "driver": d.driver,
                            "pool": d.pool,
                            "device": d.name,
                        }
                        consumed = _consumed(d, requested)
                        if d.shared:
                            entry["shareID"] = "x"
                            if consumed:
                                entry["consumedCapacity"] = {d.capacity[k].name: str(v) for k, v in consumed.items()}
                        results.append(entry)
                    choices.append((c, results))
            options.append(choices)
    for combo in itertools.product(*options):
        allocations: list[dict[str, Any]] = [{"devices": {"results": []}} for _ in case["claims"]]
        for c, results in combo:
            allocations[c]["devices"]["results"].extend(results)
        if not check(case, Fit(tuple(allocations), 0)):
            return True
    return False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(instances())
def test_a_verdict_on_a_small_instance_agrees_with_an_exhaustive_search(case: dict[str, Any]) -> None:
    outcome = _decide(case, first_fit=False)
    assert not isinstance(outcome, Undecided | errors.Invalid), outcome
    assert isinstance(outcome, Fit) == _exhaustive(case), outcome
    if isinstance(outcome, Fit):
        assert check(case, outcome) == []
    first = _decide(case, first_fit=True)
    assert type(first) is type(outcome)
    if isinstance(first, Fit):
        assert check(case, first) == []


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_devices=10, max_units=5))
def test_an_allocation_never_gives_a_device_twice_and_keeps_every_selector_and_constraint(case: dict[str, Any]) -> None:
    for first_fit in (False, True):
        outcome = _decide(case, first_fit=first_fit)
        assert not isinstance(outcome, errors.Invalid)
        if isinstance(outcome, Fit):
            assert check(case, outcome) == []


# -- targeted rules ----------------------------------------------------------------------------------------------------

DRIVER = "gpu.example.com"
ANY = {"metadata": {"name": "any"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
NODE = NodeRef("node-1", {"zone": "a"})


def _slice(devices: list[dict[str, Any]], name: str = "node-1", **spec: Any) -> dict[str, Any]:
    body = {"driver": DRIVER, "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}, "nodeName": "node-1"}
    body.update(spec)
    body["devices"] = devices
    return {"metadata": {"name": f"{name}-slice"}, "spec": body}


def _claim(
    *requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None, name: str = "c"
) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}, "spec": {"devices": devices}}


def _exactly(name: str, count: int = 1, **fields: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": "any", "count": count, **fields}}


def _latin(n: int) -> tuple[Snapshot, dict[str, Any]]:
    """n x n devices (a, b, c = a + b mod n) and a claim for n of them with a, b and c all distinct: a transversal
    of the cyclic Latin square, which does not exist for even n. Three distinctAttribute constraints are outside
    the exact shapes, so only the bounded search can say no."""
    devices = [
        {"name": f"d{a}-{b}", "attributes": {"a": {"int": a}, "b": {"int": b}, "c": {"int": (a + b) % n}}}
        for a in range(n)
        for b in range(n)
    ]
    claim = _claim(
        _exactly("r", n),
        constraints=[{"distinctAttribute": f"{DRIVER}/{k}"} for k in "abc"],
    )
    return Snapshot([_slice(devices)], [ANY]), claim


def test_a_search_longer_than_its_budget_ends_undecided_and_never_with_a_wrong_verdict() -> None:
    snapshot, claim = _latin(6)
    outcome = snapshot.allocate(NODE, [claim], budget=500)
    assert outcome == Undecided(
        "undecided after 500 steps: the claims' constraints need a search longer than the budget", 501
    )
    decided = snapshot.allocate(NODE, [claim])
    assert isinstance(decided, NoFit)
    assert decided.reason == f"no combination of devices satisfies the claims (searched {decided.steps} steps)"
    assert 500 < decided.steps < 20_000


def test_an_odd_latin_square_has_a_transversal_and_the_search_finds_one() -> None:
    snapshot, claim = _latin(5)
    outcome = snapshot.allocate(NODE, [claim])
    assert isinstance(outcome, Fit)
    chosen = [r["device"] for r in outcome.allocations[0]["devices"]["results"]]
    rows = [tuple(int(x) for x in name[1:].split("-")) for name in chosen]
    assert len({a for a, _ in rows}) == len({b for _, b in rows}) == len({(a + b) % 5 for a, b in rows}) == 5


@pytest.mark.parametrize(("devices", "count"), [(5, 6), (40, 41), (128, 33)])
def test_more_identical_devices_than_there_are_is_refused_in_one_step(devices: int, count: int) -> None:
    """kubernetes#131730: Kubernetes tries every combination before it says no."""
    snapshot = Snapshot([_slice([{"name": f"d{i}"} for i in range(devices)])], [ANY])
    outcome = snapshot.allocate(NODE, [_claim(_exactly("r", min(count, 32)), _exactly("s", max(count - 32, 1)))])
    assert isinstance(outcome, NoFit)
    assert outcome.steps <= 2


def test_sixteen_requests_for_one_device_each_on_fifteen_devices_need_no_search() -> None:
    snapshot = Snapshot([_slice([{"name": f"d{i}", "attributes": {"i": {"int": i}}} for i in range(15)])], [ANY])
    claim = _claim(*(_exactly(f"r{i}") for i in range(16)))
    outcome = snapshot.allocate(NODE, [claim])
    assert outcome == NoFit(
        "claim uid-c, requests " + ", ".join(f"r{i}" for i in range(16)) + ": 16 devices cannot be had together", 1
    )


def test_a_matching_attribute_that_no_value_has_enough_of_is_refused_at_once_with_the_reason() -> None:
    devices = [{"name": f"d{i}", "attributes": {"numa": {"int": i % 2}}} for i in range(8)]
    snapshot = Snapshot([_slice(devices)], [ANY])
    claim = _claim(
        _exactly("a", 3),
        _exactly("b", 2, selectors=[{"cel": {"expression": "true"}}]),
        constraints=[{"matchAttribute": f"{DRIVER}/numa"}],
    )
    outcome = snapshot.allocate(NODE, [claim])
    assert outcome == NoFit(
        f"claim uid-c, requests a, b: no 5 devices keep the constraints (matchAttribute {DRIVER}/numa)", 1
    )
    held = _claim(
        _exactly("a", 3),
        _exactly("b", 1, capacity={"requests": {}}),
        constraints=[{"matchAttribute": f"{DRIVER}/numa"}],
    )
    assert isinstance(snapshot.allocate(NODE, [held]), Fit)


def test_assumed_allocations_are_held_for_the_next_pod_of_the_cycle() -> None:
    snapshot = Snapshot([_slice([{"name": "d0"}, {"name": "d1"}])], [ANY])
    first = snapshot.allocate(NODE, [_claim(_exactly("r"), name="p1")])
    assert isinstance(first, Fit)
    assert first.allocations[0]["devices"]["results"][0]["device"] == "d0"
    snapshot.assume(first.allocations)
    second = snapshot.allocate(NODE, [_claim(_exactly("r"), name="p2")])
    assert isinstance(second, Fit)
    assert second.allocations[0]["devices"]["results"][0]["device"] == "d1"
    snapshot.assume(second.allocations)
    third = snapshot.allocate(NODE, [_claim(_exactly("r"), name="p3")])
    assert third == NoFit("claim uid-p3, request r: 1 devices needed, 2 match and 0 of them can be had", 1)


def test_shares_of_one_device_get_distinct_reproducible_lowercase_share_ids() -> None:
    device = {"name": "d0", "allowMultipleAllocations": True, "capacity": {"mem": {"value": "4Gi"}}}
    snapshot = Snapshot([_slice([device])], [ANY])
    claim = _claim(
        _exactly("a", capacity={"requests": {"mem": "1Gi"}}), _exactly("b", capacity={"requests": {"mem": "2Gi"}})
    )
    outcome = snapshot.allocate(NODE, [claim])
    assert isinstance(outcome, Fit)
    results = outcome.allocations[0]["devices"]["results"]
    assert [r["consumedCapacity"] for r in results] == [{"mem": "1Gi"}, {"mem": "2Gi"}]
    ids = [r["shareID"] for r in results]
    assert len(set(ids)) == 2
    assert all(i == i.lower() and len(i) == 36 for i in ids)
    again = snapshot.allocate(NODE, [claim])
    assert isinstance(again, Fit)
    assert [r["shareID"] for r in again.allocations[0]["devices"]["results"]] == ids
    snapshot.assume(outcome.allocations)
    full = snapshot.allocate(NODE, [_claim(_exactly("c", capacity={"requests": {"mem": "2Gi"}}), name="other")])
    assert isinstance(full, NoFit)


def test_a_selector_that_fails_at_run_time_refuses_the_pod_on_the_node_naming_the_device() -> None:
    snapshot = Snapshot([_slice([{"name": "d0", "attributes": {"model": {"string": "a"}}}])], [ANY])
    claim = _claim(_exactly("r", selectors=[{"cel": {"expression": f'device.attributes["{DRIVER}"].memory > 1'}}]))
    outcome = snapshot.allocate(NODE, [claim])
    assert isinstance(outcome, NoFit)
    assert outcome.reason.startswith(
        f"claim uid-c, request r: request r: selector #0 on device {DRIVER}/node-1/d0: CEL runtime error:"
    )
    assert "no such key: memory" in outcome.reason


@pytest.mark.parametrize(
    ("request_", "path"),
    [
        ({"name": "r", "exactly": {"count": 1}}, "spec.devices.requests[0].exactly.deviceClassName"),
        ({"name": "r", "exactly": {"deviceClassName": "any", "count": 0}}, "spec.devices.requests[0].exactly.count"),
        ({"name": "r"}, "spec.devices.requests[0]"),
        (
            {"name": "r", "exactly": {"deviceClassName": "any", "selectors": [{"cel": {"expression": "device."}}]}},
            "spec.devices.requests[0].exactly.selectors[0].cel.expression",
        ),
        (
            {"name": "r", "firstAvailable": [{"name": "s", "deviceClassName": "any", "allocationMode": "Some"}]},
            "spec.devices.requests[0].firstAvailable[0].allocationMode",
        ),
    ],
)
def test_a_claim_kubernetes_would_not_allocate_is_refused_naming_the_field(request_: dict[str, Any], path: str) -> None:
    with pytest.raises(errors.Invalid) as refused:
        parse_claim(_claim(request_))
    assert [f.path for f in refused.value.fields] == [path]


def test_an_allocation_is_usable_from_the_nodes_its_selector_selects() -> None:
    local = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}
    zone = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}
    assert available_on({"devices": {"results": []}}, "node-9")
    assert available_on({"nodeSelector": local}, NODE)
    assert not available_on({"nodeSelector": local}, NodeRef("node-2", {"zone": "a"}))
    assert available_on({"nodeSelector": zone}, {"metadata": {"name": "node-2", "labels": {"zone": "a"}}})
    assert not available_on({"nodeSelector": zone}, NodeRef("node-2", {"zone": "b"}))


def test_a_device_shared_by_the_nodes_of_a_selector_gives_that_selector_not_the_node() -> None:
    zone = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}
    spec = {"nodeSelector": zone}
    body = _slice([{"name": "cam"}], **spec)
    del body["spec"]["nodeName"]
    snapshot = Snapshot([body], [ANY])
    outcome = snapshot.allocate(NODE, [_claim(_exactly("r"))])
    assert isinstance(outcome, Fit)
    assert outcome.allocations[0]["nodeSelector"] == zone
    assert isinstance(snapshot.allocate(NodeRef("node-2", {"zone": "b"}), [_claim(_exactly("r"))]), NoFit)


def test_first_fit_on_an_exact_shape_never_backtracks_even_on_a_full_slice() -> None:
    """4 requests x 2 devices matching one numa among 128 devices, only numa 7 has 8 free: first fit follows
    Kubernetes' order, and the exact check before each choice keeps it from trying any doomed branch."""
    devices = [{"name": f"d{i}", "attributes": {"numa": {"int": i % 16}, "i": {"int": i}}} for i in range(128)]
    held = [
        {"request": "x", "driver": DRIVER, "pool": "node-1", "device": f"d{i}"}
        for i in range(128)
        if i % 16 != 7 and i % 3
    ]
    snapshot = Snapshot([_slice(devices)], [ANY], [{"status": {"allocation": {"devices": {"results": held}}}}])
    claim = _claim(*(_exactly(f"r{k}", 2) for k in range(4)), constraints=[{"matchAttribute": f"{DRIVER}/numa"}])
    outcome = snapshot.allocate(NODE, [claim], first_fit=True)
    assert isinstance(outcome, Fit)
    chosen = [r["device"] for r in outcome.allocations[0]["devices"]["results"]]
    assert chosen == [f"d{i}" for i in range(7, 128, 16)]
    assert outcome.steps <= 40
