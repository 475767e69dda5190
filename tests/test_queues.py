"""WorkQueue and wait_event_until, on a FakeClock: no sleeps, exact outcomes."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from devplace.clocks import FakeClock
from devplace.queues import WorkQueue, wait_event_until


async def _spin() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


# -- wait_event_until ------------------------------------------------------------------------------------------------


async def test_wait_returns_true_at_once_when_the_event_is_set() -> None:
    clock = FakeClock()
    event = asyncio.Event()
    event.set()
    assert await wait_event_until(event, clock, clock.now() + 10) is True
    assert clock.pending_sleepers == 0


async def test_wait_returns_false_at_once_when_the_deadline_has_passed() -> None:
    clock = FakeClock()
    assert await wait_event_until(asyncio.Event(), clock, clock.now()) is False


async def test_wait_wakes_on_the_event_and_leaves_no_sleeper() -> None:
    clock = FakeClock()
    event = asyncio.Event()
    task = asyncio.ensure_future(wait_event_until(event, clock, clock.now() + 10))
    await _spin()
    assert not task.done()
    event.set()
    assert await task is True
    await _spin()
    assert clock.pending_sleepers == 0


async def test_wait_wakes_at_the_deadline_not_before() -> None:
    clock = FakeClock()
    task = asyncio.ensure_future(wait_event_until(asyncio.Event(), clock, clock.now() + 10))
    await _spin()
    await clock.advance(9.5)
    assert not task.done()
    await clock.advance(0.5)
    assert await task is False


async def test_wait_started_during_an_advance_is_not_stranded() -> None:
    """The clock moves between the caller computing its deadline and the sleep registering: still woken."""
    clock = FakeClock()
    deadline = clock.now() + 5
    advance = asyncio.ensure_future(clock.advance(10))  # runs first: time jumps past the deadline
    task = asyncio.ensure_future(wait_event_until(asyncio.Event(), clock, deadline))
    await advance
    await _spin()
    assert task.done()
    assert task.result() is False


async def test_wait_without_deadline_waits_for_the_event_only() -> None:
    clock = FakeClock()
    event = asyncio.Event()
    task = asyncio.ensure_future(wait_event_until(event, clock, None))
    await clock.advance(1e9)
    assert not task.done()
    event.set()
    assert await task is True


async def test_cancelling_a_wait_leaves_nothing_running() -> None:
    clock = FakeClock()
    task = asyncio.ensure_future(wait_event_until(asyncio.Event(), clock, clock.now() + 10))
    await _spin()
    assert clock.pending_sleepers == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await _spin()
    assert clock.pending_sleepers == 0


# -- WorkQueue -------------------------------------------------------------------------------------------------------


async def test_marks_are_coalesced_and_handed_out_in_order() -> None:
    q: WorkQueue[str] = WorkQueue(FakeClock())
    for key in ["a", "b", "a", "c", "b"]:
        q.mark(key)
    assert len(q) == 3
    assert [await q.get(), await q.get(), await q.get()] == ["a", "b", "c"]
    assert len(q) == 0


async def test_urgent_keys_come_first() -> None:
    q: WorkQueue[str] = WorkQueue(FakeClock())
    q.mark("a")
    q.mark("b")
    q.mark("n", urgent=True)
    q.mark("b", urgent=True)
    q.mark("b")  # already urgent: stays so
    assert await q.get_batch() == ["n", "b", "a"]


async def test_a_key_being_processed_is_not_handed_out_again_until_done() -> None:
    q: WorkQueue[str] = WorkQueue(FakeClock())
    q.mark("a")
    assert await q.get() == "a"
    q.mark("a")
    q.mark("a")
    assert "a" not in q
    assert len(q) == 0
    second = asyncio.ensure_future(q.get())
    await _spin()
    assert not second.done()
    q.done("a")
    assert await second == "a"  # re-queued once after done
    q.done("a")
    assert q.idle


async def test_done_without_a_mark_meanwhile_does_not_requeue() -> None:
    q: WorkQueue[str] = WorkQueue(FakeClock())
    q.mark("a")
    assert await q.get() == "a"
    assert not q.idle
    assert q.processing
    q.done("a")
    assert q.idle
    assert len(q) == 0


async def test_get_waits_for_a_mark() -> None:
    q: WorkQueue[str] = WorkQueue(FakeClock())
    task = asyncio.ensure_future(q.get())
    await _spin()
    assert not task.done()
    q.mark("x")
    assert await task == "x"


async def test_mark_at_keeps_the_earliest_deadline() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock)
    t0 = clock.now()
    q.mark_at("a", t0 + 10)
    q.mark_at("a", t0 + 20)  # later: dropped
    assert q.deadline("a") == t0 + 10
    q.mark_at("a", t0 + 5)  # earlier: replaces
    assert q.deadline("a") == t0 + 5
    task = asyncio.ensure_future(q.get())
    await clock.advance(4)
    assert not task.done()
    await clock.advance(1)
    assert await task == "a"
    q.done("a")
    await clock.advance(20)  # the replaced deadlines do not fire again
    assert q.idle
    assert len(q) == 0


async def test_keys_due_at_the_same_time_come_out_in_the_order_their_deadlines_were_set() -> None:
    """`b`'s earlier deadline replaces its later one after `a`'s was set: both due at once, `a` first (the model
    below found this order; it had kept `b`'s first place from its replaced deadline)."""
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock)
    t0 = clock.now()
    q.mark_at("b", t0 + 2)
    q.mark_at("a", t0 + 1)
    q.mark_at("b", t0 + 1)
    await clock.advance(1)
    assert [await q.get(), await q.get()] == ["a", "b"]


