"""``%loop_guard``: the guard's runtime commands as an IPython line magic (:data:`_USAGE`), for
the guard picked with ``use``, else the newest one alive. Mistakes print one line, no traceback.
"""

from __future__ import annotations

import shlex
import weakref
from collections.abc import Callable
from typing import Any, get_args

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.display import display

from langchain_loop_guard._core._config import Mode
from langchain_loop_guard._core._errors import LoopGuardError
from langchain_loop_guard._core._messages import translator
from langchain_loop_guard._core._status import text_table
from langchain_loop_guard._integrations._runtime import (
    GuardRuntime,
    guard_number,
    live_guards,
    numbered_guards,
)

__all__ = ["LoopGuardMagics", "load_ipython_extension", "unload_ipython_extension"]

_MAGIC = "%loop_guard"
_USAGE = (
    "%loop_guard status | inspect [RUN] | on | off | observe | reset [RUN] | report | use [VAR | N]"
)


@magics_class
class LoopGuardMagics(Magics):
    """The ``%loop_guard`` line magic and the guard it drives."""

    def __init__(self, shell: InteractiveShell) -> None:
        super().__init__(shell)
        self._chosen: weakref.ref[GuardRuntime] | None = None

    @line_magic
    def loop_guard(self, line: str) -> None:
        """Run a loop-guard command: status, inspect [RUN], on, off, observe, reset [RUN],
        report, use."""
        try:
            words = shlex.split(line)
        except ValueError as exc:
            raise UsageError(f"%loop_guard: {exc}") from None
        command, *rest = words or ["status"]
        handlers: dict[str, Callable[[list[str]], None]] = {
            "status": self._status,
            "inspect": self._inspect,
            "reset": self._reset,
            "report": self._report,
            "use": self._use,
            "help": self._help,
            **{mode: self._mode_setter(mode) for mode in get_args(Mode)},
        }
        handler = handlers.get(command.lower())  # as the command line: ON is on
        if handler is None:
            tr = translator(self._locale())
            message = tr.gettext("Unknown command '{command}'. Use: {usage}")
            raise UsageError(message.format(command=command, usage=_USAGE))
        handler(rest)

    # --- commands ------------------------------------------------------------------------------

    def _status(self, args: list[str]) -> None:
        self._no_arguments("status", args)
        _display(self._guard().status())

    def _inspect(self, args: list[str]) -> None:
        guard, run_id, inspection = self._run_command("inspect", args)
        if inspection is None:
            tr = translator(guard.config.locale)
            if run_id is None:
                print(tr.gettext("No run to inspect yet: run the agent with this guard first."))
            else:
                print(tr.gettext("This guard knows no run '{run}'.").format(run=run_id))
            return
        _display(inspection)

    def _reset(self, args: list[str]) -> None:
        guard, _, cleared = self._run_command("reset", args)
        tr = translator(guard.config.locale)
        if cleared:
            print(tr.gettext("The run's counters and stop were cleared."))
        else:
            print(tr.gettext("No run in progress to reset (a run's state ends with the run)."))

    def _report(self, args: list[str]) -> None:
        self._no_arguments("report", args)
        guard = self._guard()
        try:
            report = guard.report()
        except (LoopGuardError, OSError) as exc:  # no trace recorded (yet), or unreadable
            raise UsageError(f"{_MAGIC} report: {exc}") from None
        _display(report)

    def _mode_setter(self, mode: Mode) -> Callable[[list[str]], None]:
        def set_mode(args: list[str]) -> None:
            self._no_arguments(mode, args)
            guard = self._guard()
            try:
                guard.set_mode(mode)
            except LoopGuardError as exc:  # pragma: no cover - the modes are valid
                raise UsageError(str(exc)) from None
            tr = translator(guard.config.locale)
            print(
                tr.gettext("Loop guard mode is now {mode} ({guard}).").format(
                    mode=mode, guard=self._label(guard)
                )
            )

        return set_mode

    def _use(self, args: list[str]) -> None:
        tr = translator(self._locale())
        if len(args) > 1:
            raise UsageError(tr.gettext("Usage: {magic} use [VAR | N]").format(magic=_MAGIC))
        if not args:
            self._list_guards()
            return
        name = args[0]
        namespace = self._namespace()
        number = name.removeprefix("#")
        if number.isdecimal() and name not in namespace:
            found = dict(numbered_guards()).get(int(number))
            if found is None:
                raise UsageError(
                    tr.gettext("No loop guard #{number}: {magic} use lists them.").format(
                        number=number, magic=_MAGIC
                    )
                )
            self._choose(found)
            return
        if name not in namespace:
            raise UsageError(tr.gettext("No variable named '{name}'.").format(name=name))
        value = namespace[name]
        if not isinstance(value, GuardRuntime):
            raise UsageError(
                tr.gettext("{name} is a {kind}, not a loop guard.").format(
                    name=name, kind=type(value).__name__
                )
            )
        self._choose(value)

    def _choose(self, guard: GuardRuntime) -> None:
        self._chosen = weakref.ref(guard)
        tr = translator(guard.config.locale)
        print(
            tr.gettext("{magic} now drives {guard}.").format(
                magic=_MAGIC, guard=self._describe(guard)
            )
        )

    def _help(self, args: list[str]) -> None:
        del args
        print(_USAGE)

    # --- helpers -------------------------------------------------------------------------------

    def _current(self) -> GuardRuntime | None:
        """The guard chosen with ``use`` while it lives, else the newest one alive, if any."""
        chosen = self._chosen() if self._chosen is not None else None
        return chosen if chosen is not None else next(reversed(live_guards()), None)

    def _guard(self) -> GuardRuntime:
        """The guard to drive, named first unless chosen with ``use``; a usage error if none."""
        chosen = self._chosen() if self._chosen is not None else None
        guard = self._current()
        if guard is not None and chosen is None:
            tr = translator(guard.config.locale)
            print(
                tr.gettext(
                    "{magic} drives {guard}, the newest loop guard; {magic} use lists them all."
                ).format(magic=_MAGIC, guard=self._describe(guard))
            )
        if guard is None:
            tr = translator("en")
            raise UsageError(
                tr.gettext(
                    "No loop guard yet: create one (LoopGuardCallbackHandler(), "
                    "LoopGuardMiddleware(), ...) or pick one with {magic} use VAR."
                ).format(magic=_MAGIC)
            )
        return guard

    def _locale(self) -> str:
        """The locale of the guard in use (English before there is one)."""
        guard = self._current()
        return guard.config.locale if guard is not None else "en"

    def _namespace(self) -> dict[str, Any]:
        shell = self.shell
        return shell.user_ns if shell is not None else {}

    def _label(self, guard: GuardRuntime) -> str:
        """``guard``'s variable name in the notebook, else its type's name."""
        for name, value in self._namespace().items():
            if value is guard and not name.startswith("_"):
                return name
        return type(guard).__name__

    def _describe(self, guard: GuardRuntime) -> str:
        """``#2 guard (LoopGuardCallbackHandler)``: its number in ``use``'s list (kept for its
        life), name and type."""
        number = guard_number(guard)
        kind = type(guard).__name__
        label = self._label(guard)
        return f"#{number} {kind}" if label == kind else f"#{number} {label} ({kind})"

    def _list_guards(self) -> None:
        tr = translator(self._locale())
        current = self._current()
        guards = numbered_guards()
        if not guards:
            print(tr.gettext("No loop guard yet."))
            return
        rows = []
        for number, value in guards:
            marker = "*" if value is current else " "
            label = self._label(value)
            name = "-" if label == type(value).__name__ else label
            rows.append((f"{marker} #{number}", name, type(value).__name__, value.mode))
        for line in text_table(rows, indent=""):
            print(line)

    def _no_arguments(self, command: str, args: list[str]) -> None:
        if args:
            tr = translator(self._locale())
            raise UsageError(
                tr.gettext("{magic} {command} takes no arguments.").format(
                    magic=_MAGIC, command=command
                )
            )

    def _run_command(self, command: str, args: list[str]) -> tuple[GuardRuntime, str | None, Any]:
        """The guard, the RUN argument, and what the guard's ``command`` returns for it."""
        if len(args) > 1:
            tr = translator(self._locale())
            raise UsageError(
                tr.gettext("Usage: {magic} {command} [RUN]").format(magic=_MAGIC, command=command)
            )
        run_id = args[0] if args else None
        guard = self._guard()
        method = getattr(guard, command, None)
        if not callable(method):
            tr = translator(guard.config.locale)
            raise UsageError(
                tr.gettext("{guard} does not support {command}.").format(
                    guard=type(guard).__name__, command=command
                )
            )
        return guard, run_id, method(run_id)


def _display(value: object) -> None:
    """Show ``value`` as rich output: an HTML table in Jupyter, its text elsewhere."""
    display(value)  # type: ignore[no-untyped-call]  # IPython leaves display() untyped


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """Register ``%loop_guard`` (``%load_ext langchain_loop_guard``)."""
    ipython.register_magics(LoopGuardMagics)


def unload_ipython_extension(ipython: InteractiveShell) -> None:
    """Nothing to undo: ``%loop_guard`` stays until the kernel restarts (as most magics do)."""
    del ipython
