"""publish --debug against a hostile GitHub server that echoes the token back in its error
messages: the traceback --debug prints passes through the redaction, as every message does."""

from __future__ import annotations

from pathlib import Path

import pytest

from github_server import GitHubServer
from ninfer_kits.matrix import GitHubTarget
from ninfer_kits.net import remote
from test_publish_support import CANARY, cli, compile_program, make_kit, matrix_file


def test_debug_tracebacks_are_redacted(tmp_path: Path) -> None:
    kit = make_kit(tmp_path / "dist", compile_program(tmp_path))
    with GitHubServer() as server:
        server.add_repo("o/r")
        server.add_token(CANARY)
        server.faults.status(502, path="/repos/o/r", times=1000,
                             message="upstream said: {authorization} "
                                     "(via https://robot:hunter2secret@proxy.example/)")
        matrix = matrix_file(tmp_path, github=GitHubTarget(repository="o/r",
                                                            api=server.base_url))
        done = cli("--debug", "publish", str(kit.path), "--matrix", str(matrix), "--to",
                   "github", "--cache-dir", str(tmp_path / "cache"), "--ledger-dir",
                   str(tmp_path / "releases"), env={"GITHUB_TOKEN": CANARY})
    assert done.returncode == 3, done.stderr
    assert "Traceback" in done.stderr and "upstream said: token ***" in done.stderr
    assert CANARY not in done.stdout + done.stderr
    assert "hunter2secret" not in done.stdout + done.stderr


@pytest.mark.parametrize(("text", "shown"), [
    ("https://user:tok3n-abc@github.com/o/r", "https://***@github.com/o/r"),
    ("clone https://tok3n-abcdef@github.com/o/r failed",
     "clone https://***@github.com/o/r failed"),
    ("sftp://user:pass-word@host/x", "sftp://***@host/x"),
    # A user name alone is not a secret where no token passes as one: the message stays useful.
    ("DOCKER_HOST=ssh://builder@127.0.0.1 needs paramiko",
     "DOCKER_HOST=ssh://builder@127.0.0.1 needs paramiko"),
])
def test_url_credentials_are_hidden_and_a_plain_ssh_user_is_kept(text: str, shown: str) -> None:
    assert remote.redact(text) == shown
