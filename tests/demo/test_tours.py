"""The demo's narrator: plain lines with stable prefixes off a terminal, rich ones on it, and the kept verdicts."""

from __future__ import annotations

import io

from rich.console import Console

from devplace.cli import _output as output
from devplace.demo._tours import Tour


def test_the_plain_tour_prints_verdicts_with_stable_prefixes_and_keeps_them() -> None:
    printed: list[str] = []
    tour = Tour(output, echo=printed.append)
    tour.act(7, "a title", "a source")
    tour.step("do a thing", "it works")
    assert tour.expect(True, "it worked")
    assert not tour.expect(False, "it broke", "it works")
    tour.broke("act 7 stopped: Unavailable: gone")
    assert printed == [
        "\n== Act 7: a title ==",
        "a source",
        "\n-> do a thing",
        "   seed: it works",
        "   ok: it worked",
        "   FAILED: it broke (expected: it works)",
        "   FAILED: act 7 stopped: Unavailable: gone",
    ]
    assert [(c.act, c.ok) for c in tour.checks] == [(7, True), (7, False), (7, False)]
    printed.clear()
    assert tour.summary([7]) is False
    assert printed[0] == "\ndemo: 2 of 3 expectations NOT met (acts 7):\n  act 7: it broke (expected: it works)\n" + (
        "  act 7: act 7 stopped: Unavailable: gone (expected: the act to run to its end)"
    )


def test_a_tour_where_everything_held_says_so() -> None:
    printed: list[str] = []
    tour = Tour(output, echo=printed.append)
    tour.expect(True, "fine")
    assert tour.summary([1, 2]) is True
    assert printed[-1] == "\ndemo: all 1 expectations held (acts 1, 2)"


def test_the_rich_tour_marks_failures_on_a_terminal() -> None:
    buffer = io.StringIO()
    tour = Tour(output, Console(file=buffer, force_terminal=True, width=100))
    tour.act(1, "t", "s")
    tour.table(["A", "B"], [["1", "2"]])
    tour.code("a: 1")
    tour.expect(False, "x [not markup]", "y")
    text = buffer.getvalue()
    assert "\x1b[" in text
    assert "FAILED: " in text
    assert "x [not markup]" in text  # narration is text, never parsed as rich markup
