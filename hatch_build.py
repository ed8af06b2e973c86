"""Compile the gettext catalogs in ``locales/`` into the package at build time.

The translator-facing sources (``locales/<lang>/LC_MESSAGES/langchain_loop_guard.po``) are
committed; the compiled ``.mo`` files are build products. This hook writes them to
``langchain_loop_guard/locales/`` for every wheel, editable installs included, so a source
checkout installed with ``pip install -e .`` and a built wheel load the same catalogs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from hatchling.builders.hooks.plugin.interface import BuildHookInterface

DOMAIN = "langchain_loop_guard"


def compile_catalogs(root: Path) -> list[Path]:
    """Compile every ``locales/*/LC_MESSAGES/<domain>.po`` and return the ``.mo`` paths."""
    source = root / "locales"
    target = root / "langchain_loop_guard" / "locales"
    written = []
    for po_path in sorted(source.glob(f"*/LC_MESSAGES/{DOMAIN}.po")):
        lang = po_path.parent.parent.name
        with po_path.open("rb") as handle:
            catalog = read_po(handle, locale=lang, domain=DOMAIN)
        fuzzy = [m.id for m in catalog if m.id and m.fuzzy]
        if fuzzy:
            msg = f"{po_path}: fuzzy entries would silently fall back to English: {fuzzy!r}"
            raise RuntimeError(msg)
        mo_path = target / lang / "LC_MESSAGES" / f"{DOMAIN}.mo"
        mo_path.parent.mkdir(parents=True, exist_ok=True)
        with mo_path.open("wb") as handle:
            write_mo(handle, catalog)
        written.append(mo_path)
    if not written:
        msg = f"no catalogs found under {source}"
        raise RuntimeError(msg)
    return written


class CompileCatalogsHook(BuildHookInterface):  # type: ignore[type-arg]
    """Hatchling build hook: compile catalogs before the wheel (or editable wheel) is built."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        for mo_path in compile_catalogs(root):
            if version != "editable":
                relative = mo_path.relative_to(root).as_posix()
                build_data["force_include"][str(mo_path)] = relative
