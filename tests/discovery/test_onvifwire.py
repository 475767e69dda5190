"""ONVIF discovery's pure part: details as Akri reads them (and refused where they are wrong, naming the field), Akri's
filter rules as a table, the probe byte for byte, ProbeMatches and GetNetworkInterfaces parsed (and never anything but
`ValueError` on garbage), Akri's UsernameToken vector, and the credentials Akri reads from discoveryProperties."""

from __future__ import annotations

import json
from typing import Any
from xml.sax.saxutils import escape

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.discovery import Device
from devplace.discovery import _onvifwire as wire
from devplace.discovery._onvif import iso_millis
from devplace.discovery._onvifwire import Credentials, FilterList, OnvifDetails, ProbeMatch

from .onvifcams import Camera, network_interfaces, probe_matches

PRINTABLE_NOT = ("Cs", "Cc", "Cf", "Co", "Cn", "Zl", "Zp")
INCLUDE_FOO_BAR = FilterList(("foo", "bar"))
EXCLUDE_FOO_BAR = FilterList(("foo", "bar"), "Exclude")

# -- details ----------------------------------------------------------------------------------------------------------


def test_empty_details_are_akris_defaults() -> None:
    assert wire.parse_details("") == wire.parse_details("{}") == OnvifDetails(discovery_timeout_seconds=1)


def test_akris_helm_chart_details_parse() -> None:
    text = """
ipAddresses: {action: Exclude, items: []}
macAddresses: {action: Exclude, items: []}
scopes: {action: Include, items: ["onvif://www.onvif.org/name/a"]}
uuids: {items: [5f5a69c2-e0ae-504f-829b-00fcdab169cc]}
discoveryTimeoutSeconds: 3
"""
    assert wire.parse_details(text) == OnvifDetails(
        ip_addresses=FilterList((), "Exclude"),
        mac_addresses=FilterList((), "Exclude"),
        scopes=FilterList(("onvif://www.onvif.org/name/a",)),
        uuids=FilterList(("5f5a69c2-e0ae-504f-829b-00fcdab169cc",)),
        discovery_timeout_seconds=3,
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ipAdresses: {items: []}", "discoveryDetails.ipAdresses: unknown key (allowed: ipAddresses, macAddresses"),
        ("ipAddresses: [10.0.0.1]", "discoveryDetails.ipAddresses: must be a mapping {items: [...], action:"),
        ("ipAddresses: {action: Exclude}", "discoveryDetails.ipAddresses.items: required"),
        ("scopes: {items: onvif://x}", "discoveryDetails.scopes.items: must be a list of strings"),
        ("uuids: {items: [1]}", "discoveryDetails.uuids.items[0]: must be a string (quote it), got 1"),
        ("macAddresses: {items: [], action: exclude}", "discoveryDetails.macAddresses.action: must be Include or"),
        ("scopes: {items: [], kind: x}", "discoveryDetails.scopes.kind: unknown key (allowed: items, action)"),
        ("discoveryTimeoutSeconds: 1.5", "discoveryDetails.discoveryTimeoutSeconds: must be a whole number"),
        ("discoveryTimeoutSeconds: '2'", "discoveryDetails.discoveryTimeoutSeconds: must be a whole number"),
        ("discoveryTimeoutSeconds: true", "discoveryDetails.discoveryTimeoutSeconds: must be a whole number"),
        ("discoveryTimeoutSeconds: -1", "discoveryDetails.discoveryTimeoutSeconds: must be between 0 and"),
        ("[a", "discoveryDetails: not valid YAML"),
    ],
)
def test_bad_details_are_invalid_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        wire.parse_details(text)
    assert info.value.message.startswith(message)


@given(
    items=st.lists(st.text(st.characters(exclude_categories=PRINTABLE_NOT), max_size=20), max_size=5),
    action=st.sampled_from(["Include", "Exclude", None]),
    key=st.sampled_from(wire.FILTERS),
)
def test_any_filter_list_reads_back_as_written(items: list[str], action: str | None, key: str) -> None:
    body: dict[str, Any] = {"items": items} | ({} if action is None else {"action": action})
    parsed = wire.parse_details(json.dumps({key: body}, ensure_ascii=False))
    assert parsed == OnvifDetails(**{_field(key): FilterList(tuple(items), action or "Include")})  # type: ignore[arg-type]


