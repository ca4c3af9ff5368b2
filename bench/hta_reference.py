"""Regenerate ``tests/data/hta_breakdowns.json``: HTA 0.5.0's breakdowns of the corpus.

``make hta-breakdowns`` (or ``python -m bench.hta_reference [CORPUS]``) creates the HTA
venv once (:mod:`bench.hta_env`, under ``bench/.cache``), then runs
:mod:`bench.hta_breakdowns` with that interpreter over every manifest trace. The tests
compare ctda's breakdowns with the committed file, never with a live HTA.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench import hta_env
from bench.corpus import corpus_dir

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "data" / "hta_breakdowns.json"


def main(argv: list[str]) -> int:
    corpus = corpus_dir(REPO, Path(argv[0]) if argv else None)
    if corpus is None:
        print("no trace corpus: pass its directory or set CTDA_TRACE_CORPUS", file=sys.stderr)
        return 2
    env = hta_env.ensure(REPO / "bench" / ".cache", lambda m: print(m, file=sys.stderr))
    if env.python is None:
        print(f"no HTA environment: {env.error}", file=sys.stderr)
        return 1
    manifest = (corpus / "MANIFEST.tsv").read_text().splitlines()[1:]
    traces = [str(corpus / line.split("\t")[0]) for line in manifest if "HTA_OUTPUT" not in line]
    script = Path(__file__).with_name("hta_breakdowns.py")
    return subprocess.call([str(env.python), "-W", "ignore", str(script), str(OUT), *traces])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
