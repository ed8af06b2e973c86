"""The package stays a house a newcomer can change: small rooms, no import circles (not even
through type-only imports), and state read and written by the object that owns it."""

from __future__ import annotations

import ast
import re
import sys
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "langchain_loop_guard"
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 350
MAX_REACHES = 5
"""Places that may reach into another object's private attributes, each saying why."""

# Known exceptions: none. A module or class that outgrows its limit is split where a reader
# would look for its parts, not added here.
OVERSIZED_MODULES: set[str] = set()
OVERSIZED_CLASSES: set[str] = set()

# A named tuple's own methods and fields start with "_" so as not to clash with its fields: they
# are its public interface, not its private state.
_NAMED_TUPLE_API = frozenset({"_make", "_replace", "_asdict", "_fields", "_field_defaults"})


def _modules() -> dict[str, ast.Module]:
    """Every module of the package, by its path in it (``_core/_detector.py``)."""
    return {
        _key(path): ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def _key(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def _module_key(dotted: str, name: str | None = None) -> str:
    """The module ``from dotted import name`` (or ``import dotted``) reads: ``name`` itself
    when it is a module of the package, else ``dotted``'s file (a room's ``__init__.py``)."""
    base = "/".join(dotted.split(".")[1:])
    folder = PACKAGE / base if base else PACKAGE
    if name is not None and (folder / f"{name}.py").is_file():
        return f"{base}/{name}.py".lstrip("/")
    if name is not None and (folder / name / "__init__.py").is_file():
        return f"{base}/{name}/__init__.py".lstrip("/")
    if base and (PACKAGE / f"{base}.py").is_file():
        return f"{base}.py"
    return f"{base}/__init__.py".lstrip("/")


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(tree: ast.Module, *, type_only: bool = False) -> set[str]:
    """The package modules ``tree`` imports, anywhere but under ``if TYPE_CHECKING:`` (there
    too with ``type_only``)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_only:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module.split(".")[0] == "langchain_loop_guard":
                found.update(_module_key(node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(
                _module_key(alias.name)
                for alias in node.names
                if alias.name.startswith("langchain_loop_guard.")
            )
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle of ``graph``, each once (depth-first, by its first module)."""
    cycles: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()

    def walk(path: list[str]) -> None:
        for target in sorted(graph.get(path[-1], ())):
            if target == path[0]:
                key = tuple(sorted(path))
                if key not in seen:
                    seen.add(key)
                    cycles.append([*path, target])
            elif target not in path and target > path[0]:
                walk([*path, target])

    for start in sorted(graph):
        walk([start])
    return cycles


def _reaches(tree: ast.Module) -> list[ast.Attribute]:
    """Where ``tree`` reads or writes another object's private attribute: ``obj._name`` with
    ``obj`` not ``self`` or ``cls``. ``super()._name`` is the object's own; a module's private
    name read through the module (``module._name``) counts like any other object's."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__") or node.attr in _NAMED_TUPLE_API:
            continue  # dunders are protocols, not private state
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        called = owner.func if isinstance(owner, ast.Call) else None
        if isinstance(called, ast.Name) and called.id == "super":
            continue
        found.append(node)
    return found


def _comments(path: Path) -> dict[int, str]:
    """The comments of the module at ``path``, by line."""
    with path.open("rb") as file:
        tokens = tokenize.tokenize(file.readline)
        return {t.start[0]: t.string for t in tokens if t.type == tokenize.COMMENT}


def test_state_is_read_and_written_by_its_owner() -> None:
    """At most 5 places reach into another object's private attributes (``obj._x``), and each
    says why in a comment on its line or the line before (STYLE item 16)."""
    places = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        name = str(path.relative_to(PACKAGE))
        comments = _comments(path)
        for node in _reaches(tree):
            said = comments.get(node.lineno) or comments.get(node.lineno - 1, "")
            places.append((f"{name}:{node.lineno}: {ast.unparse(node)}", said))
    assert len(places) <= MAX_REACHES, [place for place, _ in places]
    unexplained = [place for place, said in places if len(said.split()) < 4]
    assert not unexplained, f"say why in a comment on the line or the line before: {unexplained}"


def test_the_reach_finder_sees_reaches_and_their_comments() -> None:
    """``obj._x`` and ``module._f`` are reaches; ``self._x``, ``cls._x``, ``super()._x``, a
    dunder and a named tuple's ``_replace`` are not."""
    source = (
        "def f(self, cls, other, module, point):\n"
        "    self._a, cls._b, super()._c, other.__class__, point._replace(x=1)\n"
        "    return other._d, module._e()\n"
    )
    found = [ast.unparse(node) for node in _reaches(ast.parse(source))]
    assert sorted(found) == ["module._e", "other._d"]


def test_no_module_is_over_the_line_limit() -> None:
    """Every module, in every room, has at most 600 lines."""
    sizes = {
        _key(path): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    over = {name: size for name, size in sizes.items() if size > MAX_MODULE_LINES}
    assert set(over) <= OVERSIZED_MODULES, over
    fixed = {name for name in OVERSIZED_MODULES if sizes.get(name, 0) <= MAX_MODULE_LINES}
    assert not fixed, f"no longer oversized: take {fixed} off OVERSIZED_MODULES"


def test_no_class_is_over_the_line_limit() -> None:
    """Every class has at most 350 lines (decorators and docstring included)."""
    over = {}
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                size = (node.end_lineno or node.lineno) - first + 1
                if size > MAX_CLASS_LINES:
                    over[f"{name}:{node.name}"] = size
    assert set(over) <= OVERSIZED_CLASSES, over
    fixed = OVERSIZED_CLASSES - set(over)
    assert not fixed, f"no longer oversized: take {fixed} off OVERSIZED_CLASSES"


def test_no_import_circle_between_package_modules() -> None:
    """No module imports, directly or not, one that imports it (``TYPE_CHECKING`` aside)."""
    trees = _modules()
    graph = {name: _imported(tree) & set(trees) - {name} for name, tree in trees.items()}
    assert _cycles(graph) == []


def test_no_import_circle_even_through_type_only_imports() -> None:
    """No module imports, directly or not, one that imports it, counting the imports under
    ``if TYPE_CHECKING:``: a type-only back reference is still two rooms read together."""
    trees = _modules()
    graph = {
        name: _imported(tree, type_only=True) & set(trees) - {name} for name, tree in trees.items()
    }
    assert _cycles(graph) == []


def test_the_checks_see_a_circle_and_skip_type_checking_imports() -> None:
    """The circle finder finds a circle of three, and the import reader skips
    ``if TYPE_CHECKING:`` blocks but reads imports inside functions."""
    assert _cycles({"a.py": {"b.py"}, "b.py": {"c.py"}, "c.py": {"a.py"}}) == [
        ["a.py", "b.py", "c.py", "a.py"]
    ]
    source = (
        "from typing import TYPE_CHECKING\n"
        "from langchain_loop_guard._integrations._engine import Run\n"
        "if TYPE_CHECKING:\n"
        "    from langchain_loop_guard._integrations._handler import X\n"
        "def f():\n"
        "    from langchain_loop_guard._integrations import _repair as _repair\n"
    )
    assert _imported(ast.parse(source)) == {"_integrations/_engine.py", "_integrations/_repair.py"}


def test_the_circle_finder_counts_type_only_imports_when_asked() -> None:
    """With ``type_only``, the import reader reads ``if TYPE_CHECKING:`` blocks too, and a
    circle closed by a type-only import is found."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from langchain_loop_guard._integrations._engine import Run\n"
        "if TYPE_CHECKING:\n"
        "    from langchain_loop_guard._integrations._handler import X\n"
    )
    engine, handler = "_integrations/_engine.py", "_integrations/_handler.py"
    assert _imported(ast.parse(source), type_only=True) == {engine, handler}
    back = "if TYPE_CHECKING:\n    from langchain_loop_guard._integrations._engine import Run\n"
    graph = {engine: {handler}, handler: _imported(ast.parse(back), type_only=True)}
    assert _cycles(graph) == [[engine, handler, engine]]


# --- rooms ------------------------------------------------------------------------------------

TOP = {"__init__.py", "__main__.py", "evaluators.py", "testing.py"}
"""The top of the package: its public surface and nothing else (STYLE item 15)."""


def _rooms() -> dict[str, str]:
    """Each room of the package (a folder with modules) and the docstring of its ``__init__``."""
    rooms = {}
    for folder in sorted(p for p in PACKAGE.iterdir() if p.is_dir() and any(p.glob("*.py"))):
        init = folder / "__init__.py"
        assert init.is_file(), f"{folder.name} has modules but no __init__.py to say what it holds"
        docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        rooms[folder.name] = docstring
    return rooms


def _may_import(docstring: str) -> tuple[set[str], set[str]]:
    """What a room's docstring allows it to import, from its ``May import:`` paragraph: the
    package's rooms and top modules it names (``""`` for the package's ``__init__``), and the
    distributions it names in double backquotes (the standard library is always allowed)."""
    allowed = docstring.partition("May import:")[2]
    inside = set(re.findall(r"langchain_loop_guard\.(\w+)", allowed))
    if re.search(r"``langchain_loop_guard``", allowed):
        inside.add("")
    outside = set(re.findall(r"``(\w+)``", allowed)) - {"langchain_loop_guard"}
    return inside, outside


def _imports_of(tree: ast.Module) -> set[str]:
    """Every module name ``tree`` imports (type-only ones too), as written."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names.add(node.module)
            if node.module == "langchain_loop_guard":  # a room or module of the top, by name
                names.update(
                    f"langchain_loop_guard.{alias.name}"
                    for alias in node.names
                    if (PACKAGE / f"{alias.name}.py").is_file() or (PACKAGE / alias.name).is_dir()
                )
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_top_of_the_package_holds_only_its_public_surface() -> None:
    """Beside the rooms, the package's top holds ``__init__``, ``__main__`` and the public
    modules ``evaluators`` and ``testing``."""
    assert {path.name for path in PACKAGE.glob("*.py")} == TOP


def test_each_room_says_what_it_holds_and_what_it_may_import() -> None:
    """Every room's ``__init__`` docstring describes it and has a ``May import:`` paragraph
    (the pure core, the integrations, replay and reporting, the command line)."""
    rooms = _rooms()
    assert set(rooms) == {"_core", "_integrations", "_replay", "_cli"}
    for name, docstring in rooms.items():
        assert "May import:" in docstring, name
        assert len(docstring.partition("May import:")[0].split()) >= 20, name


def test_each_room_imports_only_what_its_docstring_allows() -> None:
    """A room's modules import the standard library, their own room, and what its docstring's
    ``May import:`` names: nothing else, type-only imports included."""
    wrong = []
    for room, docstring in _rooms().items():
        inside, outside = _may_import(docstring)
        for path in sorted((PACKAGE / room).glob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for name in sorted(_imports_of(tree)):
                top, _, rest = name.partition(".")
                if top == "langchain_loop_guard":
                    target = rest.partition(".")[0]
                    if target != room and target not in inside:
                        wrong.append(f"{room}/{path.name} imports {name}")
                elif top not in {*sys.stdlib_module_names, "__future__", *outside}:
                    wrong.append(f"{room}/{path.name} imports {name}")
    assert not wrong, wrong


def test_the_room_checks_read_a_docstring_and_see_a_wrong_import() -> None:
    """``May import:`` names rooms, the package's top and distributions; an import of a room
    the docstring does not name is one the room check reports."""
    inside, outside = _may_import(
        "Holds things.\n\nMay import: the standard library, ``pydantic`` and "
        ":mod:`langchain_loop_guard._core`, and ``langchain_loop_guard`` (the version)."
    )
    assert inside == {"_core", ""}
    assert outside == {"pydantic"}
    source = "from langchain_loop_guard._integrations._engine import Run\nimport langgraph\n"
    assert _imports_of(ast.parse(source)) == {
        "langchain_loop_guard._integrations._engine",
        "langgraph",
    }