def _field(key: str) -> str:
    return {"ipAddresses": "ip_addresses", "macAddresses": "mac_addresses", "scopes": "scopes", "uuids": "uuids"}[key]


# -- filters (Akri's execute_filter) ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filters", "values", "dropped"),
    [
        (None, ["foo"], False),  # no filter keeps
        (None, None, False),
        (FilterList((), "Exclude"), None, False),  # Exclude nothing keeps, even what is not known
        (FilterList((), "Exclude"), ["foo"], False),
        (FilterList(()), ["foo"], True),  # Include nothing drops everything
        (INCLUDE_FOO_BAR, None, True),  # not known: dropped by any filter
        (EXCLUDE_FOO_BAR, None, True),
        (INCLUDE_FOO_BAR, ["foo"], False),
        (INCLUDE_FOO_BAR, ["bar"], False),
        (INCLUDE_FOO_BAR, ["foobar"], True),
        (EXCLUDE_FOO_BAR, ["foo"], True),
        (EXCLUDE_FOO_BAR, ["foobar"], False),
        (INCLUDE_FOO_BAR, [], True),  # a ProbeMatch without Scopes
        (EXCLUDE_FOO_BAR, [], False),
    ],
)
def test_filters_keep_and_drop_as_akris(filters: FilterList | None, values: list[str] | None, dropped: bool) -> None:
    assert wire.drops(filters, values) is dropped


def test_a_scope_item_matches_one_whole_space_separated_scope() -> None:
    scopes = ["onvif://www.onvif.org/name/NVT onvif://www.onvif.org/Profile/Streaming "]
    assert not wire.drops(FilterList(("onvif://www.onvif.org/name/NVT",)), scopes, wire.scope_matches)
    assert wire.drops(FilterList(("onvif://www.onvif.org/name",)), scopes, wire.scope_matches)
    assert wire.drops(FilterList(("onvif://www.onvif.org/name/NVT",), "Exclude"), scopes, wire.scope_matches)


@pytest.mark.parametrize(
    ("ip_and_mac", "details", "properties"),
    [
        (("10.0.0.1", "AA:bb"), OnvifDetails(), {"ip": "10.0.0.1", "mac": "AA:bb"}),
        (None, OnvifDetails(), {}),  # GetNetworkInterfaces failed and nothing filters: kept, without IP and MAC
        (None, OnvifDetails(ip_addresses=FilterList((), "Exclude")), {}),
        (None, OnvifDetails(mac_addresses=FilterList(("aa:bb",), "Exclude")), None),
        (("10.0.0.1", "AA:bb"), OnvifDetails(mac_addresses=FilterList(("aa:BB",))), {"ip": "10.0.0.1", "mac": "AA:bb"}),
        (("10.0.0.1", "AA:bb"), OnvifDetails(ip_addresses=FilterList(("10.0.0.1",), "Exclude")), None),
        (("FE80::1", "AA:bb"), OnvifDetails(ip_addresses=FilterList(("fe80::1",))), {"ip": "FE80::1", "mac": "AA:bb"}),
    ],
)
def test_a_live_camera_becomes_akris_device_unless_its_ip_or_mac_filter_drops_it(
    ip_and_mac: tuple[str, str] | None, details: OnvifDetails, properties: dict[str, str] | None
) -> None:
    url = "http://10.0.0.1/onvif/device_service"
    device = wire.camera_device(details, url, "u-1", ip_and_mac)
    if properties is None:
        assert device is None
        return
    extra = {wire.IP_ADDRESS: properties["ip"], wire.MAC_ADDRESS: properties["mac"]} if properties else {}
    assert device == Device(f"{url}-u-1", {wire.SERVICE_URL: url, wire.DEVICE_UUID: "u-1"} | extra, shared=True)


# -- WS-Discovery -----------------------------------------------------------------------------------------------------


