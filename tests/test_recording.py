"""hookbus.recording.BackgroundWriter, on its own: batching, flush, close, the bounded queue,
a failing write_batch, many submitting threads, reference counting, fork.

Every write_batch here records what it was given, so each test says exactly which batches
were written; those that must hold the thread block on an Event, never on a sleep.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from typing import Callable, Iterator

import pytest

from hookbus import BackgroundWriter

NAME = "test-writer"
#: Longer than any test may take: a batch written before it elapsed was not waited for.
FOREVER = 60.0


class Storage:
    """A write_batch that keeps every batch; ``hold()`` makes the next call block (after
    setting ``entered``) until ``let_go()``; ``fail_on`` makes batches holding it raise."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.threads: set[str] = set()
        self.entered = threading.Event()
        self.wrote = threading.Event()
        self._gate = threading.Event()
        self._gate.set()
        self.fail_on: set[int] = set()

    def hold(self) -> None:
        self._gate.clear()
        self.entered.clear()

    def let_go(self) -> None:
        self._gate.set()

    def __call__(self, items: list[int]) -> None:
        self.threads.add(threading.current_thread().name)
        self.entered.set()
        assert self._gate.wait(FOREVER), "the test never let the writer go"
        if self.fail_on & set(items):
            raise OSError(28, "No space left on device")
        self.batches.append(list(items))
        self.wrote.set()

    @property
    def items(self) -> list[int]:
        return [item for batch in self.batches for item in batch]


@pytest.fixture
def storage() -> Iterator[Storage]:
    storage = Storage()
    yield storage
    storage.let_go()  # a failing test must not leave a writer thread blocked


@pytest.fixture
def writers() -> Iterator[list[BackgroundWriter[int]]]:
    """Writers to close at teardown, whatever the test did."""
    made: list[BackgroundWriter[int]] = []
    yield made
    for writer in made:
        writer.close(10)


@pytest.fixture
def make(storage: Storage, writers: list[BackgroundWriter[int]]) -> Callable[..., BackgroundWriter[int]]:
    """``make(**options)``: a writer into ``storage``, closed at teardown."""
    def make_writer(**options: object) -> BackgroundWriter[int]:
        writer: BackgroundWriter[int] = BackgroundWriter(storage, name=NAME, **options)  # type: ignore[arg-type]
        writers.append(writer)
        return writer

    return make_writer


def writer_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == NAME]


def hookbus_logged(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "hookbus" and text in r.getMessage()]


# -- batching ---------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_items_submitted_together_are_written_in_one_batch_after_the_delay(make, storage):
    writer = make(batch_delay=0.3)
    started = time.monotonic()
    for item in range(5):
        assert writer.submit(item) is True
    assert storage.wrote.wait(10)
    waited = time.monotonic() - started
    assert storage.batches == [[0, 1, 2, 3, 4]]
    assert 0.25 <= waited < 10  # gathered for the delay, then written at once
    assert storage.threads == {NAME}


@pytest.mark.timeout(30)
def test_a_full_batch_does_not_wait_for_the_delay(make, storage):
    writer = make(batch_delay=FOREVER, max_batch=3)
    for item in range(7):
        writer.submit(item)
    deadline = time.monotonic() + 10
    while len(storage.batches) < 2 and time.monotonic() < deadline:
        storage.wrote.wait(0.1)
        storage.wrote.clear()
    assert storage.batches == [[0, 1, 2], [3, 4, 5]]
    assert writer.flush(10)
    assert storage.batches == [[0, 1, 2], [3, 4, 5], [6]]


@pytest.mark.timeout(30)
def test_flush_does_not_wait_out_the_delay(make, storage):
    writer = make(batch_delay=FOREVER)
    for item in range(3):
        writer.submit(item)
    started = time.monotonic()
    assert writer.flush(10) is True
    assert time.monotonic() - started < 10
    assert storage.items == [0, 1, 2]
    assert writer.flush(0) is True  # nothing more to write: at once, whatever the timeout


# -- flush and close --------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_flush_returns_only_once_the_batch_is_written(make, storage):
    writer = make(batch_delay=0)
    storage.hold()
    writer.submit(1)
    writer.submit(2)
    assert storage.entered.wait(10)
    assert writer.flush(0.2) is False  # still being written
    assert storage.batches == []
    storage.let_go()
    assert writer.flush(10) is True
    assert storage.items == [1, 2]


