"""ONVIF discovery, the pure part: discoveryDetails, Akri's filter rules, WS-Discovery and ONVIF SOAP messages, the
credentials Akri reads from discoveryProperties, and the device a camera becomes. No I/O, no clock (the caller passes
the nonce and the time); `devplace.discovery._onvif` is the shell around it.

Akri's ONVIF handler (`discovery-handlers/onvif`) is the reference; where this module decides something, it is so that
a Configuration written for Akri finds the same cameras with the same device ids and properties:

- Details: `ipAddresses`, `macAddresses`, `scopes`, `uuids` (each a FilterList `{items: [..], action: Include|Exclude}`,
  `items` required, `action` Include by default, exact case) and `discoveryTimeoutSeconds` (a whole number, default 1).
  Anything else is `errors.Invalid` naming the field (Akri's serde ignores unknown keys; a misspelt filter here would
  silently discover every camera, so it is refused, as every devplace handler refuses unknown keys). A negative timeout
  is refused too (Akri casts it to an unsigned number of seconds: a round that never ends).
- Filters (`drops`), Akri's `execute_filter` exactly: no filter keeps; Exclude with no items keeps; a value that is not
  known (GetNetworkInterfaces failed) drops; Include keeps iff an item matches; Exclude drops iff one does. So Include
  with no items drops everything. Scopes: per ProbeMatch, an item matches a whitespace-separated scope exactly (a
  ProbeMatch without Scopes has none: Include drops it); uuids, IPs and MACs compare case-insensitively.
- The probe: SOAP 1.2 with WS-Addressing 2004/08 and `d:Types` = `netwsdl:NetworkVideoTransmitter`, the prefix
  undeclared, byte for byte what Akri sends: cameras that answer Akri answer us.
- A ProbeMatch gives one device per XAddr (space-separated); uuid = EndpointReference Address without `urn:` then
  `uuid:`, lower-cased; id = `<XAddr>-<uuid>`. A reply that is not a ProbeMatches envelope is ignored (Akri's task
  panics on it and the stream ends).
- GetNetworkInterfaces: IP = the first `GetNetworkInterfacesResponse/NetworkInterfaces/IPv4/Config/*/Address` text,
  MAC = the first `NetworkInterfaces/Info/HwAddress` text (local names, anywhere in the document, as Akri's XPath);
  either missing fails the call. Only this call carries a WS-UsernameToken (PasswordDigest), when the Configuration's
  discoveryProperties hold credentials for the camera's uuid or default ones (`Credentials`, Akri's credential store).
- XML from the network is parsed only without a DTD (SOAP forbids one): no entity expansion, no external fetch.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from devplace import errors
from devplace.discovery import _details as d
from devplace.discovery._devices import Device

HANDLER_NAME: Final = "onvif"
WS_DISCOVERY_GROUP: Final = "239.255.255.250"
WS_DISCOVERY_PORT: Final = 3702
MAX_REPLY: Final = 16 * 1024
"""Akri reads each probe reply into 16 KiB; a longer one is cut there (and then fails to parse, as in Akri)."""

SOAP12: Final = "http://www.w3.org/2003/05/soap-envelope"
WSA: Final = "http://schemas.xmlsoap.org/ws/2004/08/addressing"
WSD: Final = "http://schemas.xmlsoap.org/ws/2005/04/discovery"
DEVICE_WSDL: Final = "http://www.onvif.org/ver10/device/wsdl"
NETWORK_WSDL: Final = "http://www.onvif.org/ver10/network/wsdl"
WSSE: Final = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd"
WSU: Final = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd"
PASSWORD_DIGEST: Final = (
    "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordDigest"
)
BASE64_BINARY: Final = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-soap-message-security-1.0#Base64Binary"
PROBE_TO: Final = "urn:schemas-xmlsoap-org:ws:2005:04:discovery"
PROBE_ACTION: Final = "http://schemas.xmlsoap.org/ws/2005/04/discovery/Probe"
PROBE_TYPES: Final = "netwsdl:NetworkVideoTransmitter"
"""Akri's probe type, its `netwsdl` prefix declared nowhere in the message."""

