"""Write ``docs/api.md``: the API reference of every name in ``langchain_loop_guard.__all__``.

The text is the docstrings, so the reference cannot drift from the code; ``tests/test_api_docs.py``
fails when ``docs/api.md`` differs from what this script writes. Run it after changing a public
docstring or signature::

    .venv/bin/python scripts/gen_api_docs.py           # rewrite docs/api.md
    .venv/bin/python scripts/gen_api_docs.py --check   # exit 1 if docs/api.md is stale

Docstrings are shown as written, in ``text`` blocks (their reStructuredText roles shortened:
``:class:`~a.B``` becomes ``B``), so their indented ``Args:`` sections read as they do in an
editor.
"""

from __future__ import annotations

import argparse
import ast
import enum
import importlib
import inspect
import itertools
import re
import sys
from pathlib import Path
from typing import Any, get_args

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "api.md"

RETURNED = [
    ("GuardStatus", "langchain_loop_guard._core._status"),
    ("RunInspection", "langchain_loop_guard._core._status"),
    ("ConfigRow", "langchain_loop_guard._core._config"),
]
"""Values the public methods return, documented after ``__all__`` (``guard.status()``…)."""

_ROLE = re.compile(r":(?:class|func|meth|attr|data|exc|mod):`~?([^`]+)`")

HEADER = """\
# API reference

Every public name of `langchain_loop_guard` (its `__all__`), with its signature and docstring.
Generated from the code by `scripts/gen_api_docs.py`; do not edit by hand (a test fails when
this file is stale). The [manual](manual.md) explains how the pieces fit together.
"""


def _clean(doc: str) -> str:
    """Docstring text with reStructuredText roles reduced to the name they point at."""
    return _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1], doc)


def _block(doc: str | None) -> list[str]:
    if not doc:
        return []
    return ["```text", _clean(doc).rstrip(), "```", ""]


def _signature(obj: Any) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):  # builtins and some descriptors have none
        return "(...)"


