"""Placement policies' status, written by the leader: ``observedGeneration`` and the ``Accepted`` condition.

Every policy the controller's :class:`~noe_web.kube.policy_watch.PolicyWatch`
sees is judged as the webhook judges it (:func:`noe_core.policies.status.judge`);
while this process leads, a policy whose status does not yet say what noe makes
of its current generation gets it written (a merge patch of the status
subresource: ``Accepted=True`` reason ``Valid``, or ``Accepted=False`` with the
CamelCase reason and a message naming the field and value, the words
``noe policy check`` prints). Nothing is written when the status already says
it, so the controller's own write, coming back through the watch, costs nothing; and a pass that runs
before that write has come back (another policy changed meanwhile) does not write it a second time.

The ``noe_controller_placement_policies{state}`` gauge counts the policies by
state (``accepted``, ``invalid``) in every replica.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from noe_core.policies.objects import PLURALS, PolicyRef
from noe_core.policies.status import status_of, up_to_date
from noe_web.controller.actions import Actions, NotLeader
from noe_web.controller.background import Background
from noe_web.controller.metrics import ControllerMetrics
from noe_web.kube.errors import KubeError, NotFound
from noe_web.kube.policy_watch import Judged, PolicyWatch

log = logging.getLogger("noe.controller.policies")

RESYNC = 60.0
RETRY = 5.0


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class PolicyStatusWriter:
    """Keeps every placement policy's status current while this process leads."""

    def __init__(
        self,
        watch: PolicyWatch,
        actions: Actions,
        metrics: ControllerMetrics,
        *,
        resync: float = RESYNC,
        clock: Callable[[], str] = now_rfc3339,
    ) -> None:
        self.watch, self.actions, self.metrics = watch, actions, metrics
        self.resync, self._clock = resync, clock
        self._said_dry: set[tuple[str, int, str]] = set()
        self._sent: dict[PolicyRef, Judged] = {}
        """The policy as seen when its status was last written: until the watch brings a newer one (this
        write coming back, or anyone's change), a pass that sees the same is not a reason to write again."""
        self.writes = 0
        self._loop = Background(
            "noe-policy-status",
            self._pass,
            lambda: self.resync,
            log=log,
            failed="writing placement policy status failed",
        )

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    def changed(self) -> None:
        """A policy changed (or this process started leading): look at every status again."""
        self._loop.wake()

    def _pass(self) -> None:
        if self.watch.ready and not self.sync():
            self._loop.pause(RETRY)
            self._loop.wake()

    def sync(self) -> bool:
        """Count the policies by state and, while leading, write every status that is not current.

        ``False`` when a write failed and should be tried again.
        """
        judged = self.watch.judged()
        accepted = sum(1 for j in judged if j.verdict.accepted)
        self.metrics.placement_policies.labels("accepted").set(accepted)
        self.metrics.placement_policies.labels("invalid").set(len(judged) - accepted)
        if not self.actions.is_leader():
            return True
        complete = True
        self._sent = {item.ref: item for item in judged if self._sent.get(item.ref) is item}
        for item in judged:
            ref, verdict = item.ref, item.verdict
            if up_to_date(verdict, ref.generation, item.status) or self._sent.get(ref) is item:
                continue
            said = (str(ref), ref.generation, verdict.reason)
            if self.actions.dry_run and said in self._said_dry:
                continue
            status = status_of(verdict, ref.generation, item.status, self._clock())
            # only the fields this writer owns: a merge patch leaves status.rollout (noe_web.controller.rollouts)
            # as it is, and a stale copy of it read here must not overwrite a newer one
            owned = {key: status[key] for key in ("observedGeneration", "conditions")}
            try:
                if self.actions.policy_status(PLURALS[ref.kind], ref.namespace, ref.name, owned):
                    self.writes += 1
                    self._sent[ref] = item
                else:
                    self._said_dry.add(said)
            except NotFound:
                continue  # deleted meanwhile
            except NotLeader:
                return True
            except KubeError as exc:
                log.warning("status of placement policy %s not written (%s); trying again", ref, exc)
                complete = False
        return complete