SERVICE_URL: Final = "ONVIF_DEVICE_SERVICE_URL"
DEVICE_UUID: Final = "ONVIF_DEVICE_UUID"
IP_ADDRESS: Final = "ONVIF_DEVICE_IP_ADDRESS"
MAC_ADDRESS: Final = "ONVIF_DEVICE_MAC_ADDRESS"

GET_SYSTEM_DATE_AND_TIME: Final = "GetSystemDateAndTime"
GET_NETWORK_INTERFACES: Final = "GetNetworkInterfaces"

FILTERS: Final = ("ipAddresses", "macAddresses", "scopes", "uuids")
TIMEOUT_KEY: Final = "discoveryTimeoutSeconds"


# -- discoveryDetails and the filters -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FilterList:
    """Akri's FilterList: `items`, and whether they are the only ones kept (Include) or the ones dropped (Exclude)."""

    items: tuple[str, ...]
    action: Literal["Include", "Exclude"] = "Include"


def drops(
    filters: FilterList | None, values: Sequence[str] | None, same: Callable[[str, str], bool] = str.__eq__
) -> bool:
    """Whether `filters` drop something whose values are `values` (None: not known), Akri's `execute_filter`."""
    if filters is None:
        return False
    if filters.action == "Exclude" and not filters.items:
        return False
    if values is None:
        return True
    hit = any(same(value, item) for item in filters.items for value in values)
    return not hit if filters.action == "Include" else hit


def same_ignoring_case(value: str, item: str) -> bool:
    return value.lower() == item.lower()


def scope_matches(scopes: str, item: str) -> bool:
    """One Scopes text holds whitespace-separated scopes; an item matches one of them exactly."""
    return item in scopes.split()


@dataclass(frozen=True)
class OnvifDetails:
    ip_addresses: FilterList | None = None
    mac_addresses: FilterList | None = None
    scopes: FilterList | None = None
    uuids: FilterList | None = None
    discovery_timeout_seconds: int = 1


def parse_filter(raw: Mapping[str, Any], key: str) -> FilterList | None:
    value = raw.get(key)
    path = f"{d.ROOT}.{key}"
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise errors.Invalid.field(path, "must be a mapping {items: [...], action: Include|Exclude}")
    unknown = sorted(set(value) - {"items", "action"}, key=str)
    if unknown:
        raise errors.Invalid.field(f"{path}.{unknown[0]}", "unknown key (allowed: items, action)")
    items = value.get("items")
    if items is None:
        raise errors.Invalid.field(f"{path}.items", "required: a list of strings ([] for none)")
    if not isinstance(items, list):
        raise errors.Invalid.field(f"{path}.items", "must be a list of strings")
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise errors.Invalid.field(f"{path}.items[{i}]", f"must be a string (quote it), got {item!r}")
    action = value.get("action", "Include")
    if action not in ("Include", "Exclude"):
        raise errors.Invalid.field(f"{path}.action", f"must be Include or Exclude (exact case), got {action!r}")
    return FilterList(items=tuple(items), action=action)


def parse_details(text: str) -> OnvifDetails:
    """ONVIF's discoveryDetails; `errors.Invalid` naming the field for anything Akri would refuse, an unknown key or
    a negative timeout."""
    raw = d.load_mapping(text)
    d.refuse_unknown(raw, (*FILTERS, TIMEOUT_KEY))
    timeout: Any = raw.get(TIMEOUT_KEY, 1)
    if isinstance(timeout, bool) or not isinstance(timeout, int):
        raise errors.Invalid.field(f"{d.ROOT}.{TIMEOUT_KEY}", f"must be a whole number of seconds, got {timeout!r}")
    if not 0 <= timeout <= 2**31 - 1:
        raise errors.Invalid.field(f"{d.ROOT}.{TIMEOUT_KEY}", f"must be between 0 and 2147483647, got {timeout}")
    return OnvifDetails(
        ip_addresses=parse_filter(raw, "ipAddresses"),
        mac_addresses=parse_filter(raw, "macAddresses"),
        scopes=parse_filter(raw, "scopes"),
        uuids=parse_filter(raw, "uuids"),
        discovery_timeout_seconds=timeout,
    )


# -- WS-Discovery ---------------------------------------------------------------------------------------------------