async def test_a_deadline_in_the_past_marks_at_once() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock)
    q.mark_at("a", clock.now())
    assert "a" in q
    assert q.deadline("a") is None


async def test_idle_ignores_future_timers_but_counts_due_ones() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock)
    q.mark_at("a", clock.now() + 10)
    assert q.idle
    await clock.advance(10)  # nobody is waiting in get: due but not promoted
    assert not q.idle
    assert await q.get() == "a"
    assert not q.idle
    q.done("a")
    assert q.idle


async def test_handing_a_key_out_drops_its_deadline() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock)
    q.mark_at("a", clock.now() + 10)
    q.mark("a")
    assert await q.get() == "a"
    assert q.deadline("a") is None
    q.done("a")
    await clock.advance(10)
    assert q.idle
    assert len(q) == 0


async def test_a_timer_due_while_processing_requeues_after_done() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock)
    q.mark("a")
    assert await q.get() == "a"
    q.mark_at("a", clock.now() + 1)  # set by the pass itself
    q.mark("b")
    assert await q.get() == "b"
    await clock.advance(1)
    getter = asyncio.ensure_future(q.get())
    await _spin()
    assert not getter.done()  # promoted, but "a" is still processing
    q.done("a")
    assert await getter == "a"


async def test_forget_drops_queue_requeue_and_deadline() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock)
    q.mark("a")
    q.mark_at("b", clock.now() + 1)
    q.mark("c")
    assert await q.get() == "a"
    q.mark("a")
    for key in "abc":
        q.forget(key)
    q.done("a")
    await clock.advance(5)
    assert q.idle
    assert len(q) == 0


async def test_get_batch_limit_and_order() -> None:
    q: WorkQueue[int] = WorkQueue(FakeClock())
    for key in [5, 3, 9, 1, 7]:
        q.mark(key)
    assert await q.get_batch(2, order=lambda k: k) == [1, 3]  # over the limit: the smallest by order
    assert await q.get_batch(2) == [5, 9]
    q.mark(0)
    assert await q.get_batch(2, order=lambda k: k) == [7, 0]  # all fit: marking order


async def test_a_cancelled_get_takes_nothing() -> None:
    q: WorkQueue[str] = WorkQueue(FakeClock())
    task = asyncio.ensure_future(q.get())
    await _spin()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    q.mark("a")
    assert not q.processing
    assert await q.get() == "a"


async def test_async_iteration() -> None:
    q: WorkQueue[str] = WorkQueue(FakeClock())
    q.mark("a")
    q.mark("b")
    seen: list[str] = []
    async for key in q:
        seen.append(key)
        q.done(key)
        if key == "a":
            q.mark("c")
        if len(seen) == 3:
            break
    assert seen == ["a", "b", "c"]


# -- against a model -------------------------------------------------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "c"])


