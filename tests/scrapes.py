"""Reading Prometheus' text format in tests: `series(text)` parses a scrape with prometheus_client's own parser.

    before = series(scrape_text)
    ...
    assert series(after)[("apiserver_request_total", labels(verb="PUT", resource="instances", code="200"))] == 3

Keys are (sample name, frozenset of label pairs), so a series is found only with its exact label set.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from devplace import metrics

__all__ = ["Key", "delta", "labels", "registry", "series"]

Key = tuple[str, frozenset[tuple[str, str]]]


def labels(**pairs: str) -> frozenset[tuple[str, str]]:
    return frozenset(pairs.items())


def series(text: str) -> dict[Key, float]:
    """Every sample of a scrape, by (name, exact label set)."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def registry() -> dict[Key, float]:
    """This process's registry, scraped and parsed."""
    return series(metrics.exposition().decode())


def delta(before: dict[Key, float], after: dict[Key, float], series_name: str, **pairs: str) -> float:
    """How much one series grew between two scrapes (absent counts as 0)."""
    key = (series_name, labels(**pairs))
    return after.get(key, 0.0) - before.get(key, 0.0)
