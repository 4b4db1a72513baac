"""The journal's integrity: the Merkle tree of its commit records (:mod:`.merkle`) and the
signed checkpoints of that tree (:mod:`.checkpoints`). Pure: no database, no clock."""
