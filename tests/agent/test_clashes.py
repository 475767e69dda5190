"""Resource-name clashes on a node: the senior Configuration is served, a loser serves nothing."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from devplace.agent import _clashes as clashes
from devplace.agent._clashes import Owner, Wanted

P = "akri.sh"
T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:00:01Z"
T2 = "2026-01-01T00:00:02Z"


def plugins(owner: Owner, *instances: str) -> list[Wanted]:
    """The CL plugin of `owner` and the IL plugins of its Instances (suffixes of `<configuration>-`)."""
    out = [Wanted(("cl", owner.namespace, owner.name), f"{P}/{owner.name}", owner)]
    for suffix in instances:
        name = f"{owner.name}-{suffix}"
        out.append(Wanted(("il", owner.namespace, name), f"{P}/{name}", owner))
    return out


def keys(wanted: list[Wanted]) -> frozenset[tuple[str, str, str]]:
    return frozenset(w.plugin for w in wanted)


A = Owner("ns-a", "cams", T0, "uid-a")
B = Owner("ns-b", "cams", T1, "uid-b")


def test_without_a_clash_every_plugin_is_served() -> None:
    mics = Owner("ns-b", "mics", T0, "uid-m")
    wanted = plugins(A, "1a2b3c") + plugins(mics, "1a2b3c")
    outcome = clashes.resolve(wanted)
    assert outcome.served == keys(wanted)
    assert outcome.withheld == {}


def test_the_configuration_created_first_is_served_and_the_other_serves_nothing() -> None:
    outcome = clashes.resolve(plugins(B, "1a2b3c", "4d5e6f") + plugins(A, "1a2b3c"))
    assert outcome.served == keys(plugins(A, "1a2b3c"))
    assert outcome.withheld == {
        ("ns-b", "cams"): (
            "resource akri.sh/cams is served for Configuration ns-a/cams (created first); rename this Configuration"
        )
    }


def test_creation_time_beats_the_namespace_order() -> None:
    older_z = Owner("z", "cams", T0, "uid-z")
    newer_a = Owner("a", "cams", T1, "uid-a")
    outcome = clashes.resolve(plugins(newer_a) + plugins(older_z))
    assert outcome.served == {("cl", "z", "cams")}
    assert list(outcome.withheld) == [("a", "cams")]


def test_the_same_creation_time_goes_by_namespace_and_says_so() -> None:
    a = Owner("a", "cams", T0, "uid-2")
    b = Owner("b", "cams", T0, "uid-1")
    outcome = clashes.resolve(plugins(b) + plugins(a))
    assert outcome.served == {("cl", "a", "cams")}
    assert outcome.withheld == {
        ("b", "cams"): (
            "resource akri.sh/cams is served for Configuration a/cams "
            "(same creationTimestamp; ties go by namespace, then uid); rename this Configuration"
        )
    }


def test_in_one_namespace_with_the_same_creation_time_the_uid_decides() -> None:
    # Configuration `cams-1a2b3c` serves the name of an Instance of Configuration `cams` in the same namespace
    cams = Owner("ns", "cams", T0, "uid-2")
    other = Owner("ns", "cams-1a2b3c", T0, "uid-1")
    outcome = clashes.resolve(plugins(cams, "1a2b3c", "4d5e6f") + plugins(other))
    assert outcome.served == {("cl", "ns", "cams-1a2b3c")}
    assert outcome.withheld == {
        ("ns", "cams"): (
            "resource akri.sh/cams-1a2b3c is served for Configuration ns/cams-1a2b3c "
            "(same creationTimestamp; ties go by namespace, then uid); rename this Configuration"
        )
    }


def test_a_clash_of_instance_names_alone_withholds_the_whole_configuration() -> None:
    # different Configuration names, but an Instance name that equals the other's CL name
    a = Owner("ns-a", "cams-1a2b3c", T0, "uid-a")
    b = Owner("ns-b", "cams", T1, "uid-b")
    outcome = clashes.resolve(plugins(a) + plugins(b, "1a2b3c", "4d5e6f"))
    assert outcome.served == {("cl", "ns-a", "cams-1a2b3c")}
    assert outcome.withheld == {
        ("ns-b", "cams"): (
            "resource akri.sh/cams-1a2b3c is served for Configuration ns-a/cams-1a2b3c (created first); "
            "rename this Configuration"
        )
    }


def test_a_withheld_configuration_takes_no_name_so_a_third_one_is_served() -> None:
    # A beats B on `cams`; B would beat C on `cams-1a2b3c`, but B serves nothing, so C is served
    b = Owner("ns-b", "cams", T1, "uid-b")
    c = Owner("ns-c", "cams-1a2b3c", T2, "uid-c")
    outcome = clashes.resolve(plugins(A) + plugins(b, "1a2b3c") + plugins(c))
    assert outcome.served == {("cl", "ns-a", "cams"), ("cl", "ns-c", "cams-1a2b3c")}
    assert list(outcome.withheld) == [("ns-b", "cams")]


def test_a_configuration_without_a_creation_time_ranks_last() -> None:
    unknown = Owner("a", "cams")
    outcome = clashes.resolve(plugins(unknown) + plugins(B))
    assert outcome.served == {("cl", "ns-b", "cams")}
    assert list(outcome.withheld) == [("a", "cams")]


def test_creation_times_compare_as_times_not_as_text() -> None:
    fractional = Owner("b", "cams", "2026-01-01T00:00:00.500000Z", "uid-b")
    whole = Owner("a", "cams", "2026-01-01T00:00:01Z", "uid-a")
    outcome = clashes.resolve(plugins(whole) + plugins(fractional))
    assert outcome.served == {("cl", "b", "cams")}


def test_two_plugins_of_one_configuration_wanting_one_name_withhold_it() -> None:
    odd = Owner("ns", "cams", T0, "uid")
    wanted = [Wanted(("cl", "ns", "cams"), f"{P}/x", odd), Wanted(("il", "ns", "cams-1"), f"{P}/x", odd)]
    outcome = clashes.resolve(wanted)
    assert outcome.served == frozenset()
    assert outcome.withheld == {("ns", "cams"): "resource akri.sh/x is wanted by two plugins of this Configuration"}


# -- properties ---------------------------------------------------------------------------------------------

NAMES = st.sampled_from(["cams", "mics", "cams-1a2b3c", "mics-1a2b3c"])
TIMES = st.sampled_from(["", T0, T1, T2, "not a time"])


@st.composite
def wanted_sets(draw: st.DrawFn) -> list[Wanted]:
    """Configurations in a few namespaces with colliding names, creation times and uids, each with its plugins."""
    owners = draw(
        st.lists(
            st.builds(
                Owner,
                namespace=st.sampled_from(["a", "b", "c"]),
                name=NAMES,
                created=TIMES,
                uid=st.sampled_from(["", "u1", "u2", "u3"]),
            ),
            max_size=6,
            unique_by=lambda o: o.key,
        )
    )
    out: list[Wanted] = []
    for owner in owners:
        suffixes = draw(st.lists(st.sampled_from(["1a2b3c", "4d5e6f"]), unique=True))
        out += plugins(owner, *suffixes)
    return out


@given(wanted_sets(), st.randoms())
def test_no_resource_name_is_served_twice_and_the_input_order_does_not_matter(
    wanted: list[Wanted], rnd: random.Random
) -> None:
    outcome = clashes.resolve(wanted)
    resources = [w.resource for w in wanted if w.plugin in outcome.served]
    assert len(resources) == len(set(resources))
    shuffled = list(wanted)
    rnd.shuffle(shuffled)
    assert clashes.resolve(shuffled) == outcome


@given(wanted_sets())
def test_a_configuration_is_served_whole_or_withheld_and_a_winner_it_names_is_served(wanted: list[Wanted]) -> None:
    outcome = clashes.resolve(wanted)
    for owner_key in {w.owner.key for w in wanted}:
        mine = {w.plugin for w in wanted if w.owner.key == owner_key}
        if owner_key in outcome.withheld:
            assert not mine & outcome.served
            named = outcome.withheld[owner_key].split("Configuration ")[1].split(" ")[0]
            namespace, name = named.split("/")
            assert ("cl", namespace, name) in outcome.served
        else:
            assert mine <= outcome.served
