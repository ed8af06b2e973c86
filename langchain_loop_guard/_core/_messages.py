"""Localized text: every message a user or a model reads comes from the gettext catalogs
(``locales/<lang>/LC_MESSAGES/langchain_loop_guard.po``, compiled by the build). The locale is
passed per call, else taken from a :class:`~contextvars.ContextVar`, else ``"en"``. Look messages
up with ``translator(locale).gettext("...")``, which ``pybabel extract`` finds.
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
    "HINT_MARKER",
    "LOCALES",
    "current_locale",
    "hint",
    "load_catalog",
    "negotiate_locale",
    "not_executed",
    "nudge",
    "stopped_after_nudge",
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
    """The compiled catalog of ``locale``; ``FileNotFoundError`` when it is missing (the strict
    loader the tests use: a missing catalog is an error, not English)."""
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
            "loop-guard: compiled message catalog for locale %r is missing; using English", locale
        )
        return _gettext.NullTranslations()


def negotiate_locale(identifier: str) -> str | None:
    """The catalog locale for a POSIX or BCP 47 identifier (``"ko_KR.UTF-8"``, ``"ko-Kore-KR"``
    give ``"ko"``, ``"C"`` gives ``"en"``), or ``None`` when no catalog serves it (``"fr_FR"``).

    Raises:
        ValueError: ``identifier`` is not a locale Babel knows (``"korean"``, ``"kr"``, ``""``).
    """
    word = identifier.strip().lower()
    if word in LOCALES:  # the common case, without loading Babel's locale data
        return word
    from babel import Locale, UnknownLocaleError  # noqa: PLC0415 - only for the rare forms
    from babel import negotiate_locale as negotiate  # noqa: PLC0415

    try:
        parsed = Locale.parse(identifier.strip().replace("-", "_"))
    except (UnknownLocaleError, ValueError) as exc:
        msg = f"{identifier!r} is not a locale identifier"
        raise ValueError(msg) from exc
    return negotiate([str(parsed)], LOCALES)


def current_locale(locale: str | None = None) -> str:
    """The locale to use: the argument, else the context's, else ``"en"``; an identifier such
    as ``"ko_KR.UTF-8"`` is negotiated (:func:`negotiate_locale`), to ``"en"`` without a catalog."""
    chosen = locale or _current.get() or "en"
    if chosen in LOCALES:
        return chosen
    try:
        return negotiate_locale(chosen) or "en"
    except ValueError:
        return "en"


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


# --- model-facing text (user-facing stop reasons live with the detector) ------------------------

HINT_MARKER = "[loop-guard]"
"""Starts the hint, so that adding it twice can be detected in any locale."""


def hint(locale: str | None = None) -> str:
    """The model-facing anti-loop hint (SPEC §7): one object per locale, so a caller may tell an
    unchanged hint by identity."""
    return _hint(translator(locale))


@lru_cache(maxsize=8)
def _hint(translations: _gettext.NullTranslations) -> str:
    """The hint from ``translations``: cached by the catalog, which is cached per locale."""
    text = translations.gettext(
        "Do not repeat an action that is not making progress: if a tool call keeps returning "
        "the same result or the same error, change your approach. If you are blocked, stop and "
        "report the blocker instead of trying again."
    )
    return f"{HINT_MARKER} {text}"


def nudge(tool: str | None, count: int, locale: str | None = None) -> str:
    """Model-facing text of a blocked call that lets the run go on (SPEC §4 nudges)."""
    tr = translator(locale)
    if tool is None:
        text = tr.gettext(
            "This call was not executed: you repeated the same step {count} times without "
            "progress. Change your approach, or stop and report what is blocking you."
        )
    else:
        text = tr.gettext(
            "This call was not executed: you repeated `{tool}` {count} times without progress. "
            "Do not call it again the same way; change your approach, or stop and report what "
            "is blocking you."
        )
    return f"{HINT_MARKER} {text.format(tool=tool, count=count)}"


def not_executed(locale: str | None = None) -> str:
    """Model-facing content of a pending tool call answered because the run was stopped."""
    text = translator(locale).gettext(
        "This call was not executed: the loop guard stopped the run because it was repeating "
        "itself without progress."
    )
    return f"{HINT_MARKER} {text}"


def stopped_after_nudge(tool: str | None, count: int, locale: str | None = None) -> str:
    """User-facing reason of a stop that follows a nudge: the model repeated the refused step
    again: this is attempt ``count`` (the nudged count plus one) of the same loop."""
    tr = translator(locale)
    if tool is None:
        text = tr.gettext(
            "Loop guard stopped the run: the agent repeated the same step again after a "
            "warning (attempt {count})."
        )
    else:
        text = tr.gettext(
            "Loop guard stopped the run: `{tool}` was called again the same way after a "
            "warning (attempt {count})."
        )
    return text.format(tool=tool, count=count)