@pytest.mark.timeout(30)
def test_flush_waits_for_what_was_submitted_before_it_only(make, storage):
    writer = make(batch_delay=0)
    writer.submit(1)
    assert writer.flush(10)
    storage.hold()
    writer.submit(2)
    assert storage.entered.wait(10)
    flushed: list[bool] = []
    flusher = threading.Thread(target=lambda: flushed.append(writer.flush(10)))
    flusher.start()
    flusher.join(0.2)
    assert flusher.is_alive()  # waiting for item 2
    storage.let_go()
    flusher.join(10)
    assert flushed == [True]
    assert storage.items == [1, 2]


@pytest.mark.timeout(30)
def test_close_drains_ends_the_thread_and_drops_what_comes_after(make, storage, caplog):
    caplog.set_level(logging.WARNING, logger="hookbus")
    writer = make(batch_delay=FOREVER)
    for item in range(100):
        writer.submit(item)
    assert writer_threads()
    assert writer.close(10) is True
    assert storage.items == list(range(100))
    assert writer_threads() == []
    assert writer.closed

    assert writer.submit(100) is False  # an emit racing the close: dropped, counted
    assert writer.submit(101) is False
    assert (writer.dropped, writer.failed, writer.lost) == (2, 0, 2)
    [report] = hookbus_logged(caplog, "after close()")
    assert report.levelno == logging.ERROR
    assert report.getMessage().startswith(f"{NAME}: ")
    assert "1 record lost so far" in report.getMessage()
    assert writer.close(1) is True  # idempotent
    assert writer_threads() == []
    assert storage.items == list(range(100))


@pytest.mark.timeout(30)
def test_on_stop_runs_on_the_writer_thread_after_the_last_write(storage, writers):
    stops: list[tuple[str, int]] = []
    writer: BackgroundWriter[int] = BackgroundWriter(
        storage,
        name=NAME,
        batch_delay=FOREVER,
        on_stop=lambda: stops.append((threading.current_thread().name, len(storage.items))),
    )
    writers.append(writer)
    writer.acquire()
    writer.submit(1)
    writer.submit(2)
    assert writer.release(10)
    assert stops == [(NAME, 2)]


# -- losses -----------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_a_full_queue_drops_counts_and_reports_once(make, storage, caplog):
    caplog.set_level(logging.WARNING, logger="hookbus")
    writer = make(batch_delay=0, max_queue=3)
    storage.hold()
    writer.submit(0)
    assert storage.entered.wait(10)  # the thread holds item 0: the queue is empty again
    assert [writer.submit(item) for item in (1, 2, 3)] == [True] * 3
    started = time.monotonic()
    assert [writer.submit(item) for item in (4, 5, 6)] == [False] * 3
    assert time.monotonic() - started < 1  # dropping never waits for the writer
    assert (writer.dropped, writer.lost) == (3, 3)
    [report] = hookbus_logged(caplog, "queue is full")
    assert report.levelno == logging.ERROR
    assert "3 records wait" in report.getMessage() and "max_queue" in report.getMessage()
    assert "1 record lost so far" in report.getMessage()

    storage.let_go()
    assert writer.flush(10)
    assert storage.items == [0, 1, 2, 3]
    assert writer.submit(7) is True
    [recovered] = hookbus_logged(caplog, "recovered")
    assert recovered.getMessage() == f"{NAME}: queue full: recovered; 3 records were lost meanwhile"
    assert writer.flush(10) and storage.items[-1] == 7
    assert len(hookbus_logged(caplog, "queue is full")) == 1


@pytest.mark.timeout(30)
def test_a_raising_write_batch_is_counted_reported_once_and_the_thread_goes_on(make, storage, caplog):
    caplog.set_level(logging.WARNING, logger="hookbus")
    writer = make(batch_delay=FOREVER, max_batch=2)  # batches by size only: [1, 2] [3, 4] [5]
    storage.fail_on = {1, 2, 3, 4, 5}
    for item in range(1, 6):  # each batch raises
        writer.submit(item)
    assert writer.flush(10)
    assert (writer.failed, writer.dropped, writer.lost) == (5, 0, 5)
    [report] = hookbus_logged(caplog, "writing a batch failed")
    assert report.levelno == logging.ERROR
    message = report.getMessage()
    assert message.startswith(f"{NAME}: writing a batch failed, OSError: [Errno 28] No space left on device")
    assert f"raised at {__file__}:" in message  # where the storage code raised
    assert "2 records lost so far" in message  # the first batch's

    threads = writer_threads()
    assert len(threads) == 1 and threads[0].is_alive()  # it did not die of it
    writer.submit(6)
    writer.submit(7)
    assert writer.flush(10)
    assert storage.items == [6, 7]
    assert writer_threads() == threads
    [recovered] = hookbus_logged(caplog, "recovered")
    assert recovered.getMessage() == f"{NAME}: write_batch: recovered; 5 records were lost meanwhile"
    assert len(hookbus_logged(caplog, "writing a batch failed")) == 1


