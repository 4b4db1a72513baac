"""Signed checkpoints of the journal's Merkle tree, in the transparency logs' plain-text formats
(C2SP ``tlog-checkpoint`` in a C2SP ``signed-note``), so an auditor can check them with their own
tools as well as ours.

A checkpoint's text is the origin (which ledger), the tree size (how many commit records), the
root hash (base64), then one extension line, ``time <ISO 8601 UTC>``, each line ending in a
newline. The note is that text, a blank line, and one signature line per signer:
``— <key name> <base64(key id || Ed25519 signature of the text)>``, where the key id is the
first four bytes of ``SHA-256(key name || "\\n" || 0x01 || public key)``.

Keys are Ed25519 (the ``cryptography`` package), written as the signed-note format writes them:
``PRIVATE+KEY+<name>+<key id, hex>+<base64(0x01 || 32-byte seed)>`` for the signer and
``<name>+<key id, hex>+<base64(0x01 || 32-byte public key)>`` for the verifier.

Pure: strings and bytes in and out; reading and writing key files is the caller's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

__all__ = [
    "Checkpoint",
    "NoteError",
    "generate_key",
    "open_checkpoint",
    "open_note",
    "sign",
    "sign_note",
    "verifier_of",
]

ED25519 = b"\x01"  # the signed-note format's algorithm byte for Ed25519
DASH = "\u2014 "  # a signature line's start: an em dash and a space
TIME = "time "  # the extension line of the checkpoint's time


class NoteError(ValueError):
    """A checkpoint note or a key that cannot be read, or a signature that does not verify."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The journal's tree as one signer saw it: ``size`` commit records with root ``root``."""

    origin: str
    size: int
    root: bytes
    time: datetime

    def text(self) -> str:
        """The signed text: origin, size, root hash (base64), time, each line ending ``\\n``."""
        if not self.origin or "\n" in self.origin:
            raise NoteError("a checkpoint's origin is one non-empty line")
        moment = self.time.astimezone(UTC).isoformat().replace("+00:00", "Z")
        root = base64.b64encode(self.root).decode()
        return f"{self.origin}\n{self.size}\n{root}\n{TIME}{moment}\n"


def _key_id(name: str, public: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + ED25519 + public).digest()[:4]


def _check_name(name: str) -> None:
    if not name or any(c.isspace() or c == "+" for c in name):
        raise NoteError(f"a key name is one word without '+': {name!r}")


def generate_key(name: str) -> tuple[str, str]:
    """A new Ed25519 key named ``name``: its signer (private) and verifier (public) strings."""
    _check_name(name)
    private = Ed25519PrivateKey.generate()
    seed = private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    key_id = _key_id(name, public).hex()
    signer = f"PRIVATE+KEY+{name}+{key_id}+{base64.b64encode(ED25519 + seed).decode()}"
    verifier = f"{name}+{key_id}+{base64.b64encode(ED25519 + public).decode()}"
    return signer, verifier


def _decoded(text: str, size: int) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error:
        raise NoteError("a key is not base64") from None
    if len(raw) != size or raw[:1] != ED25519:
        raise NoteError("not an Ed25519 key")
    return raw[1:]


def _signer(signer: str) -> tuple[str, Ed25519PrivateKey]:
    parts = signer.strip().split("+", 4)  # base64 may hold a "+" too
    if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
        raise NoteError("not a signer key (PRIVATE+KEY+<name>+<id>+<key>)")
    name = parts[2]
    _check_name(name)
    private = Ed25519PrivateKey.from_private_bytes(_decoded(parts[4], 33))
    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    if _key_id(name, public).hex() != parts[3]:
        raise NoteError("the signer key's id does not match its key")
    return name, private


def _verifier(verifier: str) -> tuple[str, bytes, Ed25519PublicKey]:
    parts = verifier.strip().split("+", 2)
    if len(parts) != 3:
        raise NoteError("not a verifier key (<name>+<id>+<key>)")
    name, key_id, encoded = parts
    _check_name(name)
    public = _decoded(encoded, 33)
    if _key_id(name, public).hex() != key_id:
        raise NoteError("the verifier key's id does not match its key")
    return name, bytes.fromhex(key_id), Ed25519PublicKey.from_public_bytes(public)


def verifier_of(signer: str) -> str:
    """The verifier (public) key of a signer key."""
    name, private = _signer(signer)
    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return f"{name}+{_key_id(name, public).hex()}+{base64.b64encode(ED25519 + public).decode()}"


def sign(checkpoint: Checkpoint, signer: str) -> str:
    """The signed note of ``checkpoint``."""
    return sign_note(checkpoint.text(), signer)


def open_checkpoint(note: str, verifier: str) -> Checkpoint:
    """The checkpoint of ``note`` once a signature of ``verifier``'s key verifies on it;
    :class:`NoteError` if none does, or if the note is not a checkpoint."""
    return _parse(open_note(note, verifier))


def sign_note(text: str, signer: str) -> str:
    """``text`` (lines ending in a newline) as a signed note: the text, a blank line, the
    signature line of ``signer``."""
    if not text.endswith("\n") or "\n\n" in text:
        raise NoteError("a note's text is non-empty lines, each ending in a newline")
    name, private = _signer(signer)
    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    signature = base64.b64encode(_key_id(name, public) + private.sign(text.encode())).decode()
    return f"{text}\n{DASH}{name} {signature}\n"


def open_note(note: str, verifier: str) -> str:
    """The text of ``note`` once a signature of ``verifier``'s key verifies on it; signatures
    of other keys are passed over. :class:`NoteError` if none of that key verifies."""
    name, key_id, public = _verifier(verifier)
    text, separator, signatures = note.rpartition("\n\n")
    if not separator or not signatures.endswith("\n"):
        raise NoteError("not a signed note: text, a blank line, signature lines")
    text += "\n"
    verified = False
    for line in signatures[:-1].split("\n"):
        if not line.startswith(DASH):
            raise NoteError("a signature line starts with an em dash")
        signed_by, _, encoded = line[len(DASH) :].partition(" ")
        if signed_by != name:
            continue  # another party's signature: not ours to check
        try:
            raw = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            raise NoteError("a signature is not base64") from None
        if raw[:4] != key_id:
            continue
        try:
            public.verify(raw[4:], text.encode())
        except InvalidSignature:
            raise NoteError(f"the signature of {name} does not verify") from None
        verified = True
    if not verified:
        raise NoteError(f"the note carries no signature of {name}")
    return text


def _parse(text: str) -> Checkpoint:
    lines = text[:-1].split("\n")
    if len(lines) < 4 or not lines[1].isdigit() or not lines[3].startswith(TIME):
        raise NoteError("not a checkpoint: origin, size, root hash, time")
    try:
        root = base64.b64decode(lines[2], validate=True)
        moment = datetime.fromisoformat(lines[3][len(TIME) :])
    except (binascii.Error, ValueError):
        raise NoteError("not a checkpoint: its root hash or time cannot be read") from None
    if len(root) != 32 or moment.tzinfo is None:
        raise NoteError("not a checkpoint: a 32-byte root hash and a UTC time")
    return Checkpoint(lines[0], int(lines[1]), root, moment.astimezone(UTC))
