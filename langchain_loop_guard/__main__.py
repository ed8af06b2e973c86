"""``python -m langchain_loop_guard``: the ``loop-guard`` command."""

from __future__ import annotations

import sys

from langchain_loop_guard._cli._main import main

if __name__ == "__main__":
    sys.exit(main())