@pytest.mark.timeout(30)
def test_flush_from_write_batch_is_refused_not_a_deadlock(writers, caplog):
    caplog.set_level(logging.WARNING, logger="hookbus")
    holder: list[BackgroundWriter[int]] = []
    writer: BackgroundWriter[int] = BackgroundWriter(lambda items: holder[0].flush(), name=NAME, batch_delay=0)
    holder.append(writer)
    writers.append(writer)
    writer.submit(1)
    assert writer.flush(10)
    assert writer.failed == 1
    [report] = hookbus_logged(caplog, "writing a batch failed")
    assert "would wait for itself" in report.getMessage()


# -- threads ----------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_submits_from_many_threads_are_each_written_once_in_their_order(make, storage):
    writer = make(batch_delay=0.005, max_batch=100)
    threads_n, per_thread = 8, 2_000
    start = threading.Barrier(threads_n)
    refused: list[int] = []

    def submitter(who: int) -> None:
        start.wait()
        for n in range(per_thread):
            if not writer.submit(who * per_thread + n):
                refused.append(n)

    threads = [threading.Thread(target=submitter, args=(who,)) for who in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert writer.flush(30)
    assert refused == []
    items = storage.items
    assert sorted(items) == list(range(threads_n * per_thread))
    for who in range(threads_n):
        mine = [item for item in items if item // per_thread == who]
        assert mine == sorted(mine)  # each thread's items in the order it submitted them
    assert all(len(batch) <= 100 for batch in storage.batches)
    assert storage.threads == {NAME}


@pytest.mark.timeout(30)
def test_the_thread_starts_with_the_first_submit_as_a_named_daemon(make, storage):
    writer = make(batch_delay=0)
    writer.acquire()
    assert writer_threads() == []  # acquiring starts nothing
    writer.submit(1)
    [thread] = writer_threads()
    assert thread.daemon
    assert writer.release(10)


@pytest.mark.timeout(30)
def test_the_thread_ends_with_the_last_release_and_comes_back_on_the_next_acquire(make, storage):
    writer = make(batch_delay=FOREVER)
    writer.acquire()
    writer.acquire()
    writer.submit(1)
    assert writer.release(10) is True  # flushed; one user left
    assert storage.items == [1]
    assert len(writer_threads()) == 1
    writer.submit(2)
    assert writer.release(10) is True
    assert storage.items == [1, 2]
    assert writer_threads() == []

    writer.acquire()  # a new bus: a new thread with its first record
    writer.submit(3)
    assert len(writer_threads()) == 1
    assert writer.release(10)
    assert storage.items == [1, 2, 3]
    assert writer_threads() == []
    assert not writer.closed


@pytest.mark.timeout(30)
def test_a_record_after_the_last_release_is_written_and_leaves_no_thread(make, storage):
    writer = make(batch_delay=FOREVER)
    writer.acquire()
    assert writer.release(10)
    writer.submit(1)  # an async fire that finished after its bus closed
    deadline = time.monotonic() + 10
    while writer_threads() and time.monotonic() < deadline:
        writer_threads()[0].join(0.1)
    assert storage.items == [1]  # written at once, not after the delay
    assert writer_threads() == []


@pytest.mark.timeout(30)
def test_a_bus_opening_while_the_last_one_closes_keeps_the_thread(make, storage):
    writer = make(batch_delay=0)
    writer.acquire()
    storage.hold()
    writer.submit(1)
    assert storage.entered.wait(10)
    released: list[bool] = []
    closer = threading.Thread(target=lambda: released.append(writer.release(10)))
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # flushing: item 1 is still being written
    writer.acquire()
    storage.let_go()
    closer.join(10)
    assert released == [True]
    writer.submit(2)
    assert writer.flush(10)
    assert storage.items == [1, 2]
    assert len(writer_threads()) == 1  # kept for the new user
    assert writer.release(10)
    assert writer_threads() == []


@pytest.mark.timeout(30)
def test_a_bus_opening_while_the_thread_ends_keeps_it(storage, writers):
    in_stop, go_on = threading.Event(), threading.Event()

    def on_stop() -> None:
        in_stop.set()
        assert go_on.wait(FOREVER)

    writer: BackgroundWriter[int] = BackgroundWriter(storage, name=NAME, batch_delay=0, on_stop=on_stop)
    writers.append(writer)
    writer.acquire()
    writer.submit(1)
    released: list[bool] = []
    closer = threading.Thread(target=lambda: released.append(writer.release(10)))
    closer.start()
    assert in_stop.wait(10)  # everything written: the thread is about to end
    writer.acquire()  # a new bus, just in time
    closer.join(10)
    assert released == [True]  # the release stopped waiting for the thread to end
    go_on.set()
    writer.submit(2)
    assert writer.flush(10)
    assert storage.items == [1, 2]
    assert len(writer_threads()) == 1  # the same thread went on
    assert writer.release(10)
    assert writer_threads() == []


# -- construction and fork --------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"max_queue": 0}, "max_queue must be at least 1, not 0"),
        ({"batch_delay": -1}, "batch_delay is seconds, 0 or more, not -1"),
        ({"max_batch": 0}, "max_batch must be at least 1 (or None: no limit), not 0"),
    ],
)
def test_bad_options_say_which_and_why(options, says, storage):
    with pytest.raises(ValueError, match=r"^BackgroundWriter\(name='test-writer'\): ") as raised:
        BackgroundWriter(storage, name=NAME, **options)
    assert says in str(raised.value)


