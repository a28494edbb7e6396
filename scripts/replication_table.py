"""The replication table of docs/replication.md, from `lemmacheck run --seeds K --json FILE` (or from several
single-seed `run --json` files, one per seed).

    lemmacheck run claims --profile quick --seeds 5 --workers 2 --db runs/replication.db --json replication.json
    python scripts/replication_table.py replication.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lemmacheck.replication import agreement, markdown


def main(paths: list[str]) -> int:
    docs = [json.loads(Path(p).read_text()) for p in paths]
    if len(docs) == 1 and "replication" in docs[0]:  # a `run --seeds` document
        d = docs[0]
        rows = [dict(r, verdicts={int(k): v for k, v in r["verdicts"].items()}) for r in d["claims"]]
        print(markdown(rows, d["seeds"]), end="")
        return 0
    per_seed = {d["run"]["seed"]: d["claims"] for d in docs}
    print(markdown(agreement(per_seed), sorted(per_seed)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
