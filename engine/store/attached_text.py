"""An attached file (or an import's retained original) as the credential check reads it.

UTF-8 is read whole, and so is UTF-16 (a byte-order mark, or the zero bytes every other byte that
UTF-16 text of ASCII letters has without one).  A gzip file is read as what it decompresses to, and a
zip archive as its members, each read by the same rule, within bounds: ``DECOMPRESSED_MAX_BYTES`` in
all, ``MEMBERS_MAX`` members, ``NESTING_MAX`` archives deep; past a bound the rest is not looked
inside, which is no error by itself.  Anything else is binary: what is read is its runs of printable
ASCII (what ``strings`` shows) and of UTF-16 ASCII (``strings -el``/``-eb``), which is where a
credential stored in an uncompressed binary lies, since every kind the scan knows is ASCII.
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib

_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_UTF32_BOMS = (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")
BINARY_RUN_MIN = 8
_PRINTABLE_RUN = re.compile(rb"[\x20-\x7e\t]{%d,}" % BINARY_RUN_MIN)
_UTF16LE_RUN = re.compile(rb"(?:[\x20-\x7e\t]\x00){%d,}" % BINARY_RUN_MIN)
_UTF16BE_RUN = re.compile(rb"(?:\x00[\x20-\x7e\t]){%d,}" % BINARY_RUN_MIN)
UTF16_SAMPLE_BYTES = 64 * 1024

DECOMPRESSED_MAX_BYTES = 64 * 1024 * 1024
MEMBERS_MAX = 1000
NESTING_MAX = 2
_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGIC = b"PK\x03\x04"
# What reading a damaged or unusual zip can raise: RuntimeError for an encrypted member, NotImplementedError
# for a compression method zipfile lacks.
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, NotImplementedError, RuntimeError,
               ValueError, zlib.error)


class _Budget:
    """How many decompressed bytes are still to be read, shared by every archive inside one file."""

    def __init__(self) -> None:
        self.left = DECOMPRESSED_MAX_BYTES


def decoded_for_scan(data: bytes) -> str:
    """The text of an attached file as the credential scan reads it (see the module's docstring)."""
    return _text(data, 0, _Budget())


def _text(data: bytes, depth: int, budget: _Budget) -> str:
    if depth < NESTING_MAX and data[:2] == _GZIP_MAGIC:
        return _binary_runs(data) + "\n" + _text(_gunzipped(data, budget), depth + 1, budget)
    if depth < NESTING_MAX and data[:4] == _ZIP_MAGIC:
        return "\n".join([_binary_runs(data), *_zip_members(data, depth, budget)])
    if data[:4] in _UTF32_BOMS:
        return data.decode("utf-32", "replace")
    if data[:2] in _UTF16_BOMS:
        return data.decode("utf-16", "replace")
    order = utf16_order(data)
    if order is not None:  # and its ASCII runs, should the guess be wrong and it be a binary after all
        return data.decode(order, "replace") + "\n" + _ascii_runs(data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _binary_runs(data)


def utf16_order(data: bytes) -> str | None:
    """``utf-16-le`` or ``utf-16-be`` for UTF-16 text without a byte-order mark, else None.

    Text of Latin letters in UTF-16 has a zero byte in every pair, always on the same side; a binary
    file's zero bytes fall on both sides, and UTF-8 text has none.
    """
    sample = data[:UTF16_SAMPLE_BYTES]
    pairs = len(sample) // 2
    if pairs < 4 or b"\x00" not in sample:
        return None
    even, odd = sample[0:pairs * 2:2].count(0), sample[1:pairs * 2:2].count(0)
    if odd >= pairs // 4 and even * 8 <= odd:
        return "utf-16-le"
    if even >= pairs // 4 and odd * 8 <= even:
        return "utf-16-be"
    return None


def _ascii_runs(data: bytes) -> str:
    return "\n".join(run.decode("ascii") for run in _PRINTABLE_RUN.findall(data))


def _binary_runs(data: bytes) -> str:
    """Printable ASCII runs, one per line, and those written in UTF-16 of either byte order."""
    # A UTF-16 run has a zero every other byte: without that many zeros in a row among the even or the
    # odd bytes (random or compressed data has none), the slower expressions need not run.
    zeros = b"\x00" * BINARY_RUN_MIN
    if zeros not in data[1::2] and zeros not in data[0::2]:
        return _ascii_runs(data)
    runs = [run.decode("utf-16-le") for run in _UTF16LE_RUN.findall(data)]
    runs += [run.decode("utf-16-be") for run in _UTF16BE_RUN.findall(data)]
    return "\n".join([_ascii_runs(data), *runs])


def _gunzipped(data: bytes, budget: _Budget) -> bytes:
    """What a gzip file (its members one after another) decompresses to, up to the budget; what was
    decompressed before damage or the budget's end."""
    out: list[bytes] = []
    while data[:2] == _GZIP_MAGIC and budget.left > 0:
        inflater = zlib.decompressobj(wbits=31)
        try:
            chunk = inflater.decompress(data, budget.left)
        except zlib.error:
            break
        out.append(chunk)
        budget.left -= len(chunk)
        if not inflater.eof:
            break
        data = inflater.unused_data
    return b"".join(out)


def _zip_members(data: bytes, depth: int, budget: _Budget) -> list[str]:
    """Each member of a zip archive (its name, then its text), the first ``MEMBERS_MAX``, within the budget;
    a member that cannot be read (encrypted, an unknown compression, damaged) is left out."""
    texts: list[str] = []
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()[:MEMBERS_MAX]
    except _ZIP_ERRORS:
        return texts
    with archive:
        for member in members:
            if budget.left <= 0:
                break
            texts.append(member.filename)
            if member.is_dir() or member.flag_bits & 0x1:
                continue
            try:
                with archive.open(member) as stream:
                    content = stream.read(budget.left)
            except _ZIP_ERRORS:
                continue
            budget.left -= len(content)
            texts.append(_text(content, depth + 1, budget))
    return texts
