"""``ledger verify``: the journal's chain recomputed from the tables, record by record, with its
Merkle tree, the balances proved from the postings (:func:`ledger.stores.audit.check`), and
optionally a signed checkpoint the journal must extend.

Streaming: records are read a page at a time and each commit's rows as a cursor, the tree kept
as ``log2(n)`` hashes (:class:`~ledger.integrity.merkle.TreeBuilder`): memory does not grow with
the journal. The first commit that differs is named with what differs; nothing after it is
read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Connection, func, select

from ..integrity.canonical import GENESIS, record_hash
from ..integrity.checkpoints import Checkpoint
from ..integrity.merkle import TreeBuilder
from . import audit, chain
from .chain_tables import bet_closes
from .dialect import Dialect
from .schema import bets, postings, transactions

__all__ = ["ChainReport", "verify_chain"]


@dataclass
class ChainReport:
    """What ``ledger verify`` found: the records checked, the tree's root, and the first problem
    (with the record it is at, when it is at one)."""

    size: int = 0
    root: bytes = b""
    problem: str | None = None
    seq: int | None = None
    checkpoint: Checkpoint | None = None
    balance_problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.problem is None and not self.balance_problems

    def fail(self, problem: str, seq: int | None = None) -> ChainReport:
        self.problem, self.seq = problem, seq
        return self


def _table_rows(connection: Connection) -> int:
    """The rows every commit's content covers between them, counted from the tables."""
    count = select(func.count())
    return sum(
        int(connection.execute(query).scalar_one())
        for query in (
            count.select_from(transactions),
            count.select_from(postings),
            count.select_from(bets),
            count.select_from(bets).where(bets.c.state != "placed"),
        )
    )


def _closes_misnamed(connection: Connection) -> int:
    """How many bets' pointer to their closing commit, which a proof follows, is not what the
    chained ``bet_closes`` says: a wrong one, or one where it names none."""
    joined = bet_closes.join(bets, bets.c.uid == bet_closes.c.uid)
    wrong = (
        select(func.count())
        .select_from(joined)
        .where(bets.c.closed_grp.is_distinct_from(bet_closes.c.grp))
    )
    pointers = select(func.count()).select_from(bets).where(bets.c.closed_grp.is_not(None))
    closes = select(func.count()).select_from(bet_closes)
    differ = int(connection.execute(wrong).scalar_one())
    extra = int(connection.execute(pointers).scalar_one()) - int(
        connection.execute(closes).scalar_one()
    )
    return differ + max(extra, 0)


def verify_chain(
    connection: Connection, dialect: Dialect, checkpoint: Checkpoint | None = None
) -> ChainReport:
    """Recompute every record, the chain and the tree; then the balances. ``checkpoint``: a
    verified, signed checkpoint whose tree must be the start of today's."""
    report = ChainReport(checkpoint=checkpoint)
    tree = TreeBuilder()
    prev, covered, at_checkpoint = GENESIS, 0, None
    for record in chain.records(connection):
        seq = record.seq
        name = f"commit {seq}" + ("" if record.grp is None else f" (group {record.grp})")
        if seq != tree.size + 1:
            return report.fail(
                f"commit {tree.size + 1} is missing: the record after {tree.size} is {seq}",
                tree.size + 1,
            )
        if record.prev_hash != prev:
            return report.fail(
                f"{name} does not follow commit {seq - 1}: its previous hash differs "
                "(commits reordered, removed or replaced)",
                seq,
            )
        content = chain.commit_content(connection, record.grp)
        if content.digest() != record.content_hash:
            what = (
                f"a row is missing or added ({content.rows} rows now, {record.row_count} sealed)"
                if content.rows != record.row_count
                else f"a value of one of its {content.rows} rows changed (a posting's amount, a "
                "balance, a bet's state or payout, ...)"
            )
            return report.fail(f"{name}: its rows differ from what was sealed: {what}", seq)
        if record_hash(seq, prev, record.content_hash, record.committed_at) != record.record_hash:
            return report.fail(f"{name}: its record hash does not match its fields", seq)
        tree.add(record.record_hash)
        prev, covered = record.record_hash, covered + content.rows
        if checkpoint is not None and tree.size == checkpoint.size:
            at_checkpoint = tree.root()
    report.size, report.root = tree.size, tree.root()
    head_seq, head_hash = chain.head(connection)
    if (head_seq, head_hash) != (tree.size, prev):
        return report.fail(
            f"the chain's head names commit {head_seq}, the records end at {tree.size}: "
            "the last commits were removed or the head rewritten",
            tree.size + 1 if head_seq > tree.size else head_seq,
        )
    rows = _table_rows(connection)
    if rows != covered:
        return report.fail(
            f"{rows - covered} row(s) of transactions, postings or bets belong to no commit "
            "record (written past the chain)"
            if rows > covered
            else f"{covered - rows} row(s) counted twice"
        )
    wrong = _closes_misnamed(connection)
    if wrong:
        return report.fail(
            f"{wrong} bet(s) name a closing commit (bets.closed_grp) other than the one that "
            "closed them (bet_closes): their proofs would show the wrong commit"
        )
    if checkpoint is not None:
        if checkpoint.size > tree.size:
            return report.fail(
                f"the journal has {tree.size} commits, the signed checkpoint {checkpoint.size}: "
                f"commits {tree.size + 1} to {checkpoint.size} were cut off",
                tree.size + 1,
            )
        if checkpoint.size == 0:
            at_checkpoint = TreeBuilder().root()
        if at_checkpoint != checkpoint.root:
            return report.fail(
                f"the first {checkpoint.size} commits are not the tree the checkpoint signed "
                "(its root differs): the history was rewritten"
            )
    report.balance_problems = audit.check(connection, dialect).problems
    return report
