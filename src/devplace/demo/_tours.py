"""The narrator of `devplace demo`: headings, what the seed says, what happened, and the ledger of expectations.

The demo doubles as a smoke test, so narration and checking are one thing: every claim the tour prints about an
outcome goes through `Tour.expect`, which prints `ok:` or `FAILED:` and records the verdict. The command exits 1 when
any verdict failed, so the text can never say a thing went as the seed says when it did not.

Two renderings of the same lines: with a terminal on stdout, rich colour, tables and highlighted YAML; otherwise
(CI, pipes, tests) plain text with stable prefixes (`== Act`, `-> `, `   seed: ` or `   design: `, `   ok: `,
`   FAILED: `) so a test or a reader can grep it. Not thread-safe; one tour per command run.

Tables, and objects named in a line, are drawn by the CLI's own renderers (`Rendering`: `devplace.cli._output`
satisfies it), so the tour prints what `devplace get` prints. The demo sits below the CLI in the layers and never
imports it: the `devplace demo` command hands them in.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import typer
from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.rule import Rule
from rich.syntax import Syntax
from rich.text import Text

from devplace import errors
from devplace.store import DELETE, Store, cas


class Rendering(Protocol):
    """How the CLI shows objects and tables (`devplace.cli._output` is one): what the tour draws with."""

    def label_of(self, obj: Mapping[str, Any]) -> str:
        """`Configuration default/x`: how a line names an object."""
        ...

    def table(
        self, kind: str, items: Sequence[Mapping[str, Any]], *, namespaced: bool, now: float, wide: bool = False
    ) -> tuple[list[str], list[list[str]]]:
        """Headers and rows of `devplace get` for `items` of `kind`."""
        ...

    def plain_table(self, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
        """Columns aligned with spaces, for plain text."""
        ...

    def rich_table(self, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> RenderableType:
        """The same table for a terminal."""
        ...


@dataclass(frozen=True)
class Check:
    """One expectation: in which act, what happened (with why, when it held), what was wanted, whether it held."""

    act: int
    happened: str
    wanted: str
    ok: bool


@dataclass
class Tour:
    """Prints the tour and keeps its verdicts. `console` None means plain text through `echo`."""

    rendering: Rendering
    console: Console | None = None
    echo: Callable[[str], None] = typer.echo
    checks: list[Check] = field(default_factory=list)
    act_number: int = 0

    @classmethod
    def for_stdout(cls, rendering: Rendering) -> Tour:
        """Rich output on a terminal, plain text otherwise."""
        console = Console(highlight=False, soft_wrap=True)
        return cls(rendering, console if console.is_terminal else None)

    @property
    def rich(self) -> bool:
        return self.console is not None

    # -- structure -------------------------------------------------------------------------------------------------

    def title(self, text: str) -> None:
        if self.console is not None:
            self.console.print(Text(text, style="bold"))
        else:
            self.echo(text)

    def act(self, number: int, title: str, source: str) -> None:
        """Start act `number`; `source` says which seed (or part of the product) it follows."""
        self.act_number = number
        heading = f"Act {number}: {title}"
        if self.console is not None:
            self.console.print()
            self.console.print(Rule(Text(heading, style="bold cyan"), align="left"))
            self.console.print(Text(source, style="dim"))
        else:
            self.echo(f"\n== {heading} ==")
            self.echo(source)

    def step(self, what: str, says: str = "", who: str = "seed") -> None:
        """A step: what is done now, and (optionally) what `who` (the seed, the design) says should happen."""
        if self.console is not None:
            self.console.print()
            self.console.print(Text.assemble(("-> ", "bold"), (what, "bold")))
            if says:
                self.console.print(Text.assemble("   ", (f"{who}: ", "magenta"), (says, "italic")))
        else:
            self.echo(f"\n-> {what}")
            if says:
                self.echo(f"   {who}: {says}")

    def say(self, text: str = "") -> None:
        if self.console is not None:
            self.console.print(Text(text))
        else:
            self.echo(text)

    def note(self, text: str) -> None:
        """A quieter remark (how something works, where to look next)."""
        if self.console is not None:
            self.console.print(Text(f"   {text}", style="dim"))
        else:
            self.echo(f"   {text}")

    def command(self, text: str) -> None:
        """A command a user could type for the same effect."""
        if self.console is not None:
            self.console.print(Text.assemble(("$ ", "green"), (text, "green")))
        else:
            self.echo(f"$ {text}")

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "   ") -> None:
        if self.console is not None:
            self.console.print(Padding(self.rendering.rich_table(headers, rows), (0, 0, 0, len(indent))))
        else:
            self.echo("\n".join(indent + line for line in self.rendering.plain_table(headers, rows).splitlines()))

    def code(self, text: str, language: str = "yaml", indent: str = "   ") -> None:
        body = text.rstrip("\n")
        if self.console is not None:
            syntax = Syntax(body, language, theme="ansi_dark", background_color="default")
            self.console.print(Padding(syntax, (0, 0, 0, len(indent))))
        else:
            self.echo("\n".join(indent + line for line in body.splitlines()))

    # -- verdicts --------------------------------------------------------------------------------------------------

    def expect(self, ok: bool, happened: str, wanted: str = "", because: str = "") -> bool:
        """Record and print one verdict.

        `happened` states only what the tour saw (it is printed either way, so it must not claim success); `wanted`
        is what was expected (shown on failure); `because` explains a success and is shown only when `ok`.
        """
        shown = f"{happened} -- {because}" if ok and because else happened
        self.checks.append(Check(self.act_number, shown, wanted, ok))
        if self.console is not None:
            if ok:
                self.console.print(Text.assemble("   ", ("ok: ", "bold green"), shown))
            else:
                self.console.print(Text.assemble("   ", ("FAILED: ", "bold red"), shown))
                if wanted:
                    self.console.print(Text.assemble("           ", ("expected: ", "red"), wanted))
        elif ok:
            self.echo(f"   ok: {shown}")
        else:
            self.echo(f"   FAILED: {shown}" + (f" (expected: {wanted})" if wanted else ""))
        return ok

    def broke(self, message: str) -> None:
        """An act stopped before its end (an error, not a verdict): recorded as a failed check."""
        self.checks.append(Check(self.act_number, message, "the act to run to its end", False))
        if self.console is not None:
            self.console.print(Text.assemble("   ", ("FAILED: ", "bold red"), message))
        else:
            self.echo(f"   FAILED: {message}")

    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def summary(self, acts: Sequence[int]) -> bool:
        """Print the verdict of the whole tour; True when every expectation held."""
        failed = self.failures()
        shown = ", ".join(str(a) for a in acts)
        if not failed:
            line = f"demo: all {len(self.checks)} expectations held (acts {shown})"
            if self.console is not None:
                self.console.print()
                self.console.print(Text(line, style="bold green"))
            else:
                self.echo(f"\n{line}")
            return True
        lines = [f"demo: {len(failed)} of {len(self.checks)} expectations NOT met (acts {shown}):"]
        lines += [f"  act {c.act}: {c.happened}" + (f" (expected: {c.wanted})" if c.wanted else "") for c in failed]
        if self.console is not None:
            self.console.print()
            for line in lines:
                self.console.print(Text(line, style="bold red"))
        else:
            self.echo("\n" + "\n".join(lines))
        return False


async def delete_all(store: Store, doomed: Iterable[tuple[str, str, str]]) -> int:
    """An act's cleanup: delete each (kind, name, namespace) that exists, each by CAS on the state read (something
    that changed it meanwhile makes the delete decide again); returns how many were deleted."""
    removed = 0
    for kind, name, namespace in doomed:
        with contextlib.suppress(errors.NotFound):
            await cas(store, kind, name, namespace, lambda _: DELETE)
            removed += 1
    return removed
