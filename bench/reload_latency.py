"""Hot-reload latency: an atomic write of hook.json until an emit fires the new version.

Prints the median and p95 over N writes, next to a baseline measured in the same run:
watchfiles' own notification latency (write until the raw event arrives) with the same
tuning, which is the floor hookbus adds its reload and its emit to.

    .venv/bin/python bench/reload_latency.py [--writes 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from hookbus import HookBus
from hookbus.watch import DEBOUNCE_MS, STEP_MS


def atomic_write(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text)
    os.replace(temp, path)


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def hookbus_latency(root: Path, writes: int) -> list[float]:
    """Seconds from each atomic write until an emit returns the new version's output."""
    path = root / "hooks" / "bench" / "hook.json"
    path.parent.mkdir(parents=True)
    samples = []
    with HookBus(root, watch=True) as bus:
        for version in range(writes):
            spec = {"trigger": {"event": "Stop"}, "mode": "sync", "command": f"echo v{version}"}
            started = time.perf_counter()
            atomic_write(path, json.dumps(spec))
            while True:
                generation = bus.generation
                hook = bus.snapshot.hooks.get("bench")
                if hook is not None and hook.options == f"echo v{version}":
                    break
                bus.wait_for_reload(generation, 5)
            decision = bus.emit("Stop", {})
            samples.append(time.perf_counter() - started)
            assert decision.context == f"v{version}", decision
            time.sleep(0.02)  # let the recorder's state.json write settle between samples
    return samples


def watchfiles_latency(root: Path, writes: int) -> list[float]:
    """Seconds from each atomic write until watchfiles reports it (same debounce/step)."""
    from watchfiles._rust_notify import RustNotify

    directory = root / "raw"
    directory.mkdir(parents=True)
    samples = []
    with RustNotify([str(directory)], False, False, 300, True, False) as notify:
        for version in range(writes):
            written = threading.Event()

            def write() -> None:
                atomic_write(directory / "hook.json", f"{version}")
                written.set()

            started = time.perf_counter()
            threading.Thread(target=write).start()
            while True:
                raw = notify.watch(DEBOUNCE_MS, STEP_MS, 5000, None)
                if isinstance(raw, set) and any(p.endswith("hook.json") for _, p in raw):
                    break
            samples.append(time.perf_counter() - started)
            written.wait()
            time.sleep(0.02)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        baseline = watchfiles_latency(root, args.writes)
        measured = hookbus_latency(root, args.writes)
    base_median, median = statistics.median(baseline), statistics.median(measured)
    print(
        f"hot reload     p95 {p95(measured) * 1000:6.1f} ms  median {median * 1000:6.1f} ms  "
        f"(target p95 <= 50 ms; {args.writes} writes)"
    )
    print(
        f"  baseline: watchfiles alone p95 {p95(baseline) * 1000:6.1f} ms  median "
        f"{base_median * 1000:6.1f} ms; hookbus/baseline median ratio {median / base_median:.2f}x"
    )


if __name__ == "__main__":
    main()
