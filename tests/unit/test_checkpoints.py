"""Checkpoints are signed notes that other implementations read: the Go ``sumdb/note``
reference note is reproduced byte for byte and opened; a checkpoint opens only with its own
key, unchanged."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ledger.integrity.checkpoints import (
    Checkpoint,
    NoteError,
    generate_key,
    open_checkpoint,
    open_note,
    sign,
    sign_note,
    verifier_of,
)

# golang.org/x/mod/sumdb/note's documented example: its key pair and its signed note.
GO_SIGNER = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VERIFIER = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
GO_NOTE = (
    GO_TEXT + "\n\u2014 PeterNeumann "
    "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)

AT = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def test_a_note_signed_here_is_the_go_reference_note_byte_for_byte() -> None:
    assert verifier_of(GO_SIGNER) == GO_VERIFIER
    assert sign_note(GO_TEXT, GO_SIGNER) == GO_NOTE
    assert open_note(GO_NOTE, GO_VERIFIER) == GO_TEXT


def test_a_changed_note_does_not_open() -> None:
    with pytest.raises(NoteError, match="does not verify"):
        open_note(GO_NOTE.replace("cryptography", "cryptographY"), GO_VERIFIER)


def test_a_checkpoint_opens_with_its_key_as_it_was_signed() -> None:
    signer, verifier = generate_key("ledger.example")
    checkpoint = Checkpoint("ledger.example/books", 42, bytes(range(32)), AT)
    note = sign(checkpoint, signer)
    assert note.startswith("ledger.example/books\n42\n")
    assert "\ntime 2026-11-27T12:00:00Z\n\n\u2014 ledger.example " in note
    assert open_checkpoint(note, verifier) == checkpoint


def test_a_checkpoint_does_not_open_with_another_key_or_changed() -> None:
    signer, _ = generate_key("ledger.example")
    _, other = generate_key("ledger.example")
    note = sign(Checkpoint("ledger.example/books", 42, bytes(32), AT), signer)
    with pytest.raises(NoteError, match="no signature"):
        open_checkpoint(note, other)
    _, verifier = generate_key("ledger.example")
    with pytest.raises(NoteError):
        open_checkpoint(note.replace("\n42\n", "\n41\n"), verifier_of(signer))
    with pytest.raises(NoteError):
        open_checkpoint(note, verifier)


def test_a_signed_note_that_is_not_a_checkpoint_is_refused() -> None:
    signer, verifier = generate_key("k")
    with pytest.raises(NoteError, match="not a checkpoint"):
        open_checkpoint(sign_note("hello\nworld\n", signer), verifier)


@pytest.mark.parametrize(
    "key",
    [
        "PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # wrong id
        "PeterNeumann+c74f20a3+AhpcMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # not Ed25519
        "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # a space
        "PeterNeumann+c74f20a3",
    ],
)
def test_a_malformed_verifier_key_is_refused(key: str) -> None:
    with pytest.raises(NoteError):
        open_note(GO_NOTE, key)
