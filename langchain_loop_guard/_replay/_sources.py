"""The JSON values of a trace file, streamed: plain or gzip, a file or a directory of files.

JSON Lines, values one after the other or one JSON array of them, decoded chunk by chunk: time
linear in the file's size, memory bounded by the largest value. Every problem is a
:class:`~langchain_loop_guard._replay._trace.TraceFormatError` naming the file and the line.
"""

from __future__ import annotations

import codecs
import gzip
import importlib
import json
import os
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Final

from langchain_loop_guard._replay._trace import TraceFormatError, json_type

__all__ = ["MAX_VALUE_CHARS", "json_type", "json_values", "parquet_rows", "trace_files"]

MAX_VALUE_CHARS: Final = 256 * 1024 * 1024
"""The largest single JSON value (one run, one line) a replay reads, in characters."""

_CHUNK: Final = 1 << 20
_SPACE: Final = re.compile("[ \t\r\n]*")
_SLACK: Final = 16
"""A decoding error this close to the end of the text read so far may be a value cut in two
by the chunking (``tr`` of ``true``, ``1.`` of ``1.5``): read on before calling it an error."""
_GZIP_MAGIC: Final = b"\x1f\x8b"
_PARQUET_MAGIC: Final = b"PAR1"
_PARQUET_BATCH: Final = 1024


def trace_files(path: str | os.PathLike[str]) -> list[Path]:
    """``path`` itself, or a directory's regular files not hidden, by name; raises
    :class:`TraceFormatError` for a directory without files, ``OSError`` for no ``path``."""
    root = Path(path)
    if not root.is_dir():
        os.stat(root)  # the missing file's OSError, with its errno
        return [root]
    files = sorted(
        child for child in root.iterdir() if child.is_file() and not child.name.startswith(".")
    )
    if not files:
        raise TraceFormatError(root, 0, "the directory holds no trace files")
    return files


def json_values(
    path: Path, *, items: bool = True, progress: Callable[[int], None] | None = None
) -> Iterator[tuple[int, Any]]:
    """``(line, value)`` for each JSON value of ``path`` (the items of a top-level array when
    ``items``); ``progress`` is told the bytes read after each chunk."""
    with path.open("rb") as raw:
        binary: IO[bytes] | gzip.GzipFile = raw
        magic = raw.read(4)
        if magic == _PARQUET_MAGIC:
            raw.close()
            yield from parquet_rows(path, progress=progress)
            return
        if magic[:2] == _GZIP_MAGIC:
            binary = gzip.GzipFile(fileobj=raw, mode="rb")
        raw.seek(0)
        tell = None if progress is None else (lambda: progress(raw.tell()))
        yield from _Scanner(path, binary, tell).values(items=items)