def test_the_probe_is_akris_byte_for_byte_its_type_prefix_undeclared() -> None:
    assert wire.probe_message("uuid:7b1d26aa-b02e-4ad2-8aab-4c928298ee0c") == (
        b'<?xml version="1.0" encoding="utf-8"?><s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope">'
        b'<s:Header xmlns:w="http://schemas.xmlsoap.org/ws/2004/08/addressing">'
        b"<w:MessageID>uuid:7b1d26aa-b02e-4ad2-8aab-4c928298ee0c</w:MessageID>"
        b"<w:To>urn:schemas-xmlsoap-org:ws:2005:04:discovery</w:To>"
        b"<w:Action>http://schemas.xmlsoap.org/ws/2005/04/discovery/Probe</w:Action></s:Header>"
        b'<s:Body xmlns:d="http://schemas.xmlsoap.org/ws/2005/04/discovery">'
        b"<d:Probe><d:Types>netwsdl:NetworkVideoTransmitter</d:Types></d:Probe></s:Body></s:Envelope>"
    )


@pytest.mark.parametrize(
    ("address", "uuid"),
    [
        ("a", "a"),
        ("urn:b", "b"),
        ("uuid:c", "c"),
        ("urn:uuid:D", "d"),
        ("uuid:urn:e", "urn:e"),
        ("urn:x:uuid:F", "x:uuid:f"),
        ("x:uuid:G", "x:uuid:g"),
    ],
)
def test_the_device_uuid_is_the_address_without_urn_then_uuid_lower_cased(address: str, uuid: str) -> None:
    assert wire.device_uuid(address) == uuid


def test_a_camera_reply_gives_each_xaddr_with_the_uuid() -> None:
    camera = Camera(uuid="AB-1", ip="10.0.0.9", mac="m", paths=("/a", "/b"))
    [match] = wire.parse_probe_matches(probe_matches(camera, "uuid:1"))
    assert match == ProbeMatch(
        address="urn:uuid:AB-1",
        xaddrs=("http://10.0.0.9:8000/a", "http://10.0.0.9:8000/b"),
        scopes=(" ".join(camera.scopes),),
    )
    assert wire.service_urls([match], None) == {"http://10.0.0.9:8000/a": "ab-1", "http://10.0.0.9:8000/b": "ab-1"}
    assert wire.service_urls([match], FilterList(("onvif://www.onvif.org/name/cam",), "Exclude")) == {}


_text = st.text(st.characters(exclude_categories=PRINTABLE_NOT), max_size=30)
_token = st.text(
    st.characters(codec="ascii", categories=("L", "N"), include_characters=":/.-_"), min_size=1, max_size=30
)


@given(st.lists(st.tuples(_text, st.lists(_token, max_size=3), st.lists(_text, max_size=2)), max_size=4))
def test_probe_matches_read_back_as_written(matches: list[tuple[str, list[str], list[str]]]) -> None:
    body = "".join(
        "<d:ProbeMatch><wsa:EndpointReference><wsa:Address>"
        + escape(address)
        + "</wsa:Address></wsa:EndpointReference>"
        + "".join(f"<d:Scopes>{escape(s)}</d:Scopes>" for s in scopes)
        + f"<d:XAddrs>{' '.join(xaddrs)}</d:XAddrs></d:ProbeMatch>"
        for address, xaddrs, scopes in matches
    )
    reply = (
        f'<e:Envelope xmlns:e="{wire.SOAP12}" xmlns:d="{wire.WSD}" xmlns:wsa="{wire.WSA}">'
        f"<e:Body><d:ProbeMatches>{body}</d:ProbeMatches></e:Body></e:Envelope>"
    ).encode()
    parsed = wire.parse_probe_matches(reply)
    assert parsed == [ProbeMatch(address=a, xaddrs=tuple(x), scopes=tuple(sc)) for a, x, sc in matches]


