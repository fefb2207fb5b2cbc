"""The module paths noe_core had before its folders (issue #29), kept for one release with a warning.

:data:`MOVED` maps each old path to the modules its names live in now: the
first is its new home, any other holds a name that moved further (a pure helper
moved down to the folder that needs it). ``noe_core``'s ``__init__`` installs
:class:`MovedFinder`, so an old import still works and warns once, naming the
new path::

    from noe_core.policy import place   # DeprecationWarning: noe_core.policy is deprecated;
                                        # import noe_core.placement.rules

An old path of one module *is* that module (in ``sys.modules`` and as its
parent's attribute); an old path whose names now live in several modules is a
module that looks each name up in them, so either way the names are the very
same objects. Two old modules became packages of the same name
(``noe_core.admission``, ``noe_core.report``): their old names are attributes of
the package that warn on first use (:data:`PACKAGED`, :func:`attribute`).

This module imports nothing of noe_core: the new modules load when an old path
is used, never before.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Sequence

MOVED: dict[str, tuple[str, ...]] = {
    "noe_core.reference": ("noe_core.name.reference",),
    "noe_core.hostmatch": ("noe_core.name.hostmatch",),
    "noe_core.platform": ("noe_core.image.platform",),
    "noe_core.manifest": ("noe_core.image.manifest",),
    "noe_core.lookup": ("noe_core.image.image_platforms",),
    "noe_core.platforms_file": ("noe_core.image.declared",),
    "noe_core.learned_platforms": ("noe_core.image.learned",),
    "noe_core.node_platform": ("noe_core.image.node_platform",),
    "noe_core.platform_needs": ("noe_core.image.offer", "noe_core.placement.needs", "noe_core.image.node_platform"),
    "noe_core.object_meta": ("noe_core.k8s.object_meta",),
    "noe_core.workload": ("noe_core.k8s.workload",),
    "noe_core.owners": ("noe_core.k8s.owners",),
    "noe_core.label_selector": ("noe_core.k8s.label_selector",),
    "noe_core.quantity": ("noe_core.k8s.quantity",),
    "noe_core.resources": ("noe_core.k8s.resources",),
    "noe_core.settings": ("noe_core.policies.settings",),
    "noe_core.policy": ("noe_core.placement.rules", "noe_core.placement.pipeline"),
    "noe_core.placement_session": ("noe_core.placement.session",),
    "noe_core.scheduling": ("noe_core.placement.scheduling",),
    "noe_core.image_reading": ("noe_core.placement.image_reading",),
    "noe_core.ephemeral": ("noe_core.placement.ephemeral",),
    "noe_core.gate": ("noe_core.placement.gate", "noe_core.policies.settings"),
    "noe_core.compatibility": ("noe_core.placement.compatibility",),
    "noe_core.messages": ("noe_core.placement.messages", "noe_core.util.printable"),
    "noe_core.patch": ("noe_core.util.json_patch",),
    "noe_core.pricing": ("noe_core.report.pricing",),
    "noe_core.plan": ("noe_core.report.plan",),
    "noe_core.planner": ("noe_core.report.planner",),
    "noe_core.policy_report": ("noe_core.report.policy_reports",),
    "noe_core.versions": ("noe_core.report.version_tags",),
    "noe_core.registry.layered_cache": ("noe_core.registry.cache.layers",),
    "noe_core.registry.cache_rows": ("noe_core.registry.cache.rows",),
    "noe_core.registry.cache_store": ("noe_core.registry.cache.sqlite",),
    "noe_core.registry.redis_cache": ("noe_core.registry.cache.redis",),
    "noe_core.cache_url": ("noe_core.registry.cache.url",),
    "noe_core.registry_settings": ("noe_core.registry.settings", "noe_core.util.duration"),
    "noe_core.observer": ("noe_core.registry.observer",),
    "noe_core.tracer": ("noe_core.registry.tracer",),
    "noe_core.deadline": ("noe_core.util.deadline",),
    "noe_core.fields": ("noe_core.util.fields",),
    "noe_core.safe_load": ("noe_core.util.safe_load",),
    "noe_core.printable": ("noe_core.util.printable",),
    "noe_core.comma_list": ("noe_core.util.comma_list",),
    "noe_core.text_file": ("noe_core.util.text_file",),
    "noe_core.watched_file": ("noe_core.util.watched_file",),
    "noe_core.cache": ("noe_core.util.lru",),
    "noe_core.version": ("noe_core.util.installed_version",),
}
"""Old module path → the modules holding its names now, its new home first."""

PACKAGED: dict[str, dict[str, str]] = {
    "noe_core.admission": {
        **dict.fromkeys(
            (
                "API_VERSIONS",
                "OPERATIONS",
                "AdmissionRequest",
                "parse_admission_review",
                "review_response",
                "encode_patch",
            ),
            "noe_core.admission.review",
        ),
        **dict.fromkeys(("Label", "Admission", "admit"), "noe_core.admission.admitting"),
    },
    "noe_core.report": {
        **dict.fromkeys(("FINISHED_PHASES", "PodEntry", "read_pod"), "noe_core.report.pods"),
        **dict.fromkeys(
            (
                "DEFAULT_ARCHITECTURES",
                "Status",
                "Figures",
                "ImageSupport",
                "Need",
                "WorkloadReport",
                "Totals",
                "ImageReport",
                "Report",
                "report_scope",
                "image_support",
                "build_report",
            ),
            "noe_core.report.build",
        ),
    },
}
"""Old module that is a package now → each of its old names → the module defining it now."""


def _stacklevel() -> int:
    """The ``stacklevel`` of the frame that imported or named the old path.

    Frames of this module, of module ``__getattr__`` hooks and of
    :func:`importlib.import_module` are counted and skipped; the import system's
    bootstrap frames are skipped without counting, as :func:`warnings.warn` skips
    them itself.
    """
    level, frame = 1, sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith("<frozen importlib"):
            frame = frame.f_back  # type: ignore[assignment]
            continue
        hook = code.co_filename == __file__ or code.co_name == "__getattr__"
        if not hook and frame.f_globals.get("__name__") != "importlib":
            break
        level, frame = level + 1, frame.f_back  # type: ignore[assignment]
    return level


def _warn(old: str, new: Sequence[str]) -> None:
    warnings.warn(f"{old} is deprecated; import {' or '.join(new)}", DeprecationWarning, stacklevel=_stacklevel())


def _split(name: str, targets: Sequence[str]) -> types.ModuleType:
    """A module whose names are looked up in ``targets``, in order, and kept once found."""
    module = types.ModuleType(name, f"Deprecated: the names of {name} now live in {', '.join(targets)}.")

    def __getattr__(attribute: str) -> object:
        for target in targets:
            value = getattr(importlib.import_module(target), attribute, _MISSING)
            if value is not _MISSING:
                setattr(module, attribute, value)
                return value
        raise AttributeError(f"module {name!r} has no attribute {attribute!r}")

    def __dir__() -> list[str]:
        return sorted({n for t in targets for n in dir(importlib.import_module(t)) if not n.startswith("_")})

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    module.__dir__ = __dir__  # type: ignore[method-assign]
    return module


_MISSING = object()


class _MovedLoader(importlib.abc.Loader):
    """Loads an old path as its new module (or as a :func:`_split` module), warning once."""

    def __init__(self, targets: tuple[str, ...]) -> None:
        self.targets = targets
        self.real_spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        _warn(spec.name, self.targets[:1] if len(self.targets) == 1 else self.targets)
        if len(self.targets) > 1:
            return _split(spec.name, self.targets)
        module = importlib.import_module(self.targets[0])
        self.real_spec = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        if self.real_spec is not None:
            module.__spec__ = self.real_spec  # the import system set the old path's spec on the new module


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the old module paths of :data:`MOVED` (and nothing else)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        targets = MOVED.get(fullname)
        if targets is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedLoader(targets))


def install() -> None:
    """Put :class:`MovedFinder` first on ``sys.meta_path`` (once): it answers only for old paths."""
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())


def attribute(package: str, name: str) -> object:
    """An old name of the module that ``package`` replaced (its PEP 562 ``__getattr__``), warning once."""
    module = PACKAGED.get(package, {}).get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    _warn(f"{package}.{name}", (module,))
    value = getattr(importlib.import_module(module), name)
    setattr(sys.modules[package], name, value)
    return value