class QueueModel(RuleBasedStateMachine):
    """Random marks, timers, takes, dones and clock moves; the queue agrees with a plain model throughout."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.q: WorkQueue[str] = self.loop.run_until_complete(self._make())
        self.queued: list[str] = []
        self.processing: set[str] = set()
        self.dirty: set[str] = set()
        self.deadlines: dict[str, float] = {}

    async def _make(self) -> WorkQueue[str]:
        return WorkQueue(self.clock)

    def teardown(self) -> None:
        self.loop.close()

    def _model_mark(self, key: str) -> None:
        if key in self.processing:
            self.dirty.add(key)
        elif key not in self.queued:
            self.queued.append(key)

    def _model_promote(self) -> None:
        now = self.clock.now()
        for key, when in sorted(self.deadlines.items(), key=lambda kv: kv[1]):
            if when <= now:
                del self.deadlines[key]
                self._model_mark(key)

    @rule(key=KEYS)
    def mark(self, key: str) -> None:
        self.q.mark(key)
        self._model_mark(key)

    @rule(key=KEYS, delay=st.integers(0, 5))
    def mark_at(self, key: str, delay: int) -> None:
        when = self.clock.now() + delay
        self.q.mark_at(key, when)
        if delay == 0:
            self._model_mark(key)
        elif key not in self.deadlines or when < self.deadlines[key]:
            # set last in order: among equal deadlines the queue keeps the order they were set in
            self.deadlines.pop(key, None)
            self.deadlines[key] = when

    @rule(seconds=st.integers(1, 3))
    def advance(self, seconds: int) -> None:
        self.loop.run_until_complete(self.clock.advance(seconds))

    @rule()
    def get(self) -> None:
        saved = (list(self.queued), set(self.dirty), dict(self.deadlines))
        self._model_promote()  # what a waiting `get` does first
        if not self.queued:  # it would block: leave both as they were
            self.queued, self.dirty, self.deadlines = saved
            return
        got = self.loop.run_until_complete(self.q.get())
        assert got == self.queued.pop(0)
        assert got not in self.processing
        self.processing.add(got)
        self.deadlines.pop(got, None)

    @precondition(lambda self: bool(self.processing))
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.processing)))
        self.q.done(key)
        self.processing.discard(key)
        if key in self.dirty:
            self.dirty.discard(key)
            self._model_mark(key)

    @invariant()
    def agrees(self) -> None:
        assert {k: self.q.deadline(k) for k in "abc"} == {k: self.deadlines.get(k) for k in "abc"}
        due = any(when <= self.clock.now() for when in self.deadlines.values())
        assert self.q.idle == (not self.queued and not self.processing and not due)
        assert self.q.processing == bool(self.processing)
        assert len(self.q) == len(self.queued)


TestQueueModel = QueueModel.TestCase
TestQueueModel.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


# -- metrics ---------------------------------------------------------------------------------------------------------


async def test_a_named_queue_reports_client_gos_work_queue_metrics_under_its_name() -> None:
    import gc

    from tests.scrapes import delta, labels, registry

    gc.collect()  # queues of earlier tests leave the depth gauge
    before = registry()
    queue: WorkQueue[str] = WorkQueue(FakeClock(), name="test-queue")
    queue.mark("a")
    queue.mark("a")  # coalesced: not added again
    queue.mark("b")
    queue.mark("b", urgent=True)  # moved to the urgent tier: not added again
    queue.mark("c")
    queue.forget("c")
    middle = registry()
    assert middle[("workqueue_depth", labels(name="test-queue"))] == 2
    key = await queue.get()
    queue.done(key)
    after = registry()
    assert delta(before, after, "workqueue_adds_total", name="test-queue") == 3
    assert delta(before, after, "workqueue_queue_duration_seconds_count", name="test-queue") == 1
    assert delta(before, after, "workqueue_work_duration_seconds_count", name="test-queue") == 1
    assert after[("workqueue_depth", labels(name="test-queue"))] == 1


async def test_an_unnamed_queue_reports_nothing() -> None:
    import gc

    from tests.scrapes import registry

    gc.collect()  # queues of earlier tests leave the depth gauge
    before = {k: v for k, v in registry().items() if k[0].startswith("workqueue_")}
    queue: WorkQueue[str] = WorkQueue(FakeClock())
    queue.mark("a")
    queue.done(await queue.get())
    assert {k: v for k, v in registry().items() if k[0].startswith("workqueue_")} == before
