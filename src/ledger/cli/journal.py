"""The journal's integrity from the command line: ``verify`` the chain, ``keys generate`` a
signing key, sign a ``checkpoint``, ``prove`` a bet's commits and ``verify-proof`` one offline,
``prove-consistency`` between two checkpoints and ``verify-consistency`` it offline
(docs/integrity.md)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from ..integrity.checkpoints import (
    DASH,
    NoteError,
    generate_key,
    open_checkpoint,
)
from ..integrity.proofs import bet_rows, check_consistency, check_proof
from ..service.journal import (
    ORIGIN,
    consistency_document,
    proof_document,
    publish_checkpoint,
    verify_journal,
)
from .common import db_option, emit, fail
from .opening import opened

__all__ = [
    "checkpoint",
    "keys",
    "prove",
    "prove_consistency",
    "verify",
    "verify_consistency",
    "verify_proof",
]


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as error:
        fail(ValueError(f"cannot read {path}: {error.strerror}"))


def _last_note(text: str) -> str:
    """The last signed note of a file of notes appended one after another."""
    lines = text.splitlines(keepends=True)
    start = 0
    for index in range(1, len(lines)):
        if lines[index - 1].startswith(DASH) and not lines[index].startswith(DASH):
            start = index
    return "".join(lines[start:])


@click.command()
@db_option
@click.option("--checkpoint", "checkpoint_file", help="A saved signed checkpoint to extend.")
@click.option("--public-key", "public_key", help="The checkpoint signer's public key file.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def verify(db: str, checkpoint_file: str | None, public_key: str | None, as_json: bool) -> None:
    """Recompute the journal's chain, tree and balances; exit 1 naming the first difference."""
    checkpoint = None
    if (checkpoint_file is None) != (public_key is None):
        fail(ValueError("--checkpoint and --public-key go together"))
    if checkpoint_file is not None and public_key is not None:
        try:
            checkpoint = open_checkpoint(
                _last_note(_read(checkpoint_file)), _read(public_key).strip()
            )
        except NoteError as error:
            _verdict(False, f"the checkpoint does not verify: {error}", None, as_json)
    started = time.monotonic()
    with opened(db, create=False) as book:
        report = verify_journal(book.store, checkpoint)
    seconds = time.monotonic() - started
    problem = report.problem or "; ".join(report.balance_problems) or None
    size = f"{report.size} commits, root {report.root.hex()}, {seconds:.1f} s"
    extended = "" if checkpoint is None else f", extends the checkpoint of {checkpoint.size}"
    _verdict(report.ok, problem or f"intact: {size}{extended}", report.seq, as_json, size=size)


def _verdict(ok: bool, text: str, seq: int | None, as_json: bool, **extra: Any) -> None:
    if as_json:
        emit({"ok": ok, "commit": seq, "message": text, **extra})
    else:
        click.echo(("" if ok else "FAILED: ") + text)
    sys.exit(0 if ok else 1)


@click.group()
def keys() -> None:
    """The checkpoint signing key."""


@keys.command("generate")
@click.option("--out", "out", required=True, help="The directory to write the key files in.")
@click.option("--name", default=ORIGIN, show_default=True, help="The key's name.")
def generate(out: str, name: str) -> None:
    """Write a new Ed25519 key: DIR/signing.key (mode 0600) and DIR/signing.pub."""
    try:
        signer, verifier = generate_key(name)
    except NoteError as error:
        fail(error)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    private = folder / "signing.key"
    try:
        descriptor = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        fail(ValueError(f"{private} exists: a signing key is never overwritten"))
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(signer + "\n")
    (folder / "signing.pub").write_text(verifier + "\n", encoding="utf-8")
    click.echo(f"wrote {private} and {folder / 'signing.pub'}")


