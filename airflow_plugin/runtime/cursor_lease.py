"""A cursor slot's heartbeat: renews the lease of the item it runs (``drivers.base.Lease``).

A thread, because the item's task chain runs on the slot's own thread and may block in a tool
for longer than the lease. It renews every third of the lease; a renewal the driver refuses
(another claim took the item: the slot stalled past its deadline, e.g. stopped or starved of CPU)
marks the lease lost and tells the driver to stop the item (``driver.stop``: the item's SQL is
cancelled and refused from then on). A renewal that fails for a transient reason is tried again
at the next beat; the completion's fence decides in the end either way.
"""

from __future__ import annotations

import threading
from typing import Any, Self

from ..drivers import CursorDriverError, Lease

__all__ = ["Heartbeat"]


class Heartbeat:
    def __init__(self, driver: Any, lease: Lease, *, name: str = "noetl-cursor-heartbeat") -> None:
        self._driver = driver
        self._lease = lease
        self._interval = max(lease.seconds / 3.0, 0.05)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.lost: str | None = None  # why the lease was lost
        self.beats = 0
        self.errors: list[str] = []

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                held = self._driver.renew(self._lease)
            except CursorDriverError as exc:
                self.errors.append(str(exc))
                continue
            self.beats += 1
            if not held:
                self.lost = "a renewal was refused: another claim holds the item"
                self._driver.stop(self._lease, self.lost)
                return