def probe_message(message_id: str) -> bytes:
    """Akri's Probe for NetworkVideoTransmitters (`message_id`: `uuid:<v4>`), byte for byte."""
    return (
        '<?xml version="1.0" encoding="utf-8"?>'
        f'<s:Envelope xmlns:s="{SOAP12}">'
        f'<s:Header xmlns:w="{WSA}">'
        f"<w:MessageID>{escape(message_id)}</w:MessageID>"
        f"<w:To>{PROBE_TO}</w:To>"
        f"<w:Action>{PROBE_ACTION}</w:Action>"
        "</s:Header>"
        f'<s:Body xmlns:d="{WSD}">'
        f"<d:Probe><d:Types>{PROBE_TYPES}</d:Types></d:Probe>"
        "</s:Body>"
        "</s:Envelope>"
    ).encode()


@dataclass(frozen=True)
class ProbeMatch:
    address: str
    """The EndpointReference Address (`urn:uuid:...`)."""
    xaddrs: tuple[str, ...]
    scopes: tuple[str, ...]
    """The text of each `d:Scopes` element (usually one, holding whitespace-separated scopes)."""


_DTD = re.compile(rb"<!(DOCTYPE|ENTITY)", re.IGNORECASE)

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET  # loaded by the first reply parsed: an agent without cameras never pays


def escape(text: str) -> str:
    """`text` as XML character data (`&`, `<`, `>` escaped: what `xml.sax.saxutils.escape` does; importing that
    module loads urllib.request and email with it, 1.3 MiB in a node agent)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def parse_xml(data: bytes) -> ET.Element:
    """A document from the network; `ValueError` when it is not well-formed XML or carries a DTD."""
    import xml.etree.ElementTree as ET

    if _DTD.search(data):
        raise ValueError("a DTD (SOAP messages carry none)")
    try:
        return ET.fromstring(data)
    except ET.ParseError as e:
        raise ValueError(f"not well-formed XML: {e}") from None


def _q(namespace: str, local: str) -> str:
    return f"{{{namespace}}}{local}"


def parse_probe_matches(data: bytes) -> list[ProbeMatch]:
    """The ProbeMatch elements of a reply; `ValueError` when it is not a SOAP 1.2 envelope whose Body holds
    `d:ProbeMatches`."""
    root = parse_xml(data)
    if root.tag != _q(SOAP12, "Envelope"):
        raise ValueError(f"not a SOAP 1.2 envelope: {root.tag}")
    matches = root.find(f"{_q(SOAP12, 'Body')}/{_q(WSD, 'ProbeMatches')}")
    if matches is None:
        raise ValueError("no d:ProbeMatches in the Body")
    found = []
    for match in matches.findall(_q(WSD, "ProbeMatch")):
        address = match.findtext(f"{_q(WSA, 'EndpointReference')}/{_q(WSA, 'Address')}") or ""
        xaddrs = tuple((match.findtext(_q(WSD, "XAddrs")) or "").split())
        scopes = tuple(s.text or "" for s in match.findall(_q(WSD, "Scopes")))
        found.append(ProbeMatch(address=address, xaddrs=xaddrs, scopes=scopes))
    return found


def device_uuid(address: str) -> str:
    """Akri's device uuid: the Address without a leading `urn:`, then without a leading `uuid:`, lower-cased."""
    return address.removeprefix("urn:").removeprefix("uuid:").lower()


def service_urls(matches: Sequence[ProbeMatch], scopes: FilterList | None) -> dict[str, str]:
    """Service URL -> uuid for every XAddr of every ProbeMatch the scopes filter keeps (a URL named twice: the last
    wins, as in Akri's map)."""
    found: dict[str, str] = {}
    for match in matches:
        if drops(scopes, match.scopes, scope_matches):
            continue
        for url in match.xaddrs:
            found[url] = device_uuid(match.address)
    return found


# -- ONVIF device service (SOAP) -------------------------------------------------------------------------------------


def content_type(operation: str) -> str:
    """The Content-Type of a device-service POST, as Akri writes it (the SOAP action in it, a trailing `;`)."""
    return f'application/soap+xml; charset=utf-8; action="{DEVICE_WSDL}/{operation}";'


@dataclass(frozen=True)
class UsernameToken:
    """WS-Security UsernameToken with a PasswordDigest, as Akri builds it: the nonce is a text (a v4 uuid), sent
    base64-encoded; the digest is base64(SHA-1(nonce + created + password)); created in UTC with milliseconds."""

    username: str
    nonce: str
    digest: str
    created: str


