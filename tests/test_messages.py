"""The gettext catalogs: present, current, complete, and loaded per call or per context."""

from __future__ import annotations

import gettext
import re
import string
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po

from langchain_loop_guard._core import _messages
from langchain_loop_guard._core._messages import (
    DOMAIN,
    LOCALES,
    current_locale,
    hint,
    load_catalog,
    negotiate_locale,
    nudge,
    translator,
    use_locale,
)

ROOT = Path(__file__).resolve().parent.parent
LOCALES_DIR = ROOT / "locales"
TEMPLATE = LOCALES_DIR / f"{DOMAIN}.pot"


def _read(path: Path, locale: str | None = None) -> Catalog:
    with path.open("rb") as handle:
        return read_po(handle, locale=locale)


def _po(locale: str) -> Catalog:
    return _read(LOCALES_DIR / locale / "LC_MESSAGES" / f"{DOMAIN}.po", locale)


def _ids(catalog: Catalog) -> set[str]:
    """Each message's id (a plural message's singular id)."""
    return {_first(message.id) for message in catalog if message.id}


def _first(text: str | tuple[str, ...]) -> str:
    return text if isinstance(text, str) else text[0]


def _forms(text: str | tuple[str, ...]) -> tuple[str, ...]:
    """A message's id or text as its forms: one, or a plural message's each."""
    return (text,) if isinstance(text, str) else tuple(text)


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def _source_ids() -> set[str]:
    method_map = [("langchain_loop_guard/**.py", "python")]
    # Babel skips folders whose names start with "_" unless told otherwise: the package's rooms
    # (``_core``, ``_integrations``, …) do, and hold the messages.
    found = extract_from_dir(str(ROOT), method_map, directory_filter=_source_folder)
    return {_first(message) for _, _, message, _, _ in found}


def _source_folder(path: str) -> bool:
    name = Path(path).name
    return not name.startswith((".", "__")) and name not in {"build", "dist"}


def test_template_lists_every_message_in_the_source() -> None:
    """The .pot is regenerated whenever a message in the code changes (see README)."""
    assert _ids(_read(TEMPLATE)) == _source_ids()


@pytest.mark.parametrize("locale", LOCALES)
def test_catalog_has_exactly_the_template_messages(locale: str) -> None:
    """Every catalog holds every message of the template and nothing obsolete."""
    assert _ids(_po(locale)) == _ids(_read(TEMPLATE))


def test_korean_catalog_is_complete_and_not_fuzzy() -> None:
    """No Korean message is empty or fuzzy (fuzzy entries silently fall back to English)."""
    catalog = _po("ko")
    empty = [m.id for m in catalog if m.id and not all(_forms(m.string))]
    fuzzy = [m.id for m in catalog if m.id and m.fuzzy]
    assert not empty
    assert not fuzzy


def test_korean_plural_header_is_babels() -> None:
    """Korean has one plural form."""
    assert _po("ko").plural_forms == "nplurals=1; plural=0;"


def test_korean_translations_keep_every_placeholder() -> None:
    """A translation that drops or invents a placeholder would raise at format time."""
    mismatched = [
        m.id
        for m in _po("ko")
        if m.id
        for form in _forms(m.string)
        if not any(_fields(source) == _fields(form) for source in _forms(m.id))
    ]
    assert not mismatched


def test_korean_translations_are_korean() -> None:
    """Each Korean message contains Hangul."""
    hangul = re.compile(r"[\uac00-\ud7a3]")
    assert all(hangul.search(form) for m in _po("ko") if m.id for form in _forms(m.string))


@pytest.mark.parametrize("locale", LOCALES)
def test_compiled_catalog_ships_and_is_current(locale: str) -> None:
    """The installed .mo exists and matches its .po (reinstall with pip to recompile)."""
    compiled = load_catalog(locale)
    assert isinstance(compiled, gettext.GNUTranslations)
    for message in _po(locale):
        if isinstance(message.id, str) and message.string:
            assert compiled.gettext(message.id) == message.string
        elif not isinstance(message.id, str) and all(message.string):  # each plural form
            singular, plural = message.id
            for n, form in enumerate(message.string):
                assert compiled.ngettext(singular, plural, n or 1) == form


def test_missing_catalog_is_an_error_for_the_strict_loader() -> None:
    """The strict loader used by tests never falls back silently."""
    with pytest.raises(FileNotFoundError):
        load_catalog("xx")


def test_missing_catalog_falls_back_to_english_at_runtime(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A broken install fails open: English text and one warning, never a crash."""
    _messages._cached.cache_clear()
    monkeypatch.setattr(_messages, "_localedir", lambda: str(ROOT / "nowhere"))
    try:
        assert hint("ko").startswith(_messages.HINT_MARKER)
        assert "Do not repeat" in hint("ko")
        assert "missing" in caplog.text
    finally:
        monkeypatch.undo()
        _messages._cached.cache_clear()


def test_locale_is_per_call_then_context_then_english() -> None:
    """An explicit locale wins over the context's; unknown locales mean English."""
    assert current_locale() == "en"
    with use_locale("ko"):
        assert current_locale() == "ko"
        assert current_locale("en") == "en"
        assert translator() is translator("ko")
    assert current_locale("fr") == "en"


def test_locale_identifiers_select_their_catalog_per_call() -> None:
    """``ko_KR.UTF-8`` is Korean; a locale without a catalog and a non-locale are English."""
    assert current_locale("ko_KR.UTF-8") == "ko"
    assert translator("ko-KR") is translator("ko")
    assert current_locale("fr_FR") == "en"
    assert current_locale("korean") == "en"


@pytest.mark.parametrize(
    ("identifier", "expected"),
    [
        ("ko", "ko"),
        ("KO", "ko"),
        (" en ", "en"),
        ("ko_KR", "ko"),
        ("ko-KR", "ko"),
        ("ko_KR.UTF-8", "ko"),
        ("ko_KR.UTF-8@euro", "ko"),
        ("ko-Kore-KR", "ko"),
        ("en_US", "en"),
        ("C", "en"),
        ("fr_FR", None),
        ("zh-Hant-TW", None),
    ],
)
def test_negotiate_locale(identifier: str, expected: str | None) -> None:
    """Babel parses the identifier; its language picks the catalog, or none serves it."""
    assert negotiate_locale(identifier) == expected


@pytest.mark.parametrize("identifier", ["korean", "kr", "", "ko_KR_x_y_z"])
def test_negotiate_locale_rejects_what_is_no_locale(identifier: str) -> None:
    """Text Babel does not know as a locale is a ``ValueError`` naming it."""
    with pytest.raises(ValueError, match="is not a locale identifier"):
        negotiate_locale(identifier)


def test_model_facing_texts_differ_by_locale() -> None:
    """Hint and nudge are translated, and the nudge names the tool and count."""
    assert hint("en") != hint("ko")
    korean = nudge("read_file", 3, "ko")
    assert "read_file" in korean
    assert "3" in korean
    assert korean != nudge("read_file", 3, "en")
