"""Leader election on a ``coordination.k8s.io/v1`` Lease, the way client-go's leaderelection does it.

Every candidate tries to acquire or renew the Lease every ``retry_period``:
it creates the Lease when there is none, takes it over when the holder is
empty (released) or has not renewed it for ``lease_duration`` as measured on
the candidate's *own* clock since it last saw the record change (so clock skew
between nodes does not matter), and otherwise leaves it alone. Writes carry the
Lease's ``resourceVersion``, so two candidates racing for it cannot both win: the
loser gets a 409. A leader that cannot renew within ``renew_deadline`` (shorter
than ``lease_duration``) stops acting before anyone else may take over. On
shutdown the leader releases the Lease (empty holder), so a successor takes
over at its next try rather than after the lease duration.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from noe_web.kube.client import KubeClient
from noe_web.kube.errors import KubeError, NotFound

log = logging.getLogger("noe.controller.leader")

JITTER = 1.2
"""client-go's JitterFactor: the wait between tries is retry_period times [1, 1.2)."""


@dataclass(frozen=True)
class LeaseSettings:
    namespace: str
    name: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


def identity() -> str:
    """``hostname_uuid``: unique per process, readable in ``kubectl get lease -o yaml``."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def _micro_time(when: float) -> str:
    return dt.datetime.fromtimestamp(when, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Runs on its own thread; :meth:`is_leader` is what every write checks first."""

    def __init__(
        self,
        kube: KubeClient,
        settings: LeaseSettings,
        *,
        holder: str | None = None,
        on_started: Callable[[], None] = lambda: None,
        on_stopped: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.holder = holder or identity()
        self._on_started, self._on_stopped = on_started, on_stopped
        self._clock = clock
        self._leader = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._observed: dict[str, Any] | None = None  # the spec last seen
        self._observed_at = 0.0
        self._lease: dict[str, Any] | None = None  # the object last read or written
        self.transitions = 0

    @property
    def path(self) -> str:
        s = self.settings
        return f"/apis/coordination.k8s.io/v1/namespaces/{quote(s.namespace, safe='')}/leases"

    def is_leader(self) -> bool:
        return self._leader.is_set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="noe-leader", daemon=True)
        self._thread.start()

    def stop(self, *, release: bool = True) -> None:
        """Stop trying; give the Lease up when holding it (``release``) so a successor need not wait."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.settings.retry_period * JITTER + 5)
        if self._leader.is_set():
            self._set_leader(False)
            if release:
                self._release()

    # --- the loop --------------------------------------------------------------------------------
    def _sleep(self) -> bool:
        """Wait one jittered retry period; ``False`` when asked to stop."""
        return not self._stop.wait(self.settings.retry_period * random.uniform(1.0, JITTER))  # noqa: S311

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._try():
                self._set_leader(True)
                self._renew_loop()
            elif not self._sleep():
                return

    def _renew_loop(self) -> None:
        s = self.settings
        while self._sleep():
            deadline = self._clock() + s.renew_deadline
            while not self._try():
                if self._clock() >= deadline or self._stop.is_set():
                    if not self._stop.is_set():
                        log.warning(
                            "leader lease %s/%s not renewed within %gs: stopping to act",
                            s.namespace,
                            s.name,
                            s.renew_deadline,
                        )
                        self._set_leader(False)
                    return
                self._stop.wait(s.retry_period / 4)

    def _set_leader(self, value: bool) -> None:
        if value == self._leader.is_set():
            return
        if value:
            self._leader.set()
            log.info("became leader", extra={"fields": {"lease": self.settings.name, "holder": self.holder}})
            self._on_started()
        else:
            self._leader.clear()
            log.info("stopped leading", extra={"fields": {"lease": self.settings.name, "holder": self.holder}})
            self._on_stopped()

    # --- one try ---------------------------------------------------------------------------------
    def _spec(self, now_wall: float, *, acquire_time: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": max(1, round(self.settings.lease_duration)),
            "acquireTime": acquire_time,
            "renewTime": _micro_time(now_wall),
            "leaseTransitions": transitions,
        }

    def _try(self) -> bool:
        """client-go's tryAcquireOrRenew: ``True`` when this candidate holds the Lease afterwards."""
        s = self.settings
        now, wall = self._clock(), time.time()
        timeout = max(0.5, min(s.renew_deadline, s.retry_period * 2))
        try:
            lease = self.kube.call("GET", f"{self.path}/{quote(s.name, safe='')}", timeout=timeout)
        except NotFound:
            first = self._spec(wall, acquire_time=_micro_time(wall), transitions=0)
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": s.name, "namespace": s.namespace},
                "spec": first,
            }
            try:
                self._lease = self.kube.call("POST", self.path, body=body, timeout=timeout)
            except KubeError as exc:
                log.debug("creating the lease failed: %s", exc)
                return False
            self._observed, self._observed_at = first, now
            return True
        except KubeError as exc:
            log.debug("reading the lease failed: %s", exc)
            return False
        spec = lease.get("spec") if isinstance(lease.get("spec"), dict) else {}
        assert isinstance(spec, dict)
        if spec != self._observed:
            self._observed, self._observed_at = spec, now
        holder = str(spec.get("holderIdentity") or "")
        mine = holder == self.holder
        if holder and not mine and self._observed_at + s.lease_duration > now:
            return False  # held by someone else, and not expired as far as we have seen
        transitions = int(spec.get("leaseTransitions") or 0)
        new_spec = self._spec(
            wall,
            acquire_time=str(spec.get("acquireTime")) if mine else _micro_time(wall),
            transitions=transitions if mine else transitions + 1,
        )
        body = dict(lease)
        body["spec"] = new_spec
        try:
            self._lease = self.kube.call("PUT", f"{self.path}/{quote(s.name, safe='')}", body=body, timeout=timeout)
        except KubeError as exc:  # a 409 means someone else wrote it first
            log.debug("updating the lease failed: %s", exc)
            return False
        if not mine:
            self.transitions += 1
        self._observed, self._observed_at = new_spec, now
        return True

    def _release(self) -> None:
        lease = self._lease
        if not lease:
            return
        wall = time.time()
        body = dict(lease)
        body["spec"] = {
            **(lease.get("spec") or {}),
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "renewTime": _micro_time(wall),
            "acquireTime": _micro_time(wall),
        }
        try:
            self.kube.call("PUT", f"{self.path}/{quote(self.settings.name, safe='')}", body=body, timeout=2.0)
            log.info("released the leader lease", extra={"fields": {"lease": self.settings.name}})
        except KubeError as exc:
            log.warning("could not release the leader lease (%s); a successor waits for it to expire", exc)
