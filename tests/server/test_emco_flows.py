"""EMCO's published example flows, replayed over HTTP against a real uvicorn on 127.0.0.1, as an EMCO user would.

The payloads are written here from EMCO's documented shapes (facts, not EMCO's files): the 22.x HPA curl flow
(flat consumer `{apiVersion: "1.19", kind, name: HttpClient, container}`, requirements with `resource: {name,
requests, limits}` and `resource: {key, value}`, look-ups by `?intent=`, `?consumer=`, `?resource=` with the method
QUERY as its curl script sends them, updates, and collection deletes) and the 21.x emcoctl HPA flow (`app-name`,
`api-version: v19`, `container-name`, `label-name`, composite app `spec.version`, clusters registered with a
kubeconfig file part, apps with a chart archive, the group's `/intents`, approve, instantiate, status, terminate). As
EMCO's own tests do, every body read back is compared with the body sent. The member cluster is a devplace API
server of its own (another uvicorn): its Nodes are the live inventory and it receives the instantiated objects.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from devplace.server._app import create_app
from devplace.store import MemoryStore
from tests.placement.samples import chart_archive, kubeconfig, manifests_text, node_obj, workload
from tests.servers import serve_app

Obj = dict[str, Any]


@pytest.fixture
async def fleet_url() -> AsyncIterator[str]:
    async with serve_app(create_app(MemoryStore())) as url:
        yield url


async def created(client: httpx2.AsyncClient, url: str, body: Obj) -> None:
    """POST `body`, then read it back: EMCO's tests compare the returned body with the one they sent."""
    r = await client.post(url, json=body)
    assert r.status_code == 201, (url, r.status_code, r.text)
    assert r.json() == body
    item = f"{url}/{body['metadata']['name']}"
    if url.endswith("/composite-apps"):
        spec = body["spec"]
        item += f"/{spec.get('compositeAppVersion', spec.get('version'))}"
    got = await client.get(item)
    assert (got.status_code, got.json()) == (200, body)


async def test_emco_22_hpa_curl_flow(fleet_url: str) -> None:
    """EMCO's hpa-plc curl flow (create, get, query, update, getall, deleteall) in 22.x's spellings."""
    capp = "/v2/projects/proj1/composite-apps/collection-composite-app/v1"
    dig = f"{capp}/deployment-intent-groups/collection-deployment-intent-group"
    intents = f"{dig}/hpa-intents"
    consumers = f"{intents}/hpa-intent-1/hpa-resource-consumers"
    resources = f"{consumers}/hpa-consumer-1/resource-requirements"
    meta = {"description": "test-description", "userData1": "<user data>", "userData2": "<user data>"}
    intent = {"metadata": {"name": "hpa-intent-1", **meta}, "spec": {"app": "http-client"}}
    consumer = {
        "metadata": {"name": "hpa-consumer-1", **meta},
        "spec": {"apiVersion": "1.19", "kind": "Deployment", "name": "HttpClient", "container": "HttpClientContainer"},
    }
    label = {
        "metadata": {"name": "hpa-non-alloc-resource-1", **meta},
        "spec": {
            "allocatable": False,
            "mandatory": True,
            "weight": 1,
            "resource": {"key": "nvidia.com/cuda.runtime.major", "value": "10"},
        },
    }
    cpu = {
        "metadata": {"name": "hpa-alloc-resource-1", **meta},
        "spec": {
            "allocatable": True,
            "mandatory": True,
            "weight": 1,
            "resource": {"name": "cpu", "requests": 10, "limits": 10},
        },
    }
    async with httpx2.AsyncClient(base_url=fleet_url, timeout=30) as client:
        await created(client, "/v2/projects", {"metadata": {"name": "proj1"}})
        await created(
            client,
            "/v2/projects/proj1/composite-apps",
            {"metadata": {"name": "collection-composite-app"}, "spec": {"compositeAppVersion": "v1"}},
        )
        r = await client.post(
            f"{capp}/deployment-intent-groups",
            json={"metadata": {"name": "collection-deployment-intent-group"}, "spec": {"version": "r1"}},
        )
        assert r.status_code == 201
        await created(client, intents, intent)
        # EMCO's curl flow looks up with the method QUERY; a GET reaches EMCO's list route first: the whole list
        assert (await client.request("QUERY", intents, params={"intent": "hpa-intent-1"})).json() == intent
        assert (await client.get(intents, params={"intent": "hpa-intent-1"})).json() == [intent]
        await created(client, consumers, consumer)
        assert (await client.request("QUERY", consumers, params={"consumer": "hpa-consumer-1"})).json() == consumer
        await created(client, resources, label)
        looked_up = await client.request("QUERY", resources, params={"resource": label["metadata"]["name"]})
        assert looked_up.json() == label
        await created(client, resources, cpu)
        assert (await client.request("QUERY", resources, params={"resource": cpu["metadata"]["name"]})).json() == cpu
        assert (await client.get(resources, params={"resource": cpu["metadata"]["name"]})).json() == [cpu, label]
        missing = await client.request("QUERY", intents, params={"intent": "nope"})
        assert (missing.status_code, missing.json()["message"]) == (404, 'hpa intent "nope" not found')

        # update: a resource and its consumer's description (the intent and consumer have children: refused)
        cpu2 = {**cpu, "metadata": {**cpu["metadata"], "description": "test-description-2"}}
        cpu2["spec"] = {**cpu["spec"], "resource": {"name": "cpu", "requests": 80, "limits": 80}}
        put = await client.put(f"{resources}/hpa-alloc-resource-1", json=cpu2)
        assert (put.status_code, put.json()) == (200, cpu2)
        assert (await client.get(f"{resources}/hpa-alloc-resource-1")).json() == cpu2
        refused = await client.put(f"{consumers}/hpa-consumer-1", json=consumer)
        assert refused.status_code == 409

        # getall, then deleteall in EMCO's order: resources, consumers, intents
        assert (await client.get(resources)).json() == [cpu2, label]  # in name order
        assert (await client.get(consumers)).json() == [consumer]
        early = await client.delete(intents)
        assert early.status_code == 409  # the intent still has consumers: nothing is deleted
        assert (await client.get(intents)).json() == [intent]
        for collection in (resources, consumers, intents):
            assert (await client.delete(collection)).status_code == 204
            assert (await client.get(collection)).json() == []


