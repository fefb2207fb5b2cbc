"""noe_core's module paths from before its folders still import, warn once naming the new path, same objects."""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import noe_core
from noe_core._moved import MOVED, PACKAGED

ROOT = Path(noe_core.__file__).parent

# Names that left the module they were defined in (a helper moved down a folder): the old path still has them.
MOVED_OUT = [
    ("noe_core.settings", "is_label_key", "noe_core.name.kubernetes"),
    ("noe_core.settings", "is_label_value", "noe_core.name.kubernetes"),
    ("noe_core.settings", "is_dns_subdomain", "noe_core.name.kubernetes"),
    ("noe_core.settings", "is_arch_name", "noe_core.name.kubernetes"),
    ("noe_core.settings", "normalize_arch_name", "noe_core.image.platform"),
    ("noe_core.messages", "shorten", "noe_core.util.printable"),
    ("noe_core.registry_settings", "parse_duration", "noe_core.util.duration"),
    ("noe_core.registry_settings", "parse_go_duration", "noe_core.util.duration"),
    ("noe_core.scheduling", "ARCH_LABEL", "noe_core.image.node_platform"),
    ("noe_core.scheduling", "BETA_ARCH_LABEL", "noe_core.image.node_platform"),
    ("noe_core.platform_needs", "shared", "noe_core.placement.needs"),
    ("noe_core.platform_needs", "NodeTerm", "noe_core.placement.needs"),
    ("noe_core.platform_needs", "node_terms", "noe_core.placement.needs"),
    ("noe_core.platform_needs", "Offer", "noe_core.image.offer"),
    ("noe_core.gate", "OnLookupFailure", "noe_core.policies.settings"),
    ("noe_core.gate", "ON_LOOKUP_FAILURE", "noe_core.policies.settings"),
    ("noe_core.policy", "place", "noe_core.placement.rules"),
]


@pytest.fixture
def fresh() -> Iterator[None]:
    """Forget the old paths imported so far, so each import goes through the finder again."""

    def forget() -> None:
        for old in MOVED:
            sys.modules.pop(old, None)
            parent, _, child = old.rpartition(".")
            vars(importlib.import_module(parent)).pop(child, None)
        for package, names in PACKAGED.items():
            for name in names:
                vars(importlib.import_module(package)).pop(name, None)

    forget()
    yield
    forget()


def _import_warned(old: str) -> tuple[object, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    return module, caught


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_imports_warns_once_and_is_the_new_module(old: str, fresh: None) -> None:
    module, caught = _import_warned(old)
    targets = MOVED[old]
    assert [str(w.message) for w in caught] == [f"{old} is deprecated; import {' or '.join(targets)}"]
    assert caught[0].category is DeprecationWarning and caught[0].filename == __file__
    again, caught = _import_warned(old)
    assert again is module and caught == []
    parent, _, child = old.rpartition(".")
    assert getattr(sys.modules[parent], child) is module
    new = importlib.import_module(targets[0])
    if len(targets) == 1:
        assert module is new and module.__spec__ is new.__spec__ and module.__name__ == targets[0]
    else:  # a name is looked up in each new module in turn
        for target in targets:
            for name, value in vars(importlib.import_module(target)).items():
                if not name.startswith("_") and not any(
                    hasattr(sys.modules[t], name) for t in targets[: targets.index(target)]
                ):
                    assert getattr(module, name) is value, name


@pytest.mark.parametrize(("old", "name", "new"), MOVED_OUT)
def test_names_that_moved_further_are_the_same_objects(old: str, name: str, new: str, fresh: None) -> None:
    with pytest.warns(DeprecationWarning, match=f"^{old} is deprecated"):
        module = importlib.import_module(old)
    assert getattr(module, name) is getattr(importlib.import_module(new), name)


@pytest.mark.parametrize(("package", "name"), [(p, n) for p, names in PACKAGED.items() for n in sorted(names)])
def test_a_module_that_became_a_package_keeps_its_names(package: str, name: str, fresh: None) -> None:
    home = PACKAGED[package][name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(importlib.import_module(package), name)
        assert getattr(importlib.import_module(package), name) is value  # warned once
    assert [str(w.message) for w in caught] == [f"{package}.{name} is deprecated; import {home}"]
    assert caught[0].filename == __file__
    assert value is getattr(importlib.import_module(home), name)


def test_a_from_import_of_an_old_path_points_the_warning_at_the_caller(fresh: None) -> None:
    with pytest.warns(DeprecationWarning, match="import noe_core.placement.rules") as caught:
        from noe_core.policy import place  # type: ignore[import-not-found]
    assert caught[0].filename == __file__
    from noe_core.placement.rules import place as new

    assert place is new
    with pytest.warns(DeprecationWarning, match="noe_core.admission.admitting") as caught:
        from noe_core.admission import admit
    assert caught[0].filename == __file__ and admit is noe_core.admit


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    import noe_core.admission

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = noe_core.admission.nope
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("noe_core.nope")


def test_every_old_path_is_gone_from_the_tree_and_every_new_one_exists() -> None:
    for old, targets in MOVED.items():
        path = ROOT.parent / (old.replace(".", "/") + ".py")
        assert not path.exists(), f"{path} is back: drop it from noe_core._moved.MOVED"
        for target in targets:
            importlib.import_module(target)