def username_token(username: str, password: str, nonce: str, created: str) -> UsernameToken:
    digest = hashlib.sha1(f"{nonce}{created}{password}".encode(), usedforsecurity=False).digest()
    return UsernameToken(
        username=username,
        nonce=base64.b64encode(nonce.encode()).decode(),
        digest=base64.b64encode(digest).decode(),
        created=created,
    )


def _envelope(operation: str, header: str = "") -> bytes:
    return (
        f'<soap:Envelope xmlns:soap="{SOAP12}" xmlns:wsdl="{DEVICE_WSDL}">'
        f"<soap:Header>{header}</soap:Header>"
        f"<soap:Body><wsdl:{operation}/></soap:Body>"
        "</soap:Envelope>"
    ).encode()


def security_header(token: UsernameToken) -> str:
    return (
        f'<wsse:Security soap:mustUnderstand="1" xmlns:wsse="{WSSE}">'
        f'<wsse:UsernameToken xmlns:wsu="{WSU}">'
        f"<wsse:Username>{escape(token.username)}</wsse:Username>"
        f'<wsse:Password Type="{PASSWORD_DIGEST}">{token.digest}</wsse:Password>'
        f'<wsse:Nonce EncodingType="{BASE64_BINARY}">{token.nonce}</wsse:Nonce>'
        f"<wsu:Created>{escape(token.created)}</wsu:Created>"
        "</wsse:UsernameToken>"
        "</wsse:Security>"
    )


def date_and_time_message() -> bytes:
    return _envelope(GET_SYSTEM_DATE_AND_TIME)


def network_interfaces_message(token: UsernameToken | None) -> bytes:
    return _envelope(GET_NETWORK_INTERFACES, "" if token is None else security_header(token))


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _children(elements: Iterator[ET.Element] | Sequence[ET.Element], local: str | None) -> Iterator[ET.Element]:
    for element in elements:
        for child in element:
            if isinstance(child.tag, str) and (local is None or _local(child.tag) == local):
                yield child


def _first_text(elements: Iterator[ET.Element]) -> str | None:
    """The first text node under any of `elements` (XPath `.../text()`, first in document order)."""
    for element in elements:
        if element.text:
            return element.text
        for child in element:
            if child.tail:
                return child.tail
    return None


def parse_network_interfaces(data: bytes) -> tuple[str, str]:
    """(IP, MAC) from a GetNetworkInterfaces answer; `ValueError` when it is not XML or either is missing."""
    root = parse_xml(data)
    responses = [e for e in root.iter() if isinstance(e.tag, str) and _local(e.tag) == "GetNetworkInterfacesResponse"]
    interfaces = list(_children(responses, "NetworkInterfaces"))
    ip = _first_text(
        _children(_children(_children(_children(interfaces, "IPv4"), "Config"), None), "Address"),
    )
    if ip is None:
        raise ValueError("no NetworkInterfaces/IPv4/Config/*/Address in the answer")
    mac = _first_text(_children(_children(interfaces, "Info"), "HwAddress"))
    if mac is None:
        raise ValueError("no NetworkInterfaces/Info/HwAddress in the answer")
    return ip, mac


# -- credentials from discoveryProperties (Akri's credential_store.rs) ----------------------------------------------

CREDENTIAL_LIST: Final = "device_credential_list"
CREDENTIAL_REF_LIST: Final = "device_credential_ref_list"
USERNAME_PREFIX: Final = "username_"
PASSWORD_PREFIX: Final = "password_"
DEFAULT_ID: Final = "default"

Credential = tuple[str, str | None]


def _text(value: bytes | None) -> str | None:
    if value is None:
        return None
    try:
        return value.decode()
    except UnicodeDecodeError:
        return None


