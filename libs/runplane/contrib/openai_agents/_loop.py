"""A deterministic asyncio event loop, stepped from inside a runplane agent.

A runplane agent is a coroutine the engine drives by ``send()``, with no event loop; the
Agents SDK's ``Runner`` is asyncio code (tasks, ``gather``, events, queues). This loop runs
the SDK's coroutines on the agent's own thread, one burst at a time, with no I/O of its own:

* ``call_soon`` / tasks / futures work as in any loop, in FIFO order, so the same answers
  give the same schedule — on the first run and on every replay;
* time is virtual: it starts at the run's logical clock (``ctx.now()``), follows it after
  every effect, and jumps to the next timer only when nothing else can move — a sleep costs
  no wall time and a timeout fires at the same point of every replay;
* whatever the SDK code needs from the world it asks through ``Bridge.ask``: the request
  waits as a ``Job`` until the loop is idle, then the agent performs it as runplane effects
  (``Bridge.drive``) and the answer resumes the SDK code.

Threads, executors and sockets are refused (``ConfigError``): work there would be outside
any effect, so neither journaled nor served on replay.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, TypeVarTuple

from runplane.errors import ConfigError

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

__all__ = ["Bridge", "Job", "StepLoop"]


class StepLoop(asyncio.AbstractEventLoop):
    """The loop (module docstring). Only what asyncio's tasks, futures, ``gather``,
    ``wait``, ``shield``, sleeps, timeouts, locks, events and queues use is implemented."""

    def __init__(self, now_s: float) -> None:
        self._ready: deque[asyncio.Handle] = deque()
        self._timers: list[asyncio.TimerHandle] = []
        self._now = now_s
        self._errors: list[dict[str, Any]] = []

    # -- stepping ---------------------------------------------------------------------------
    def run_ready(self) -> None:
        """Run callbacks until none is ready (due timers included). The thread's running loop
        is this one meanwhile — ``get_running_loop()`` in SDK code, ``create_task``, queues —
        and whatever ran before (the executor's own loop) afterwards."""
        previous = asyncio._get_running_loop()
        asyncio._set_running_loop(self)
        try:
            while True:
                self._due()
                if not self._ready:
                    return
                handle = self._ready.popleft()
                if not handle.cancelled():
                    handle._run()
        finally:
            asyncio._set_running_loop(previous)

    def advance(self, now_s: float) -> None:
        """The clock follows the run's logical clock; never backwards."""
        self._now = max(self._now, now_s)

    def next_timer(self) -> bool:
        """Nothing can move but a timer: jump to the earliest one. False: there is none."""
        while self._timers and self._timers[0].cancelled():
            heapq.heappop(self._timers)
        if not self._timers:
            return False
        self._now = max(self._now, self._timers[0].when())
        return True

    def cancel_all(self) -> None:
        """Cancel every task still running (the run left before its answer): run their
        ``finally`` blocks here, answering nothing more."""
        for task in asyncio.all_tasks(self):
            task.cancel()
        for _ in range(100):  # cancellation may wake further tasks; a bounded drain
            self.run_ready()
            if not any(not t.done() for t in asyncio.all_tasks(self)):
                break

    def _due(self) -> None:
        while self._timers and self._timers[0].when() <= self._now:
            timer = heapq.heappop(self._timers)
            if not timer.cancelled():
                self._ready.append(timer)

    # -- what asyncio asks of a loop ---------------------------------------------------------
    def time(self) -> float:
        return self._now

    def call_soon(
        self,
        callback: Callable[[*Ts], object],
        *args: *Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        handle = asyncio.Handle(callback, args, self, context)
        self._ready.append(handle)
        return handle

    def call_at(
        self,
        when: float,
        callback: Callable[[*Ts], object],
        *args: *Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        timer = asyncio.TimerHandle(when, callback, args, self, context)
        heapq.heappush(self._timers, timer)
        timer._scheduled = True  # type: ignore[attr-defined]  # cancel() tells the loop
        return timer

    def call_later(
        self,
        delay: float,
        callback: Callable[[*Ts], object],
        *args: *Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        return self.call_at(self._now + delay, callback, *args, context=context)

    def _timer_handle_cancelled(self, handle: asyncio.TimerHandle) -> None:
        pass  # a cancelled timer is dropped when it comes up (``_due``, ``next_timer``)

    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.Future(loop=self)

    def create_task(  # type: ignore[override]
        self,
        coro: Coroutine[Any, Any, T],
        *,
        name: str | None = None,
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[T]:
        return asyncio.Task(coro, loop=self, name=name, context=context)

    def get_debug(self) -> bool:
        return False

    def is_running(self) -> bool:
        return True

    def is_closed(self) -> bool:
        return False

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        # An exception nobody retrieved (a task dropped by the SDK): kept, never printed.
        self._errors.append(context)

    def default_exception_handler(self, context: dict[str, Any]) -> None:
        self._errors.append(context)

    def run_in_executor(
        self, executor: Any, func: Callable[[*Ts], T], *args: *Ts
    ) -> asyncio.Future[T]:
        raise ConfigError(
            f"{getattr(func, '__qualname__', func)!r} would run in a thread, outside any "
            "runplane effect: make it a runplane tool (runplane.providers.tool)"
        )

    def call_soon_threadsafe(
        self,
        callback: Callable[[*Ts], object],
        *args: *Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        raise ConfigError("another thread reached into a durable run: not deterministic")


@dataclass(eq=False)
class Job:
    """One thing the SDK code waits for: ``what`` is the adapter's request (a model turn, a
    tool call), ``future`` the SDK side's answer."""

    what: Any
    future: asyncio.Future[Any]


class Bridge:
    """Requests from the SDK code (``ask``, awaited inside the loop) to the runplane agent
    (``drive``, awaited by the engine's coroutine), and the answers back."""

    def __init__(self, loop: StepLoop) -> None:
        self.loop = loop
        self._jobs: list[Job] = []

    async def ask(self, what: Any) -> Any:
        """Inside the loop: wait for the agent to perform ``what`` → its answer (or raise
        what performing it raised)."""
        job = Job(what, self.loop.create_future())
        self._jobs.append(job)
        return await job.future

    async def drive(
        self,
        main: Coroutine[Any, Any, T],
        perform: Callable[[Sequence[Job]], Awaitable[None]],
        now_s: Callable[[], float],
    ) -> T:
        """Run ``main`` on the loop to its end: whenever the loop is idle, the jobs waiting
        (in the order they were asked) go to ``perform``, which answers each one's future with
        what runplane effects returned. ``now_s``: the run's logical clock, in seconds."""
        task = self.loop.create_task(main)
        try:
            while True:
                self.loop.run_ready()
                if task.done():
                    return task.result()
                if self._jobs:
                    jobs, self._jobs = self._jobs, []
                    await perform(jobs)
                    self.loop.advance(now_s())
                elif not self.loop.next_timer():
                    raise ConfigError(
                        "the agent waits for something no runplane effect will answer "
                        "(a thread, a socket or a queue fed from outside the run)"
                    )
        finally:
            if not task.done():  # the run is evicted or failed: leave nothing behind
                for job in self._jobs:
                    job.future.cancel()
                self._jobs = []
                self.loop.cancel_all()
