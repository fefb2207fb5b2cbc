"""noe report's pure part: what could run on each architecture, prices, the plan, PolicyReports."""

from noe_core import _moved


def __getattr__(name: str) -> object:
    """The names of the module ``noe_core.report`` this package replaced, for one release (with a warning)."""
    return _moved.attribute(__name__, name)