@given(st.binary(max_size=300))
def test_garbage_replies_are_value_errors_and_nothing_else(data: bytes) -> None:
    for parse in (wire.parse_probe_matches, wire.parse_network_interfaces):
        try:
            parse(data)
        except ValueError:
            pass


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (b"<x/>", "not a SOAP 1.2 envelope"),
        (f'<e:Envelope xmlns:e="{wire.SOAP12}"><e:Body/></e:Envelope>'.encode(), "no d:ProbeMatches"),
        (b'<!DOCTYPE x [<!ENTITY a "aaaa">]><x>&a;</x>', "a DTD"),
        (b"<x>", "not well-formed XML"),
    ],
)
def test_replies_that_are_not_probe_matches_are_refused_saying_why(reply: bytes, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        wire.parse_probe_matches(reply)


# -- ONVIF SOAP -------------------------------------------------------------------------------------------------------


def test_get_network_interfaces_gives_the_first_ipv4_address_and_hardware_address() -> None:
    assert wire.parse_network_interfaces(network_interfaces("10.1.2.3", "00:11:22:33:44:55")) == (
        "10.1.2.3",
        "00:11:22:33:44:55",
    )


def test_an_answer_without_an_address_fails_the_call() -> None:
    answer = network_interfaces("10.1.2.3", "m").replace(b"<tt:Address>10.1.2.3</tt:Address>", b"")
    with pytest.raises(ValueError, match="no NetworkInterfaces/IPv4/Config"):
        wire.parse_network_interfaces(answer)


def test_akris_username_token_vector() -> None:
    token = wire.username_token("abcdefe", "1234567", "nonce", "2000-01-01T12:34:56:789Z")
    assert (token.nonce, token.digest) == ("bm9uY2U=", "AGsoQQ+qNJu6Ha7h/QAPoQvYcV0=")


def test_created_is_utc_with_milliseconds() -> None:
    assert iso_millis(1_767_225_600.25) == "2026-01-01T00:00:00.250Z"


def test_only_get_network_interfaces_carries_the_token_escaped() -> None:
    token = wire.username_token("a<b", "p", "n", "c")
    message = wire.network_interfaces_message(token)
    assert b"<wsse:Username>a&lt;b</wsse:Username>" in message
    assert b"Security" not in wire.date_and_time_message()
    assert wire.parse_xml(message) is not None


# -- credentials (Akri's credential_store.rs) ------------------------------------------------------------------------

U1 = "5f5a69c2-e0ae-504f-829b-00fcdab169cc"
U2 = "7a21dc67-8438-5588-1547-4d1349048438"


def test_credentials_come_from_lists_refs_prefixed_keys_and_the_default_later_ones_winning() -> None:
    lists = {
        U1: {"username": "uname_1", "password": "password_1"},
        U2: {"username": "uname_3", "password": "YWRtaW4=", "base64encoded": True},
    }
    refs = {U2: {"username_ref": "device_2_username", "password_ref": "device_2_password"}}
    properties: dict[str, bytes | None] = {
        "device_credential_list": b'["list1"]',
        "list1": json.dumps(lists).encode(),
        "device_credential_ref_list": b'["refs1"]',
        "refs1": json.dumps(refs).encode(),
        "device_2_username": b"user_bar",
        "device_2_password": b"password_bar",
        "username_6a67158b_42b1_400b_8afe_1bec9a5d7909": b"u6",
        "password_6a67158b_42b1_400b_8afe_1bec9a5d7909": b"p6",
        "username_default": b"dflt",
        "password_default": None,
    }
    store = Credentials.from_properties(properties)
    assert store.get(U1) == ("uname_1", "password_1")
    assert store.get(U2) == ("user_bar", "password_bar")  # the ref list overrides the list
    assert store.get("6a67158b-42b1-400b-8afe-1bec9a5d7909") == ("u6", "p6")
    assert store.get("anything-else") == ("dflt", None)


def test_base64_passwords_decode_and_broken_sources_count_as_absent() -> None:
    lists = {U2: {"username": "uname_3", "password": "YWRtaW4=", "base64encoded": True}}
    store = Credentials.from_properties(
        {
            "device_credential_list": b'["list1", "missing", "broken"]',
            "list1": json.dumps(lists).encode(),
            "broken": b'{"x": {"password": "no username"}}',
            "username_abc": b"\xc8\xc8",  # not UTF-8
        }
    )
    assert store.by_id == {U2: ("uname_3", "admin")}
    assert Credentials.from_properties({}).get(U1) is None
