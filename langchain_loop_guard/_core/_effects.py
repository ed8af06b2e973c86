"""Whether a call acts: creates, changes, sends, deletes or runs something (SPEC §12 N9, §14).

The call itself says so: its tool's name, the action or HTTP method a generic tool is asked
for, SQL that writes, or the shell command it runs. The user's word (``acting_tools``,
``read_only_tools``) and a tool's annotations come first; :class:`~._limits.Limits` and the
integrations apply them, and this is what is left to guess from.

Nothing here imports LangChain, LangGraph or pydantic.
"""

from __future__ import annotations

import itertools
import re
from functools import lru_cache
from typing import Any

__all__ = ["changes_something"]

_SCAN = 256
"""Top-level arguments looked at, at most."""
_ACTION_LENGTH = 64
"""Characters of an action's name, at most (a longer value is text, not a name)."""

# A call changes something when its tool's name says so (``write_file``, ``createUser``), or
# its shell command does: a command that changes the shell or the files, a redirect into a file,
# a here-document, an in-place ``sed``. An empty result of such a call is work done, not a search
# that found nothing (SPEC §12 N9).
# fmt: off
_NAME_VERBS = frozenset([
    "write", "create", "mkdir", "touch", "save", "store", "put", "set", "update", "upsert",
    "insert", "append", "delete", "remove", "move", "copy", "rename", "edit", "patch",
    "replace", "apply", "install", "uninstall", "commit", "push", "upload", "send", "post",
    # SPEC §14: what agents that act through MCP servers and APIs call their acts
    "submit", "add", "publish", "grant", "revoke", "assign", "archive", "merge", "fork",
    "invite", "schedule", "book", "cancel", "reply", "comment", "deploy", "drop", "alter",
    "truncate", "modify", "grade", "approve", "reject", "close", "enable", "disable",
])
_SHELL_VERBS = frozenset([
    "cd", "pushd", "popd", "export", "unset", "source", "alias",  # the shell's own state
    "mkdir", "rmdir", "touch", "rm", "mv", "cp", "ln", "chmod", "chown", "tee", "truncate",
    "install", "kill", "pkill",
])
# fmt: on
_NAME_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_COMMAND_KEYS = ("command", "cmd", "script")
_ACTION_KEYS = frozenset(
    ["action", "action_name", "actionName", "operation", "op", "tool_name", "toolName"]
)
"""Arguments that name what a generic tool does (``execute_action(action_name=...)``)."""
_WRITE_METHODS = frozenset(["POST", "PUT", "PATCH", "DELETE"])
"""HTTP methods that change something, as a ``method`` argument names them."""
_SQL_WRITE = re.compile(
    r"""\b(?:
        INSERT\s+INTO | UPDATE\s+[\w."`\[\]]+\s+SET | DELETE\s+FROM | TRUNCATE\s
      | (?:CREATE|ALTER|DROP)\s+(?:OR\s+REPLACE\s+)?(?:TEMP\w*\s+|UNIQUE\s+|MATERIALIZED\s+)?
        (?:TABLE|INDEX|VIEW|FUNCTION|PROCEDURE|TRIGGER|SCHEMA|DATABASE|SEQUENCE|TYPE|EXTENSION
          |POLICY|ROLE|USER|DOMAIN|RULE)\b
      | (?:GRANT|REVOKE)\s[^;]{1,200}?\s(?:ON|TO|FROM)\s
      | COMMENT\s+ON\s | MERGE\s+INTO | UPSERT\s+INTO | REPLACE\s+INTO
    )""",
    re.IGNORECASE | re.VERBOSE,
)
"""SQL that writes (SPEC §14): a statement that inserts, changes, deletes or defines."""


@lru_cache(maxsize=1024)
def _name_changes(name: str) -> bool:
    """Whether a tool's name says it changes something (a run calls few tools, often)."""
    return any(word.lower() in _NAME_VERBS for word in _NAME_WORD.findall(name))


