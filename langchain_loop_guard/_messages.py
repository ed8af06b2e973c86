"""Localized text: every message a user or a model reads comes from the gettext catalogs.

The catalogs' sources are ``locales/<lang>/LC_MESSAGES/langchain_loop_guard.po`` at the top of
the repository; the build compiles them into ``langchain_loop_guard/locales``. The active locale
is passed per call, or taken from a :class:`~contextvars.ContextVar` (never per thread), then
``"en"``.

Messages are looked up with ``translator(locale).gettext("...")`` so that ``pybabel extract``
finds them; placeholders use ``str.format`` names.
"""

from __future__ import annotations

import contextlib
import gettext as _gettext
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from functools import lru_cache
from importlib import resources

__all__ = [
    "DOMAIN",
    "LOCALES",
    "current_locale",
    "load_catalog",
    "translator",
    "use_locale",
]

DOMAIN = "langchain_loop_guard"
LOCALES = ("en", "ko")

_logger = logging.getLogger("langchain_loop_guard")
_current: ContextVar[str | None] = ContextVar("langchain_loop_guard_locale", default=None)


def _localedir() -> str:
    return str(resources.files("langchain_loop_guard") / "locales")


def load_catalog(locale: str) -> _gettext.GNUTranslations:
    """Load the compiled catalog of ``locale``; raise ``FileNotFoundError`` when it is missing.

    This is the strict loader the test suite uses: a missing catalog is an error, not English.
    """
    translation = _gettext.translation(DOMAIN, localedir=_localedir(), languages=[locale])
    if not isinstance(translation, _gettext.GNUTranslations):  # pragma: no cover - stdlib contract
        msg = f"no compiled catalog for {locale!r}"
        raise FileNotFoundError(msg)
    return translation


@lru_cache(maxsize=8)
def _cached(locale: str) -> _gettext.NullTranslations:
    try:
        return load_catalog(locale)
    except OSError:
        # Fail open: a broken install must not break the agent. English msgids are the text.
        _logger.warning(
            "loop-guard: compiled message catalog for locale %r is missing; using English",
            locale,
        )
        return _gettext.NullTranslations()


def current_locale(locale: str | None = None) -> str:
    """The locale to use: the argument, else the context's, else ``"en"``."""
    chosen = locale or _current.get() or "en"
    return chosen if chosen in LOCALES else "en"


def translator(locale: str | None = None) -> _gettext.NullTranslations:
    """The (cached) translations of ``locale`` (see :func:`current_locale`)."""
    return _cached(current_locale(locale))


@contextlib.contextmanager
def use_locale(locale: str) -> Iterator[None]:
    """Make ``locale`` the default for messages built inside the ``with`` block."""
    token = _current.set(locale)
    try:
        yield
    finally:
        _current.reset(token)
