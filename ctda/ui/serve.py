"""The UI server process (``python -m ctda.ui.serve run app.py ...``): warm, then Streamlit.

``ctda ui`` starts this instead of ``python -m streamlit`` so the process pays the
engine's start-up (:mod:`ctda.ui.warm`) before it listens, not at a user's first click.
The arguments are Streamlit's own command line.
"""

from __future__ import annotations

import os
import sys
import time


def main() -> None:
    from ctda.ui import warm

    if os.environ.get(warm.ENV, "1") != "0":
        # the very first start also compiles the engine (about 20 s here); later ones load it
        print("ctda ui: warming the engine before serving...", file=sys.stderr, flush=True)
        took = warm.warm_up()
        print(f"ctda ui: engine warmed in {took:.1f} s", file=sys.stderr, flush=True)
        t = time.perf_counter()
        argv = sys.argv[sys.argv.index("--") + 1 :] if "--" in sys.argv else []
        name = warm.preload(argv) if os.environ.get(warm.ENV_PRELOAD, "1") != "0" else None
        if name is not None:
            print(
                f"ctda ui: run {name!r} loaded in {time.perf_counter() - t:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    from streamlit.web import cli

    sys.argv = ["streamlit", *sys.argv[1:]]
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