def _acts_by_arguments(args: dict[Any, Any]) -> bool:
    """Whether a call's top-level arguments ask for an act: an action named with a verb that
    changes something, an HTTP method that writes, or SQL that writes (the first few KB of a
    string value, as the shell command is read)."""
    for key, value in itertools.islice(args.items(), _SCAN):
        if type(value) is not str or not value:
            continue
        if key in _ACTION_KEYS and len(value) <= _ACTION_LENGTH:
            if _name_changes(value):
                return True
        elif (key == "method" and value.upper() in _WRITE_METHODS) or (
            len(value) >= 12 and _SQL_WRITE.search(value, 0, 4096) is not None
        ):
            return True
    return False


# Command-line tools whose subcommands act (SPEC §14: ``helm upgrade``, ``kubectl apply``,
# ``git commit``); the package managers are left out: an install that times out again and
# again is the coding runs' classic loop, and a success of theirs is no new effect to it.
# fmt: off
_SUBCOMMANDS: dict[str, frozenset[str]] = {
    "helm": frozenset(["install", "upgrade", "uninstall", "rollback", "delete"]),
    "kubectl": frozenset([
        "apply", "create", "delete", "patch", "replace", "scale", "set", "edit", "label",
        "annotate", "rollout", "expose", "run", "cordon", "drain", "taint",
    ]),
    "git": frozenset([
        "commit", "push", "merge", "rebase", "reset", "revert", "checkout", "switch", "add",
        "rm", "mv", "tag", "cherry-pick", "stash", "apply", "am", "pull",
    ]),
    "docker": frozenset(["run", "build", "rm", "rmi", "stop", "start", "restart", "push", "kill"]),
    "terraform": frozenset(["apply", "destroy", "import"]),
    "gh": frozenset(["pr", "issue", "release", "repo", "workflow"]),
}
# fmt: on


def _acting_subcommand(rest: str, acts: frozenset[str]) -> bool:
    """Whether the first word of ``rest`` that is no option is one of ``acts`` (``kubectl
    --kubeconfig=k.yaml apply -f x``); ``gh``'s acts are a noun then a verb (``gh pr create``)."""
    words = [word for word in rest.split(None, 8)[:8] if not word.startswith("-")]
    if not words or words[0] not in acts:
        return False
    return words[0] not in ("pr", "issue", "release", "repo", "workflow") or (
        len(words) > 1 and _name_changes(words[1])
    )


# A redirect into a file (not ``2>&1``, not ``> /dev/null``), and an in-place ``sed``; each
# pattern starts with a literal, so a search skips to its candidates at C speed.
_REDIRECT = re.compile(r">(?<![0-9&>]>)>?(?![>&]|\s*/dev/null)")
_SED_IN_PLACE = re.compile(r"sed(?<!\wsed)\s+(?:-\w+\s+)*-i")


def changes_something(name: str, args: object = None) -> bool:
    """Whether a call of ``name`` with ``args`` changes something: by its tool's name, by
    the action or HTTP method a generic tool is asked for (``action_name="update_a_block"``,
    ``method="PATCH"``), by SQL that writes in an argument (SPEC §14), or by the shell command
    it runs (``args`` a string, or its ``command`` value)."""
    if _name_changes(name):
        return True
    command = args if isinstance(args, str) else None
    if type(args) is dict:
        if _acts_by_arguments(args):
            return True
        for key in _COMMAND_KEYS:
            command = args.get(key)
            if type(command) is str:
                break
    if not command or type(command) is not str:
        return False
    head = command[:1024]
    words = head.split(None, 1)  # its first word, and the rest
    while words and (words[0] == "sudo" or "=" in words[0]):
        # ``sudo`` and variable assignments before the command itself
        words = words[1].split(None, 1) if len(words) > 1 else []
    if words:
        program = words[0].rsplit("/", 1)[-1]
        if program in _SHELL_VERBS:
            return True
        acts = _SUBCOMMANDS.get(program)
        if acts is not None and len(words) > 1 and _acting_subcommand(words[1], acts):
            return True
    return (
        "<<" in head
        or (">" in head and _REDIRECT.search(head) is not None)
        or ("sed" in head and _SED_IN_PLACE.search(head) is not None)
    )
