"""Akri's udevRules grammar: what parses into which filters, what is refused and where, and apply's check of a `udev`
Configuration's rules (422 naming spec.discoveryHandler.discoveryDetails and the rule; other handlers untouched)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.api import Configuration, UdevFilter, normalize, parse_udev_rule


@pytest.mark.parametrize(
    ("rule", "filters"),
    [
        ("", []),
        ('KERNEL=="video[0-9]*"', [("KERNEL", "", "==", "video[0-9]*", "glob")]),
        (
            'KERNEL=="video[0-9]*",SUBSYSTEM=="video4linux", ATTR{idVendor}=="05a9"',  # Akri's own example: no space
            [
                ("KERNEL", "", "==", "video[0-9]*", "glob"),
                ("SUBSYSTEM", "", "==", "video4linux", "glob"),
                ("ATTR", "idVendor", "==", "05a9", "glob"),
            ],
        ),
        (
            'SUBSYSTEM!="usb",   ATTRS{idProduct}!="4519", ENV{ID_SERIAL}=="a b"',
            [
                ("SUBSYSTEM", "", "!=", "usb", "glob"),
                ("ATTRS", "idProduct", "!=", "4519", "regex"),
                ("ENV", "ID_SERIAL", "==", "a b", "glob"),
            ],
        ),
        (
            'KERNEL!="x", DEVPATH=="/devices/a", DEVPATH!="/devices/b", TAG=="t", TAG!="u", TAGS=="v"',
            [
                ("KERNEL", "", "!=", "x", "regex"),
                ("DEVPATH", "", "==", "/devices/a", "glob"),
                ("DEVPATH", "", "!=", "/devices/b", "regex"),
                ("TAG", "", "==", "t", "glob"),
                ("TAG", "", "!=", "u", "regex"),
                ("TAGS", "", "==", "v", "regex"),
            ],
        ),
        (
            'DRIVER=="uvc.*", DRIVERS!="x", KERNELS=="1-2", SUBSYSTEMS=="usb|pci", ATTR{a}!="$%{}\\/:?-"',
            [
                ("DRIVER", "", "==", "uvc.*", "regex"),
                ("DRIVERS", "", "!=", "x", "regex"),
                ("KERNELS", "", "==", "1-2", "regex"),
                ("SUBSYSTEMS", "", "==", "usb|pci", "regex"),
                ("ATTR", "a", "!=", "$%{}\\/:?-", "glob"),
            ],
        ),
    ],
)
def test_a_rule_parses_into_its_filters_each_with_akris_matcher(rule: str, filters: list[tuple[str, ...]]) -> None:
    assert [(f.field, f.key, f.op, f.value, f.matched_by) for f in parse_udev_rule(rule)] == filters


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        (' KERNEL=="video0"', "at character 1: expected a field such as KERNEL"),
        ('KERNEL=="video0" ', 'at character 17: expected "," between filters'),
        ('KERNEL=="video0"\t, TAG=="a"', 'at character 17: expected "," between filters'),
        ('KERNEL=="a" , TAG=="b"', 'at character 12: expected "," between filters'),
        ('TYPO=="blah"', "at character 1: unknown field 'TYPO'"),
        ('kernel=="video0"', "at character 1: expected a field"),
        ('KERNEL="video0"', "at character 7: unsupported action operation '='"),
        ('MODE:="0666"', "at character 1: unsupported field MODE"),
        ('RUN{program}+="/bin/x"', "at character 1: unsupported field RUN"),
        ('ACTION=="add"', "at character 1: unsupported field ACTION"),
        ('ATTR=="x"', "at character 1: ATTR needs a key"),
        ('KERNEL{x}=="y"', "at character 1: KERNEL takes no {key}"),
        ("KERNEL==video0", "at character 9: expected a double-quoted value"),
        ('KERNEL=="video0', "at character 16: the closing quote is missing"),
        ('KERNEL=="vi"deo"', 'at character 13: expected "," between filters'),
        ('KERNEL=="a\'b"', 'at character 11: "\'" is not allowed in a value'),
        ('KERNEL=="a",', "at character 13: expected a field"),
        ('KERNEL=="a" KERNEL=="b"', 'at character 12: expected "," between filters'),
        ('KERNELS=="*"', 'KERNELS=="*" is matched as a regular expression, which does not compile'),
        ('ATTRS{x}=="?*"', 'ATTRS{x}=="?*" is matched as a regular expression, which does not compile'),
    ],
)
def test_a_rule_akri_cannot_parse_is_refused_saying_where_and_why(rule: str, says: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        parse_udev_rule(rule)
    assert caught.value.message.startswith(f"udev rule {rule!r} ")
    assert says in caught.value.message


def test_globs_in_globbed_filters_are_not_compiled_as_regexes() -> None:
    assert [f.value for f in parse_udev_rule('KERNEL=="*", SUBSYSTEM!="?*", ATTR{a}=="*"')] == ["*", "?*", "*"]


FIELDS = st.sampled_from(
    ["KERNEL", "KERNELS", "SUBSYSTEM", "SUBSYSTEMS", "DRIVER", "DRIVERS", "TAG", "TAGS", "DEVPATH"]
)
KEYED = st.sampled_from(["ATTR", "ATTRS", "ENV"])
VALUES = st.text(st.sampled_from(list("abcXYZ019 $._:/%-")), max_size=12)


@st.composite
def filters(draw: st.DrawFn) -> UdevFilter:
    if draw(st.booleans()):
        return UdevFilter(draw(FIELDS), "", draw(st.sampled_from(["==", "!="])), draw(VALUES))
    key = draw(st.text(st.sampled_from(list("abcXY_09.")), min_size=1, max_size=8))
    return UdevFilter(draw(KEYED), key, draw(st.sampled_from(["==", "!="])), draw(VALUES))


@given(st.lists(filters(), max_size=6), st.lists(st.integers(0, 3), min_size=6, max_size=6))
def test_any_rule_written_from_filters_parses_back_into_them(made: list[UdevFilter], spaces: list[int]) -> None:
    text = "".join(("" if i == 0 else "," + " " * spaces[i]) + str(f) for i, f in enumerate(made))
    assert list(parse_udev_rule(text)) == made


@given(st.text(max_size=40))
def test_any_text_parses_or_is_refused_as_invalid_never_anything_else(text: str) -> None:
    outcome: str
    try:
        outcome = f"{len(parse_udev_rule(text))} filters"
    except errors.Invalid as e:
        outcome = e.message
    assert outcome.endswith(" filters") or outcome.startswith(f"udev rule {text!r} at character ")


# -- apply -------------------------------------------------------------------------------------------------------------


def configuration(handler: str, details: Any) -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": "webcams"},
        "spec": {"discoveryHandler": {"name": handler, "discoveryDetails": yaml.safe_dump(details)}},
    }


def test_apply_refuses_a_udev_rule_akri_cannot_parse_naming_the_field_and_the_rule() -> None:
    manifest = configuration("udev", {"udevRules": ['KERNEL=="video[0-9]*"', 'KERNEL="video0"']})
    with pytest.raises(errors.Invalid) as caught:
        normalize(manifest)
    assert [(f.path, f.reason) for f in caught.value.fields] == [
        (
            "spec.discoveryHandler.discoveryDetails",
            "udevRules[1]: udev rule 'KERNEL=\"video0\"' at character 7: unsupported action operation '=' "
            "(only == and != match devices)",
        )
    ]


@pytest.mark.parametrize(
    "manifest",
    [
        configuration("udev", {"udevRules": ['KERNEL=="video[0-9]*"', ""]}),
        configuration("udev", {"udevRules": [], "permissions": "nonsense"}),  # the handler's to refuse, on the node
        configuration("udev", "udevRules: not-a-list"),
        configuration("debugEcho", {"udevRules": ['KERNEL="video0"']}),  # another handler's details are its own
    ],
)
def test_apply_accepts_every_other_configuration(manifest: dict[str, Any]) -> None:
    assert normalize(manifest)["metadata"]["name"] == "webcams"


def test_a_stored_configuration_with_a_bad_rule_still_loads_for_the_agent_to_report() -> None:
    manifest = configuration("udev", {"udevRules": ['NAME=="x"']})
    assert Configuration.from_obj(manifest).spec.discovery_handler.name == "udev"
