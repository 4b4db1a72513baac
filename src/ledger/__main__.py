"""``python -m ledger``: the same as the ``ledger`` command."""

from .cli import main

main()