def _json(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _named_lists(properties: Mapping[str, bytes | None], key: str) -> list[Any]:
    """The JSON maps held by the properties that `key`'s JSON list of names names (unreadable parts: none)."""
    names = _json(_text(properties.get(key)))
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return []
    return [_json(_text(properties.get(name))) for name in names]


def _from_credential_list(body: Any) -> dict[str, Credential]:
    """`{id: {username, password?, base64encoded?}}`; one malformed entry spoils the whole map (serde's all or
    nothing)."""
    if not isinstance(body, dict):
        return {}
    found: dict[str, Credential] = {}
    for uid, entry in body.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("username"), str):
            return {}
        password = entry.get("password")
        encoded = entry.get("base64encoded", False)
        if (password is not None and not isinstance(password, str)) or not isinstance(encoded, bool):
            return {}
        if encoded and password is not None:
            try:
                password = base64.b64decode(password, validate=True).decode()
            except ValueError:
                password = None
        found[uid] = (entry["username"], password)
    return found


def _from_ref_list(body: Any, properties: Mapping[str, bytes | None]) -> dict[str, Credential]:
    """`{id: {username_ref, password_ref?}}`: property names; an id whose username is missing or empty is skipped."""
    if not isinstance(body, dict):
        return {}
    refs: dict[str, tuple[str, str | None]] = {}
    for uid, entry in body.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("username_ref"), str):
            return {}
        password_ref = entry.get("password_ref")
        if password_ref is not None and not isinstance(password_ref, str):
            return {}
        refs[uid] = (entry["username_ref"], password_ref)
    found: dict[str, Credential] = {}
    for uid, (username_ref, password_ref) in refs.items():
        username = _text(properties.get(username_ref))
        if not username:
            continue
        found[uid] = (username, None if password_ref is None else _text(properties.get(password_ref)))
    return found


@dataclass(frozen=True)
class Credentials:
    """Credentials by device uuid, with a default, read from discoveryProperties as Akri reads them:
    `device_credential_list` (a JSON list naming properties that hold `{uuid: {username, password, base64encoded}}`),
    `device_credential_ref_list` (a JSON list naming properties that hold `{uuid: {username_ref, password_ref}}`,
    each ref naming the property with the value), `username_<uuid>`/`password_<uuid>` (the uuid with `_` for `-`:
    property names are C identifiers), and `username_default`/`password_default`; later sources win. Values that are
    not UTF-8, or JSON that does not read, count as absent."""

    by_id: Mapping[str, Credential]

    @classmethod
    def from_properties(cls, properties: Mapping[str, bytes | None]) -> Credentials:
        found: dict[str, Credential] = {}
        for body in _named_lists(properties, CREDENTIAL_LIST):
            found.update(_from_credential_list(body))
        for body in _named_lists(properties, CREDENTIAL_REF_LIST):
            found.update(_from_ref_list(body, properties))
        passwords = {
            key.removeprefix(PASSWORD_PREFIX): _text(value)
            for key, value in properties.items()
            if key.startswith(PASSWORD_PREFIX) and key != PASSWORD_PREFIX
        }
        for key, value in properties.items():
            username = _text(value)
            if key.startswith(USERNAME_PREFIX) and key != USERNAME_PREFIX and username is not None:
                uid = key.removeprefix(USERNAME_PREFIX)
                found[uid.replace("_", "-")] = (username, passwords.get(uid))
        return cls(by_id=found)

    def get(self, uuid: str) -> Credential | None:
        """The camera's credential (its uuid exactly as the device id has it), else the default one, else None."""
        return self.by_id.get(uuid) or self.by_id.get(DEFAULT_ID)


# -- the device ------------------------------------------------------------------------------------------------------


def uuid_kept(details: OnvifDetails, uuid: str) -> bool:
    return not drops(details.uuids, [uuid], same_ignoring_case)


def camera_device(details: OnvifDetails, url: str, uuid: str, ip_and_mac: tuple[str, str] | None) -> Device | None:
    """The device for a live camera that passed the scopes and uuids filters, given what GetNetworkInterfaces said
    (None: the call failed); None when the IP or MAC filter drops it."""
    ip, mac = ip_and_mac if ip_and_mac is not None else (None, None)
    if drops(details.ip_addresses, None if ip is None else [ip], same_ignoring_case):
        return None
    if drops(details.mac_addresses, None if mac is None else [mac], same_ignoring_case):
        return None
    properties = {SERVICE_URL: url, DEVICE_UUID: uuid}
    if ip is not None and mac is not None:
        properties |= {IP_ADDRESS: ip, MAC_ADDRESS: mac}
    return Device(id=f"{url}-{uuid}", properties=properties, shared=True)
