"""Live updates for one batch: a websocket per open page, joined to the batch's group.

The page says what it shows in the query string (``watch=grid``, ``watch=run&run=<id>`` or
``watch=trial&trial=<id>``); when the runner publishes a change the consumer re-renders the
fragments of that page on the server and sends them as HTML that the htmx websocket extension
swaps in by element id. A connection from anyone who may not see the batch is refused before
it is accepted, exactly as a page would answer 404.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.db.models import Q
from django.template.loader import render_to_string

from dashboard import artifact_files, fragments
from dashboard.access import batches_for, runs_for, trials_for
from dashboard.mock_timeline import live_mock_calls
from dashboard.query_numbers import NumberOutOfRange, whole_number
from evals_app.models import Batch, Run, Trial
from evals_app.pass_rates import changed_run_ids
from runner.jobs.publishing import LAYER_UNREACHABLE, batch_group, outage

# How long a socket waits before asking an unreachable channel layer again.
RETRY_SECONDS = 1.0


@dataclass
class Watch:
    """What the connected page shows, and how far its transcript has got."""

    kind: str  # grid | run | trial
    run_id: int | None = None
    trial_id: int | None = None
    # When the page was drawn: changes after it are sent on connect.
    since: datetime | None = None
    # The trial page's last event and turn shown.
    after: int = -1
    turns_shown: int = -1
    # The last mock call shown (its id): later ones are appended as they are stored.
    calls: int = -1

    @classmethod
    def from_query(cls, query_string: bytes) -> Watch | None:
        params = {k: v[-1] for k, v in parse_qs(query_string.decode("latin-1")).items()}
        try:
            watch = cls(kind=params.get("watch", "grid"))
            if "since" in params:
                since = whole_number("since", params["since"])
                watch.since = datetime.fromtimestamp(since / 1000, tz=UTC)
            if watch.kind == "run":
                watch.run_id = whole_number("run", params["run"])
            elif watch.kind == "trial":
                watch.trial_id = whole_number("trial", params["trial"])
                watch.after = whole_number("after", params.get("after", "-1"))
                watch.turns_shown = whole_number("turn", params.get("turn", "-1"))
                watch.calls = whole_number("calls", params.get("calls", "-1"))
            elif watch.kind != "grid":
                return None
        except (KeyError, ValueError, OverflowError, OSError, NumberOutOfRange):
            return None
        return watch


class BatchConsumer(AsyncWebsocketConsumer):
    batch: Batch
    watch: Watch
    run: Run | None = None
    trial: Trial | None = None
    # Whether the socket is in its batch's group; False while the layer is unreachable (a
    # restarted Redis has also forgotten the group, so the socket joins again when it answers).
    joined: bool = False

    async def connect(self) -> None:
        watch = Watch.from_query(self.scope.get("query_string", b""))
        allowed = watch is not None and await database_sync_to_async(self._load)(watch)
        if not allowed:
            await self.close()
            return
        await self._join()
        await self.accept()
        html = await database_sync_to_async(self._catch_up)()
        if html:
            await self.send(text_data=html)

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "batch") and self.joined:
            try:
                await self.channel_layer.group_discard(
                    batch_group(self.batch.pk), self.channel_name
                )
            except LAYER_UNREACHABLE as error:
                outage.failed(self.channel_layer, error)

    async def _join(self) -> None:
        group = batch_group(self.batch.pk)
        try:
            try:
                await self.channel_layer.group_add(group, self.channel_name)
            except LAYER_UNREACHABLE:  # a dead pooled connection after a restart; try a fresh one
                await self.channel_layer.group_add(group, self.channel_name)
        except LAYER_UNREACHABLE as error:
            outage.failed(self.channel_layer, error)
            self.joined = False
            return
        outage.worked(self.channel_layer)
        self.joined = True

    # AsyncConsumer.__call__ sets ``channel_receive`` to the layer's receive and reads it in
    # the same breath; the property hands back a receive that survives an outage instead of
    # ending the socket with a traceback.
    @property
    def channel_receive(self) -> Callable[[], Awaitable[dict]]:
        return self._receive_surviving_outages

    @channel_receive.setter
    def channel_receive(self, receive: Callable[[], Awaitable[dict]]) -> None:
        self._layer_receive = receive

    async def _receive_surviving_outages(self) -> dict:
        while True:
            if hasattr(self, "batch") and not self.joined:
                await self._join()
                if not self.joined:
                    await asyncio.sleep(RETRY_SECONDS)
                    continue
            try:
                return await self._layer_receive()
            except LAYER_UNREACHABLE as error:
                outage.failed(self.channel_layer, error)
                self.joined = False
                await asyncio.sleep(RETRY_SECONDS)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Pages only listen; anything they send is ignored."""

    # --- messages from runner.jobs.publishing, one handler per type ------------------------------

    async def trial_changed(self, message: dict) -> None:
        await self._send(await database_sync_to_async(self._trial_changed)(message))

    async def trial_event(self, message: dict) -> None:
        if self.watch.kind == "trial" and message.get("trial_id") == self.watch.trial_id:
            await self._send(await database_sync_to_async(self._transcript_tail)())

    async def batch_changed(self, message: dict) -> None:
        if self.watch.kind == "grid":
            await self._send(await database_sync_to_async(self._batch_status)())

    # --- rendering, in a database thread ----------------------------------------------------

    def _load(self, watch: Watch) -> bool:
        """Scope everything through the access helpers: another organization's batch, or a
        run or trial outside this batch, is refused."""
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            return False
        batch_id = self.scope["url_route"]["kwargs"]["batch_id"]
        batch = batches_for(user).filter(pk=batch_id).first()
        if batch is None:
            return False
        if watch.kind == "run" and watch.run_id is not None:
            self.run = runs_for(user).filter(pk=watch.run_id, batch=batch).first()
            if self.run is None:
                return False
        if watch.kind == "trial" and watch.trial_id is not None:
            self.trial = (
                trials_for(user)
                .select_related("run__case_version", "run__batch")
                .filter(pk=watch.trial_id, run__batch=batch)
                .first()
            )
            if self.trial is None:
                return False
        self.batch, self.watch = batch, watch
        return True

    def _catch_up(self) -> str:
        """What changed between drawing the page and opening this socket."""
        if self.watch.kind == "grid":
            if self.watch.since is None:
                return fragments.batch_status(self.batch)
            return fragments.grid_catch_up(
                self.batch, changed_run_ids(self.batch, self.watch.since)
            )
        if self.watch.kind == "run" and self.run is not None:
            trials = self.run.trials.all()
            if self.watch.since is not None:
                since = self.watch.since
                trials = trials.filter(Q(started_at__gte=since) | Q(finished_at__gte=since))
            return fragments.run_trial_updates(self.run, trials.values_list("pk", flat=True))
        if self.watch.kind == "trial" and self.trial is not None:
            return (
                fragments.trial_state_update(self.trial)
                + self._artifacts_panel()
                + self._transcript_tail()
            )
        return ""

    def _trial_changed(self, message: dict) -> str:
        if self.watch.kind == "grid":
            self.batch.refresh_from_db(fields=["status"])
            return fragments.grid_cell_update(self.batch, message["run_id"])
        if (
            self.watch.kind == "run"
            and self.run is not None
            and message.get("run_id") == self.run.pk
        ):
            return fragments.run_trial_updates(self.run, [message["trial_id"]])
        if (
            self.watch.kind == "trial"
            and self.trial is not None
            and message.get("trial_id") == self.trial.pk
        ):
            # The last events are flushed before a trial is announced finished; its files
            # (workspace.diff, verdicts, outputs) are written before that too.
            return (
                fragments.trial_state_update(self.trial)
                + self._artifacts_panel()
                + self._transcript_tail()
            )
        return ""

    def _artifacts_panel(self) -> str:
        """The trial page's Artifacts panel and its tab's count (lists the folder)."""
        assert self.trial is not None
        folder = artifact_files.trial_folder(self.trial)
        files, count = artifact_files.list_files(folder) if folder else ([], 0)
        return render_to_string(
            "dashboard/trial.html#trial_artifacts",
            {"trial": self.trial, "files": files, "file_count": count, "oob": True},
        )

    def _transcript_tail(self) -> str:
        assert self.trial is not None
        shown = self.watch.after
        tail = fragments.transcript_tail(
            self.trial, after=shown, turns_shown=self.watch.turns_shown
        )
        self.watch.after, self.watch.turns_shown = tail.last_seq, tail.turns_shown
        # The mock calls stored since, placed before or after the new events by time.
        calls = live_mock_calls(self.trial, after_id=self.watch.calls, events_after=shown)
        self.watch.calls = calls.last_id
        return calls.before + tail.html + calls.after

    def _batch_status(self) -> str:
        self.batch.refresh_from_db()
        return fragments.batch_status(self.batch)

    async def _send(self, html: str) -> None:
        if html:
            await self.send(text_data=html)