def parquet_rows(
    path: Path, *, progress: Callable[[int], None] | None = None
) -> Iterator[tuple[int, Any]]:
    """``(row, object)`` for each row of a Parquet file (a LangSmith bulk export); raises
    :class:`TraceFormatError` when pyarrow is missing or the file is not valid Parquet."""
    try:
        pq: Any = importlib.import_module("pyarrow.parquet")  # an optional extra
    except ImportError:
        msg = (
            "a Parquet file: reading it needs pyarrow (pip install 'langchain-loop-guard[parquet]')"
        )
        raise TraceFormatError(path, 0, msg) from None
    try:
        table = pq.ParquetFile(path)
        number = 0
        for batch in table.iter_batches(batch_size=_PARQUET_BATCH):
            for row in batch.to_pylist():
                number += 1
                yield number, row
            if progress is not None:
                progress(path.stat().st_size * number // max(1, table.metadata.num_rows))
    except (OSError, ValueError, TypeError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        problem = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise TraceFormatError(path, 0, f"not a readable Parquet file ({problem})") from None


class _Scanner:
    """A chunked JSON scanner: a window of text, its start line, and a position in it."""

    __slots__ = ("_binary", "_decoder", "_eof", "_line", "_path", "_pos", "_tell", "_text", "_utf8")

    def __init__(
        self, path: Path, binary: IO[bytes] | gzip.GzipFile, tell: Callable[[], None] | None
    ) -> None:
        self._path = path
        self._tell = tell
        self._binary = binary
        self._utf8 = codecs.getincrementaldecoder("utf-8-sig")("strict")
        self._decoder = json.JSONDecoder()
        self._text = ""
        self._pos = 0
        self._line = 1  # the line of self._pos
        self._eof = False

    def fail(self, problem: str, pos: int | None = None) -> TraceFormatError:
        """The error for ``problem`` at ``pos`` (default: the scanner's position)."""
        line = self._line
        if pos is not None and pos > self._pos:
            line += self._text.count("\n", self._pos, pos)
        return TraceFormatError(self._path, line, problem)

    def _more(self) -> bool:
        """Read on: at least as much as is buffered (to stay linear), in chunks joined once:
        a long value peaks near twice its size (its text and the value decoded from it). What
        is buffered being one long line with no end yet (a JSON Lines value of many MB), the
        reading stops at the line's end, not at twice the buffer: the window is the line."""
        if self._eof:
            return False
        pending = len(self._text) - self._pos
        if pending > MAX_VALUE_CHARS:
            raise self.fail(f"a JSON value longer than {MAX_VALUE_CHARS:,} characters")
        by_line = pending >= _CHUNK and self._text.find("\n", self._pos) < 0
        chunks = [self._text[self._pos :]]
        size = 0
        while size < max(_CHUNK, pending) and not (by_line and "\n" in chunks[-1]):
            try:
                data = self._binary.read(_CHUNK)
            except (OSError, EOFError, zlib.error) as exc:  # a truncated or corrupt gzip stream
                raise self.fail(f"the compressed file is damaged ({exc})") from None
            try:
                chunks.append(self._utf8.decode(data, final=not data))
            except UnicodeDecodeError as exc:
                line = self._line + sum(chunk.count("\n") for chunk in chunks)
                line += data.count(b"\n", 0, max(0, exc.start))
                raise TraceFormatError(self._path, line, "not UTF-8 text") from None
            size += len(data)
            if not data:
                self._eof = True
                break
        self._text = ""  # the old buffer goes before the new one is made
        self._text = "".join(chunks)
        self._pos = 0
        if self._tell is not None:
            self._tell()
        return size > 0

    def _advance(self, pos: int) -> None:
        self._line += self._text.count("\n", self._pos, pos)
        self._pos = pos

    def _peek(self) -> str:
        """The next character that is not white space ("" at the end), not consumed."""
        while True:
            text = self._text
            pos = _SPACE.match(text, self._pos).end()  # type: ignore[union-attr]  # * matches
            self._advance(pos)
            if pos < len(text):
                return text[pos]
            if not self._more():
                return ""

    def _value(self) -> Any:
        """Decode the value at the position (the caller checked there is one)."""
        while True:
            text, pos = self._text, self._pos
            try:
                value, end = self._decoder.raw_decode(text, pos)
            except json.JSONDecodeError as exc:
                cut = exc.pos >= len(text) - _SLACK or exc.msg.startswith("Unterminated")
                if cut and self._more():
                    continue
                message = exc.msg.removesuffix(" at")  # "Invalid control character at"
                raise self.fail(f"not valid JSON ({message})", exc.pos) from None
            except RecursionError:
                raise self.fail("JSON nested too deeply to read") from None
            except ValueError as exc:  # a number with more digits than int() converts
                words = str(exc).split(";")[0].split(":")[0][:80]
                raise self.fail(f"a JSON number too long to read ({words})") from None
            if end >= len(text) - _SLACK and not isinstance(value, dict | list) and self._more():
                continue  # a number or literal may go on in the next chunk
            self._advance(end)
            return value

    def values(self, *, items: bool) -> Iterator[tuple[int, Any]]:
        """The values of the file (the items of a top-level array when ``items``)."""
        first = self._peek()
        if first == "[" and items:
            yield from self._items()
            return
        while self._peek():
            line = self._line
            yield line, self._value()

    def _items(self) -> Iterator[tuple[int, Any]]:
        self._advance(self._pos + 1)  # the "["
        after = self._peek()
        while after != "]":
            if not after:
                raise self.fail("the JSON array is not closed")
            line = self._line
            yield line, self._value()
            after = self._peek()
            if after == ",":
                self._advance(self._pos + 1)
                after = self._peek()
                if after == "]":
                    raise self.fail("expected an item after ',' in the array")
            elif after and after != "]":
                raise self.fail("expected ',' or ']' between the items of the array")
        self._advance(self._pos + 1)  # the "]"
        if self._peek():
            raise self.fail("text after the JSON array")