@pytest.mark.timeout(30)
@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
def test_a_forked_child_starts_with_an_empty_writer_of_its_own(make, storage):
    writer = make(batch_delay=0, max_queue=2)
    writer.acquire()
    storage.hold()
    writer.submit(1)
    assert storage.entered.wait(10)  # the parent's thread is inside write_batch
    writer.submit(2)
    writer.submit(3)
    writer.submit(4)  # dropped: the parent's count is 1
    assert writer.dropped == 1
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads: on purpose
        pid = os.fork()
    if pid == 0:  # the child: report, and never return into pytest
        code = 1
        try:
            storage.let_go()
            fresh = writer.dropped == 0 and writer_threads() == []
            accepted = writer.submit(10)
            flushed = writer.flush(10)
            os.write(write_end, repr((fresh, accepted, flushed, storage.items)).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        said = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # Nothing of the parent's queue (2, 3) is written in the child: the parent writes it.
    assert said == repr((True, True, True, [10]))
    storage.let_go()
    assert writer.flush(10)
    assert storage.items == [1, 2, 3]
    assert writer.release(10)


# -- the bound in bytes -----------------------------------------------------------------


@pytest.mark.timeout(30)
def test_a_queue_full_in_bytes_drops_counts_and_says_so(make, storage, caplog):
    caplog.set_level(logging.WARNING, logger="hookbus")
    writer = make(batch_delay=0, max_bytes=100, weigh=lambda item: item)  # each item weighs itself
    storage.hold()
    writer.submit(60)
    assert storage.entered.wait(10)  # being written: its 60 bytes are still held
    assert writer.submit(40) is True  # 100: at the bound
    started = time.monotonic()
    assert writer.submit(1) is False  # 101 would be past it
    assert time.monotonic() - started < 1  # dropping never waits for the writer
    assert (writer.held_bytes, writer.dropped, writer.lost) == (100, 1, 1)
    [report] = hookbus_logged(caplog, "queue is full")
    assert "1 records wait to be written" in report.getMessage() and "max_bytes" in report.getMessage()

    storage.let_go()
    assert writer.flush(10)
    assert writer.held_bytes == 0
    assert writer.submit(500) is True  # nothing held: one item past the bound is still taken
    assert writer.flush(10)
    assert storage.items == [60, 40, 500]


def test_max_bytes_must_be_at_least_one(storage):
    with pytest.raises(ValueError, match=r"^BackgroundWriter\(name='test-writer'\): max_bytes must be at least 1, not 0"):
        BackgroundWriter(storage, name=NAME, max_bytes=0)


def test_the_default_weight_counts_what_an_item_holds_once_without_recursion():
    from hookbus.recording import approximate_bytes
    from hookbus.records import RunRecord

    reason = "r" * 100_000
    record = RunRecord(at="2026-01-01T00:00:00.000Z", hook_id="h", event="Stop", mode="sync", status="deny",
                       duration=0.0, decision={"behavior": "deny", "reason": reason})
    assert 100_000 < approximate_bytes(record) < 100_000 + 4096
    holding_itself: list[object] = []
    holding_itself.append(holding_itself)
    assert 0 < approximate_bytes(holding_itself) < 1024
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    assert approximate_bytes(deep) > 100_000 * 56  # every level counted, no RecursionError