def _attribute_docs(source: str, owner: str | None = None) -> dict[str, str]:
    """``name: doc`` of the attribute docstrings (a string right after an assignment).

    Module level when ``owner`` is ``None``, else in the body of class ``owner``.
    """
    tree = ast.parse(source)
    body: list[ast.stmt] = tree.body
    if owner is not None:
        body = next(
            node.body for node in tree.body if isinstance(node, ast.ClassDef) and node.name == owner
        )
    docs: dict[str, str] = {}
    for before, after in itertools.pairwise(body):
        target = None
        if isinstance(before, ast.AnnAssign) and isinstance(before.target, ast.Name):
            target = before.target.id
        elif (
            isinstance(before, ast.Assign)
            and len(before.targets) == 1
            and isinstance(before.targets[0], ast.Name)
        ):
            target = before.targets[0].id
        if (
            target is not None
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[target] = inspect.cleandoc(after.value.value)
    return docs


def _module_source(obj: Any) -> str:
    return inspect.getsource(sys.modules[obj.__module__])


def _members(cls: type) -> list[str]:
    """Public methods and properties of ``cls`` defined in this package, with docstrings.

    Inherited ones count (``status()`` comes from the guards' shared base); LangChain's
    callback methods (``on_*``) are named in one line, since LangChain calls them.
    """
    lines: list[str] = []
    seen: set[str] = set()
    callbacks: list[str] = []
    own = [k for k in cls.__mro__ if k.__module__.startswith("langchain_loop_guard")]
    for klass in own:
        for name, value in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            if name.startswith("on_"):
                callbacks.append(name)
                continue
            if isinstance(value, property):
                lines += [f"### `{cls.__name__}.{name}` (property)", ""]
                lines += _block(inspect.getdoc(value))
            elif isinstance(value, (staticmethod, classmethod)) or inspect.isfunction(value):
                function = getattr(cls, name)
                doc = inspect.getdoc(function)
                if not doc or not function.__module__.startswith("langchain_loop_guard"):
                    continue
                lines += [f"### `{cls.__name__}.{name}{_signature(function)}`", ""]
                lines += _block(doc)
    if callbacks:
        names = ", ".join(f"`{name}`" for name in callbacks)
        lines += [f"LangChain callback methods (LangChain calls them): {names}.", ""]
    return lines


def _config_fields(cls: Any) -> list[str]:
    docs = _attribute_docs(_module_source(cls), cls.__name__)
    lines = [
        "| field | alias | default | meaning |",
        "|---|---|---|---|",
    ]
    for name, info in cls.model_fields.items():
        default = info.get_default(call_default_factory=True)
        shown = repr(default if not isinstance(default, frozenset) else sorted(default))
        if hasattr(default, "items"):
            shown = repr(dict(default))
        meaning = " ".join(_clean(docs.get(name, "")).split()).replace("|", "\\|")
        lines.append(
            f"| `{name}` | {f'`{info.alias}`' if info.alias else ''} | `{shown}` | {meaning} |"
        )
    return [*lines, ""]


def _public_bases(cls: type) -> list[type]:
    """``cls``'s bases, a private one (``_RunRegistry``) replaced by its own public bases."""
    found: list[type] = []
    for base in cls.__bases__:
        for public in _public_bases(base) if base.__name__.startswith("_") else [base]:
            if public not in found:
                found.append(public)
    return found


def _section(name: str, obj: Any) -> list[str]:
    lines: list[str]
    if inspect.isclass(obj) and issubclass(obj, enum.Enum):
        lines = [f"## {name}", "", f"An enum (`{obj.__module__}`).", ""]
        lines += _block(inspect.getdoc(obj))
        lines += [f"- `{member.name}` = `{member.value!r}`" for member in obj]
        return [*lines, ""]
    if inspect.isclass(obj):
        kind = "exception" if issubclass(obj, BaseException) else "class"
        bases = ", ".join(base.__name__ for base in _public_bases(obj) if base is not object)
        lines = [f"## {name}", "", f"A {kind}" + (f"; bases: {bases}." if bases else "."), ""]
        if hasattr(obj, "model_fields"):
            lines += [f"`{name}(**values)`", ""]
        elif obj.__class__.__name__ != "_TypedDictMeta":
            lines += [f"`{name}{_signature(obj)}`", ""]
        lines += _block(inspect.getdoc(obj))
        if hasattr(obj, "model_fields"):
            lines += _config_fields(obj)
        return lines + _members(obj)
    if inspect.isfunction(obj):
        lines = [f"## {name}", "", f"`{name}{_signature(obj)}`", ""]
        return lines + _block(inspect.getdoc(obj))
    # a type alias: its value, and the attribute docstring that follows it in its module
    module = next(
        module
        for module in sys.modules.values()
        if getattr(module, "__name__", "").startswith("langchain_loop_guard.")
        and getattr(module, name, None) is obj
    )
    doc = _attribute_docs(inspect.getsource(module)).get(name)
    values = " | ".join(repr(arg) for arg in get_args(obj))
    lines = [f"## {name}", "", f"A type alias: `{name} = Literal[{values}]`", ""]
    return lines + _block(doc)


def render() -> str:
    """The whole reference, as ``docs/api.md`` should hold it."""
    import langchain_loop_guard as package  # noqa: PLC0415 - after sys.path is settled

    lines = [HEADER]
    names = [*package.__all__, *(name for name, _ in RETURNED)]
    lines += ["Contents: " + ", ".join(f"[`{n}`](#{n.lower()})" for n in names), ""]
    for name in package.__all__:
        lines += _section(name, getattr(package, name))
    lines += [
        "---",
        "",
        "The values below are not imported by name but returned by the guards' methods.",
        "",
    ]
    for name, module in RETURNED:
        lines += _section(name, getattr(importlib.import_module(module), name))
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write ``docs/api.md``, or with ``--check`` report whether it is current."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/api.md is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT.relative_to(ROOT)} is stale: run scripts/gen_api_docs.py")
            return 1
        return 0
    OUTPUT.parent.mkdir(exist_ok=True)
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
