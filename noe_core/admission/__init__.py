"""AdmissionReview in, one decision, AdmissionReview out."""

from noe_core import _moved


def __getattr__(name: str) -> object:
    """The names of the module ``noe_core.admission`` this package replaced, for one release (with a warning)."""
    return _moved.attribute(__name__, name)
