"""AdmissionReview in, one decision, AdmissionReview out.

* :mod:`.review` — AdmissionReview v1/v1beta1 read strictly (``parse_admission_review``) and answered
* :mod:`.admitting` — ``admit``: the one admission path of the webhook, ``noe mutate`` and users' tests
"""

from noe_core import _moved


def __getattr__(name: str) -> object:
    """The names of the module ``noe_core.admission`` this package replaced, for one release (with a warning)."""
    return _moved.attribute(__name__, name)