@click.command()
@db_option
@click.option("--key", "key", required=True, help="The signing key file (signing.key).")
@click.option("--out", "out", help="Append the signed checkpoint to this file.")
@click.option("--origin", default=ORIGIN, show_default=True, help="The journal's name.")
def checkpoint(db: str, key: str, out: str | None, origin: str) -> None:
    """Sign a checkpoint of the journal's tree now; keep it in the database (and --out)."""
    signer = _read(key).strip()
    with opened(db, create=False) as book:
        try:
            published = publish_checkpoint(book.store, signer, origin=origin, file=out)
        except NoteError as error:
            fail(error)
    assert published is not None
    click.echo(published[1], nl=False)


@click.command()
@db_option
@click.argument("bet_uid", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--content",
    is_flag=True,
    help="With each commit's canonical content, which shows the bet's rows (a close of many "
    "bets: large).",
)
def prove(db: str, bet_uid: int, as_json: bool, content: bool) -> None:
    """The bet's commits and the proof of each in the latest signed checkpoint."""
    with opened(db, create=False) as book:
        document = proof_document(book.store, bet_uid, content=content)
    if as_json:
        emit(document)
        return
    size = document["checkpoint"].split("\n", 2)[1]
    click.echo(f"bet {bet_uid}: {len(document['commits'])} commit(s) in the checkpoint of {size}")
    for commit in document["commits"]:
        click.echo(f"  commit {commit['seq']}: content {commit['content_hash']}")
        _echo_rows(commit, bet_uid)


def _echo_rows(commit: dict[str, Any], bet_uid: int) -> None:
    """The bet's rows in ``commit``'s content, when the document carries it."""
    if "content" in commit:
        for tag, row in bet_rows(commit["content"], bet_uid):
            click.echo(f"    {tag} {json.dumps(row, ensure_ascii=False)}")


@click.command("verify-proof")
@click.argument("file")
@click.option("--public-key", "public_key", required=True, help="The signer's public key file.")
def verify_proof(file: str, public_key: str) -> None:
    """Check a proof written by ``ledger prove --json`` against its signed checkpoint."""
    try:
        document = json.loads(_read(file))
        signed = check_proof(document, _read(public_key).strip())
    except (NoteError, ValueError) as error:
        click.echo(f"FAILED: {error}")
        sys.exit(1)
    click.echo(
        f"verified: bet {document['bet_uid']}'s {len(document['commits'])} commit(s) are in "
        f"checkpoint {signed.size} of {signed.origin}"
    )
    for commit in document["commits"]:
        if "content" in commit:
            click.echo(f"  commit {commit['seq']}: its content holds the bet's rows")
            _echo_rows(commit, document["bet_uid"])


@click.command("prove-consistency")
@db_option
@click.argument("old_size", type=click.IntRange(min=0))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def prove_consistency(db: str, old_size: int, as_json: bool) -> None:
    """The proof that the newest signed checkpoint extends the checkpoint of OLD_SIZE."""
    with opened(db, create=False) as book:
        document = consistency_document(book.store, old_size)
    if as_json:
        emit(document)
        return
    size = document["checkpoint"].split("\n", 2)[1]
    click.echo(
        f"the checkpoint of {size} extends the tree of {old_size}: "
        f"a proof of {len(document['path'])} hash(es)"
    )


@click.command("verify-consistency")
@click.argument("file")
@click.option("--public-key", "public_key", required=True, help="The signer's public key file.")
@click.option(
    "--checkpoint",
    "checkpoint_file",
    help="The older checkpoint as you saved it (its last note); else the document's own.",
)
def verify_consistency(file: str, public_key: str, checkpoint_file: str | None) -> None:
    """Check a document of ``ledger prove-consistency --json``: both signatures, the proof."""
    saved = None if checkpoint_file is None else _last_note(_read(checkpoint_file))
    try:
        document = json.loads(_read(file))
        older, newer = check_consistency(document, _read(public_key).strip(), saved)
    except (NoteError, ValueError) as error:
        click.echo(f"FAILED: {error}")
        sys.exit(1)
    click.echo(
        f"verified: checkpoint {newer.size} of {newer.origin} extends checkpoint {older.size}"
    )
