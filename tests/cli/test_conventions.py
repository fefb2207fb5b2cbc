"""CLI conventions of the ``noe`` command: ``-o json|yaml`` wherever data is printed, ``-ojson`` accepted,
Go's flag syntax only for options that exist, and a subcommand's errors in its own name.

Each case runs the real console entry point in a subprocess and reads what a
user sees: exit status, standard output, one line on standard error.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.support.images import PushedImage
from tests.support.paths import ROOT
from tests.support.registry_server import RegistryServer

OFFLINE = ("-f", "examples/pod.yaml", "--platforms", "examples/platforms.json")


def noe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "noe_web", *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("spelling", [["-ojson"], ["-o", "json"], ["--output=json"], ["-output=json"]])
def test_mutate_and_report_take_every_spelling_of_the_output_flag(spelling: list[str]) -> None:
    mutated = noe("mutate", *OFFLINE, *spelling)
    assert mutated.returncode == 0, mutated.stderr
    assert json.loads(mutated.stdout)["kind"] == "Pod"
    report = noe("report", *OFFLINE, *spelling)
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["totals"]["pods"] == 1


def test_report_prints_yaml_as_the_same_document_as_json() -> None:
    as_json = noe("report", *OFFLINE, "-ojson")
    as_yaml = noe("report", *OFFLINE, "-oyaml")
    assert as_yaml.returncode == 0, as_yaml.stderr
    assert yaml.safe_load(as_yaml.stdout) == json.loads(as_json.stdout)


@pytest.mark.registry
def test_inspect_prints_json_and_yaml_and_keeps_json_as_an_alias(
    registry: RegistryServer, pushed_images: dict[str, PushedImage]
) -> None:
    image = pushed_images["docker-manifest-list"]
    common = (image.reference, "--insecure-registries", "127.0.0.1:*")
    outputs = {}
    for name, args in {"alias": ["--json"], "json": ["-ojson"], "yaml": ["-o", "yaml"], "text": []}.items():
        proc = noe("inspect", *common, *args)
        assert proc.returncode == 0, proc.stderr
        outputs[name] = proc.stdout
    doc = json.loads(outputs["json"])
    assert doc["digest"] == image.digest
    assert json.loads(outputs["alias"]) == doc == yaml.safe_load(outputs["yaml"])
    assert outputs["text"].startswith("Reference:")
    both = noe("inspect", *common, "--json", "-o", "yaml")
    assert (
        both.returncode == 2 and both.stderr.startswith("noe inspect: argument ") and len(both.stderr.splitlines()) == 1
    )


@pytest.mark.parametrize("command", ["mutate", "inspect", "serve", "certs", "report", "completion"])
def test_a_subcommand_reports_its_own_unknown_arguments(command: str) -> None:
    proc = noe(command, "--no-such-flag", "--", "x")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"noe {command}: "), proc.stderr
    assert "usage: noe [" not in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr


def test_unknown_arguments_are_named_by_the_subcommand() -> None:
    proc = noe("mutate", *OFFLINE, "--bogus")
    assert (proc.returncode, proc.stderr) == (2, "noe mutate: unrecognized arguments: --bogus\n")
    single = noe("mutate", *OFFLINE, "-bogus")  # not a known option: left as typed, not turned into --bogus
    assert single.returncode == 2 and "-bogus" in single.stderr and "--bogus" not in single.stderr


@pytest.mark.parametrize("command", ["mutate", "inspect", "serve", "certs", "report", "completion"])
def test_help_shows_the_subcommands_own_usage(command: str) -> None:
    proc = noe(command, "-h")
    assert proc.returncode == 0
    assert proc.stdout.startswith(f"usage: noe {command} "), proc.stdout[:200]


def test_go_style_flags_and_go_booleans_still_work() -> None:
    proc = noe(
        "mutate",
        "-f",
        "examples/pod.yaml",
        "-platforms=examples/platforms.json",
        "-patch=true",
        "-preferred-arch",
        "arm64",
    )
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(proc.stdout)[0]["path"] == "/spec/affinity"  # the patch, in the default YAML
    off = noe("mutate", *OFFLINE, "--patch=false")  # Go's false: the switch's default, the object is printed
    assert off.returncode == 0 and yaml.safe_load(off.stdout)["kind"] == "Pod"
    bad = noe("mutate", *OFFLINE, "--patch=maybe")
    assert bad.returncode == 2 and bad.stderr.startswith("noe mutate: argument --patch")
