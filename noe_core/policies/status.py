"""What noe says about each policy: its ``Accepted`` condition, written by ``noe controller``'s leader into
``status`` and printed by ``noe policy check`` in the same words.

A valid policy is ``Accepted=True`` (reason ``Valid``); an invalid one is
``Accepted=False`` with the CamelCase reason and the message
:class:`~noe_core.errors.InvalidPolicy` carries (the offending field and value),
and is ignored whole. :func:`status_of` builds the ``status`` the controller
writes; ``lastTransitionTime`` moves only when the condition's status does, as
Kubernetes conditions require.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from noe_core.errors import InvalidPolicy
from noe_core.policies.objects import PlacementPolicy, read_policy

ACCEPTED = "Accepted"
REASON_VALID = "Valid"
MESSAGE_VALID = "noe applies this policy to the pods it matches"


@dataclass(frozen=True)
class Verdict:
    """Whether noe applies a policy, and the condition's reason and message."""

    accepted: bool
    reason: str
    message: str

    @property
    def status(self) -> str:
        return "True" if self.accepted else "False"

    def __str__(self) -> str:
        return ACCEPTED if self.accepted else f"{self.reason}: {self.message}"


VALID = Verdict(True, REASON_VALID, MESSAGE_VALID)


def verdict_of(error: InvalidPolicy | None) -> Verdict:
    return VALID if error is None else Verdict(False, error.reason, str(error))


def judge(doc: object) -> tuple[PlacementPolicy | None, Verdict]:
    """Read a policy document: the policy when valid, and the verdict either way."""
    try:
        return read_policy(doc), VALID
    except InvalidPolicy as exc:
        return None, verdict_of(exc)


def status_of(verdict: Verdict, generation: int, current: Mapping[str, Any] | None, now: str) -> dict[str, Any]:
    """The ``status`` to write: ``observedGeneration`` and the ``Accepted`` condition, other fields kept.

    ``current`` is the object's status as read (``None``: none yet); ``now`` an RFC 3339 time used only
    when the condition's status changes.
    """
    current = current if isinstance(current, Mapping) else {}
    conditions = current.get("conditions")
    previous = (
        next(
            (c for c in conditions if isinstance(c, Mapping) and c.get("type") == ACCEPTED),
            None,
        )
        if isinstance(conditions, list)
        else None
    )
    since = now
    if previous is not None and previous.get("status") == verdict.status and previous.get("lastTransitionTime"):
        since = str(previous["lastTransitionTime"])
    condition = {
        "type": ACCEPTED,
        "status": verdict.status,
        "reason": verdict.reason,
        "message": verdict.message,
        "observedGeneration": generation,
        "lastTransitionTime": since,
    }
    others = (
        [c for c in conditions if isinstance(c, Mapping) and c.get("type") != ACCEPTED]
        if isinstance(conditions, list)
        else []
    )
    return {**current, "observedGeneration": generation, "conditions": [*others, condition]}


def up_to_date(verdict: Verdict, generation: int, current: Mapping[str, Any] | None) -> bool:
    """True when ``current`` already says ``verdict`` about ``generation`` (nothing to write)."""
    if not isinstance(current, Mapping) or current.get("observedGeneration") != generation:
        return False
    conditions = current.get("conditions")
    if not isinstance(conditions, list):
        return False
    return any(
        isinstance(c, Mapping)
        and c.get("type") == ACCEPTED
        and (c.get("status"), c.get("reason"), c.get("message"), c.get("observedGeneration"))
        == (verdict.status, verdict.reason, verdict.message, generation)
        for c in conditions
    )
