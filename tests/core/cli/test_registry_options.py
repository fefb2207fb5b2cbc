"""Registry flags: node credential files are candidates, never a reason not to start."""

from __future__ import annotations

import argparse
import base64
import json
import logging
from pathlib import Path

import pytest

from noe_core.cli.registry_options import add_registry_arguments, node_keychain_from_args
from noe_core.credentials.keychain import ANONYMOUS
from noe_core.name.reference import parse_reference


def parse(*args: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_registry_arguments(parser)
    return parser.parse_args(list(args))


def test_missing_and_directory_candidates_are_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    missing = tmp_path / "absent" / "config.json"
    directory = tmp_path / "config.json"  # what a hostPath of type "" leaves behind for an absent file
    directory.mkdir()
    caplog.set_level(logging.INFO)
    keychain = node_keychain_from_args(
        parse("--docker-config", str(missing), "--docker-config", str(directory), "--containerd-config", str(directory))
    )
    assert keychain is ANONYMOUS
    assert any("not a readable file" in record.getMessage() for record in caplog.records)


def test_a_readable_candidate_among_missing_ones_is_used(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    auth = base64.b64encode(b"robot:s3cret-value").decode()
    config.write_text(json.dumps({"auths": {"registry.corp": {"auth": auth}}}))
    keychain = node_keychain_from_args(
        parse("--docker-config", str(tmp_path / "nope.json"), "--docker-config", str(config))
    )
    credentials = keychain.resolve(parse_reference("registry.corp/team/app:1"))
    assert [c.username for c in credentials] == ["robot"]
    assert not keychain.resolve(parse_reference("other.example/app:1"))