def http_manifests(name: str, container: str, replicas: int | None = None) -> str:
    return manifests_text(workload("Deployment", name, container, replicas=replicas))


async def multipart(client: httpx2.AsyncClient, url: str, body: Obj, filename: str, data: bytes | str) -> None:
    """POST a body with a file part as emcoctl does (`metadata` field + `file`), then read the body back."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    r = await client.post(url, data={"metadata": json.dumps(body)}, files={"file": (filename, raw)})
    assert r.status_code == 201, (url, r.status_code, r.text)
    got = await client.get(f"{url}/{body['metadata']['name']}")
    assert (got.status_code, got.json()) == (200, body)


async def test_emco_21_emcoctl_hpa_flow_places_applies_and_takes_back(fleet_url: str) -> None:
    """EMCO 21.x's emcoctl HPA example, request by request, with a live member cluster behind a kubeconfig."""
    member = MemoryStore()
    qat = {"feature.node.kubernetes.io/intel_qat": "true"}
    await member.create(node_obj("n1", labels=qat, cpu="8", memory="16Gi", pods="110"))
    async with serve_app(create_app(MemoryStore(), fleet_api=False)) as dead:
        pass  # a port nothing listens on any more
    async with (
        serve_app(create_app(member, fleet_api=False)) as member_url,
        httpx2.AsyncClient(base_url=fleet_url, timeout=30) as client,
    ):
        await _register_21x(client, member_url, dead)
        await _intents_21x(client)
        capp = "/v2/projects/proj1/composite-apps/collection-composite-app/v1"
        dig = f"{capp}/deployment-intent-groups/collection-deployment-intent-group"

        plan = (await client.post(f"{dig}/plan", json={})).json()
        assert plan["errors"] == [], plan
        placed = {a["name"]: [c["cluster"] for c in a["clusters"]] for a in plan["apps"]}
        assert placed == {"http-client": ["cluster1"], "http-server": ["cluster1"]}
        client_app = next(a for a in plan["apps"] if a["name"] == "http-client")
        dead_reason = next(r["reason"] for r in client_app["rejected"] if r["cluster"] == "cluster2")
        assert dead_reason.startswith(f"inventory unavailable: {dead}")

        early = await client.post(f"{dig}/instantiate", json={"metadata": {"name": ""}})  # emcoctl's body
        assert early.status_code == 409
        assert (await client.post(f"{dig}/approve", json={"metadata": {"name": ""}})).status_code == 202
        assert (await client.post(f"{dig}/instantiate", json={})).status_code == 202

        # the member received the patched Deployments, labelled as this group's
        given = (await client.get(f"{member_url}/apis/apps/v1/namespaces/default/deployments")).json()["items"]
        by_name = {d["metadata"]["name"]: d for d in given}
        assert sorted(by_name) == ["r1-http-client", "r1-http-server"]
        http_client = by_name["r1-http-client"]
        assert http_client["spec"]["replicas"] == 2
        pod = http_client["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == qat
        assert pod["containers"][0]["resources"] == {"requests": {"cpu": "4"}, "limits": {"cpu": "4"}}

        await _statuses(client, dig)

        assert (await client.post(f"{dig}/terminate", json={})).status_code == 202
        left = (await client.get(f"{member_url}/apis/apps/v1/namespaces/default/deployments")).json()["items"]
        assert left == []
        after = (await client.get(f"{dig}/status", params={"status": "deployed"})).json()
        assert after["deployedStatus"] == "Terminated"
        assert after["deployedCounts"] == {"Deleted": 2}
        assert [a["state"] for a in after["states"]["actions"]] == [
            "Created",
            "Approved",
            "Instantiated",
            "Terminated",
        ]


async def _register_21x(client: httpx2.AsyncClient, member_url: str, dead_url: str) -> None:
    meta = {"description": "test", "userData1": "test1", "userData2": "test2"}
    await created(client, "/v2/cluster-providers", {"metadata": {"name": "provider1", **meta}})
    clusters = "/v2/cluster-providers/provider1/clusters"
    for name, server, label in (("cluster1", member_url, "edge-cluster"), ("cluster2", dead_url, "edge-cluster-2")):
        await multipart(client, clusters, {"metadata": {"name": name, **meta}}, "kube-cfg", kubeconfig(server))
        r = await client.post(f"{clusters}/{name}/labels", json={"label-name": label})  # 21.x spelling
        assert (r.status_code, r.json()) == (201, {"clusterLabel": label})
        assert (await client.get(f"{clusters}/{name}/labels")).json() == [{"clusterLabel": label}]
    assert (await client.get(clusters, params={"label": "edge-cluster"})).json() == ["cluster1"]
    with_labels = (await client.get(clusters, params={"withLabels": "true"})).json()
    assert with_labels == [
        {"metadata": {"name": "cluster1", **meta}, "labels": [{"clusterLabel": "edge-cluster"}]},
        {"metadata": {"name": "cluster2", **meta}, "labels": [{"clusterLabel": "edge-cluster-2"}]},
    ]
    await created(client, "/v2/projects", {"metadata": {"name": "proj1", **meta}})
    await created(
        client,
        "/v2/projects/proj1/composite-apps",
        {"metadata": {"name": "collection-composite-app", **meta}, "spec": {"version": "v1"}},  # 21.x spelling
    )
    apps = "/v2/projects/proj1/composite-apps/collection-composite-app/v1/apps"
    for app in ("http-client", "http-server"):
        chart = chart_archive(
            app,
            {"deployment.yaml": http_manifests(f"r1-{app}", app)},
            extra={"templates/NOTES.txt": "{{ .Release.Name }} is up\n", "templates/_helpers.tpl": "{{- define }}"},
        )
        body = {"metadata": {"name": app, "description": "description for app", "userData1": "test1"}}
        await multipart(client, apps, body, f"{app}.tgz", chart)


async def _intents_21x(client: httpx2.AsyncClient) -> None:
    capp = "/v2/projects/proj1/composite-apps/collection-composite-app/v1"
    digs = f"{capp}/deployment-intent-groups"
    await created(
        client,
        digs,
        {
            "metadata": {"name": "collection-deployment-intent-group", "description": "description"},
            "spec": {
                "profile": "collection-composite-profile",
                "version": "r1",
                "logical-cloud": "default",
                "override-values": [],
            },
        },
    )
    dig = f"{digs}/collection-deployment-intent-group"
    await created(
        client,
        f"{dig}/intents",
        {
            "metadata": {"name": "collection-deployment-intent", "description": "description"},
            "spec": {
                "intent": {
                    "genericPlacementIntent": "collection-placement-intent",
                    "hpa-placement-controller-1": "hpa-placement-intent",
                }
            },
        },
    )
    gpi = f"{dig}/generic-placement-intents"
    await created(client, gpi, {"metadata": {"name": "collection-placement-intent", "description": "d"}})
    app_intents = f"{gpi}/collection-placement-intent/app-intents"
    await created(
        client,
        app_intents,
        {
            "metadata": {"name": "http-client-placement-intent"},
            "spec": {
                "app-name": "http-client",
                "intent": {
                    "anyOf": [
                        {"provider-name": "provider1", "cluster-label-name": "edge-cluster"},
                        {"provider-name": "provider1", "cluster-label-name": "edge-cluster-2"},
                    ]
                },
            },
        },
    )
    await created(
        client,
        app_intents,
        {
            "metadata": {"name": "http-server-placement-intent"},
            "spec": {
                "app-name": "http-server",
                "intent": {"allOf": [{"provider-name": "provider1", "cluster-label-name": "edge-cluster"}]},
            },
        },
    )
    hpa = f"{dig}/hpa-intents"
    await created(client, hpa, {"metadata": {"name": "hpa-placement-intent-1"}, "spec": {"app-name": "http-client"}})
    consumers = f"{hpa}/hpa-placement-intent-1/hpa-resource-consumers"
    await created(
        client,
        consumers,
        {
            "metadata": {"name": "hpa-placement-consumer-1", "description": "description of hpa placement_consumer"},
            "spec": {
                "api-version": "v19",
                "kind": "Deployment",
                "replicas": 2,
                "name": "r1-http-client",
                "container-name": "http-client",
            },
        },
    )
    requirements = f"{consumers}/hpa-placement-consumer-1/resource-requirements"
    await created(
        client,
        requirements,
        {
            "metadata": {"name": "hpa-placement-nonallocatable-resource-1"},
            "spec": {
                "allocatable": False,
                "mandatory": True,
                "weight": 1,
                "resource": {"key": "feature.node.kubernetes.io/intel_qat", "value": "true"},
            },
        },
    )
    await created(
        client,
        requirements,
        {
            "metadata": {"name": "hpa-placement-allocatable-resource-cpu-1", "description": "cpu resource"},
            "spec": {
                "allocatable": True,
                "mandatory": True,
                "weight": 1,
                "resource": {"name": "cpu", "requests": 4, "limits": 4},
            },
        },
    )


async def _statuses(client: httpx2.AsyncClient, dig: str) -> None:
    """EMCO's status query parameters and result shapes on the instantiated group."""
    status = f"{dig}/status"
    default = (await client.get(status)).json()  # EMCO's default is the deprecated rsync form
    assert (default["name"], default["project"], default["compositeApp"], default["compositeAppVersion"]) == (
        "collection-deployment-intent-group",
        "proj1",
        "collection-composite-app",
        "v1",
    )
    assert default["compositeProfile"] == "collection-composite-profile"
    assert default["status"] == "Instantiated"
    assert default["rsyncStatus"] == {"Applied": 2}
    [client_app] = [a for a in default["apps"] if a["name"] == "http-client"]
    [cluster] = client_app["clusters"]
    assert (cluster["clusterProvider"], cluster["cluster"], cluster["readyStatus"]) == (
        "provider1",
        "cluster1",
        "Available",
    )
    assert cluster["resources"] == [
        {
            "GVK": {"Group": "apps", "Version": "v1", "Kind": "Deployment"},
            "name": "r1-http-client",
            "rsyncStatus": "Applied",
        }
    ]

    deployed = (await client.get(status, params={"status": "deployed", "output": "summary"})).json()
    assert (deployed["deployedStatus"], deployed["deployedCounts"]) == ("Instantiated", {"Applied": 2})
    assert "apps" not in deployed

    ready = (await client.get(status, params={"status": "ready", "app": "http-client"})).json()
    # the member runs no Deployment controller: the objects are there, with no ready replicas
    assert (ready["readyStatus"], ready["readyCounts"]) == ("NotReady", {"NotReady": 1})
    assert [a["name"] for a in ready["apps"]] == ["http-client"]
    assert ready["apps"][0]["clusters"][0]["connectivity"] == "Available"

    detail = (await client.get(status, params={"output": "detail", "resource": "r1-http-server"})).json()
    [server_app] = detail["apps"]
    [resource] = server_app["clusters"][0]["resources"]
    assert resource["detail"]["metadata"]["name"] == "r1-http-server"

    apps = (await client.get(status, params={"apps": ""})).json()
    assert apps == {"name": "collection-deployment-intent-group", "apps": ["http-client", "http-server"]}
    clusters = (await client.get(status, params={"clusters": "", "app": "http-server"})).json()
    assert clusters["clustersByApp"] == [
        {"app": "http-server", "clusters": [{"clusterProvider": "provider1", "cluster": "cluster1"}]}
    ]
    resources = (await client.get(status, params={"resources": "", "cluster": "provider1+cluster1"})).json()
    assert {(r["app"], r["resources"][0]["name"]) for r in resources["resourcesByApp"]} == {
        ("http-client", "r1-http-client"),
        ("http-server", "r1-http-server"),
    }
    latest = (await client.get(status, params={"instance": "1"})).json()
    assert latest["status"] == "Instantiated"

    for params, field in [
        ({"status": "bogus"}, "status"),
        ({"type": "bogus"}, "type"),
        ({"output": "everything"}, "output"),
        ({"cluster": "cluster1"}, "cluster"),
        ({"app": "not-an-app"}, "app"),
        ({"instance": "7"}, "instance"),
        ({"instance": ""}, "instance"),
    ]:
        r = await client.get(status, params=params)
        assert r.status_code == 400, (params, r.text)
        assert r.json()["message"].startswith(f"Invalid Input: {field}: "), r.json()["message"]
