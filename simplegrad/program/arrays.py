"""Reading a saved program's .npz without trusting it: every member's header before its data.

The file's size, then its member count (from the zip's end record, before the zip's directory
is parsed), then per member: its name (``a<k>.npy``), that it is stored (not compressed or
encrypted), its npy header (``numpy.lib.format``'s readers: magic, version, dtype, order,
shape), that the dtype is one a program holds, and that the declared shape needs exactly the
bytes the member holds, within what is left of ``max_bytes``. Only then are the data read,
checked against the zip's CRC, and viewed (read-only) as the array. ``np.load`` never sees
the file; any failure is a ``FormatError`` naming the file and the member.
"""

from __future__ import annotations

import math
import re
import struct
import zipfile
from pathlib import Path
from typing import IO

import numpy as np

from ..errors import FormatError
from ..primitives.schema import DTYPES, MAX_RANK

MEMBER = re.compile(r"a(0|[1-9][0-9]{0,8})\.npy")
END = b"PK\x05\x06"         # the zip's end-of-central-directory record
HEADER_BYTES = 2**16         # the largest npy header read


def read_npz(p: Path, max_bytes: int, max_members: int) -> dict[str, np.ndarray]:
    """The arrays of a program's .npz, keyed as saved (``a0``, ``a1``, ...)."""
    if not p.is_file():
        raise FormatError(f"load_program: {p} does not exist (a program is saved as a .json "
                          "and a .npz file)")
    try:
        size = p.stat().st_size
        if size > max_bytes:
            raise FormatError(f"load_program: {p.name} has {size} bytes, more than the limit "
                              f"of {max_bytes} (pass max_bytes= to read it)")
        with open(p, "rb") as f:
            count = _member_count(f, size)
            if count > max_members:
                raise FormatError(f"load_program: {p.name} holds {count} members, more than "
                                  f"the limit of {max_members}")
            with zipfile.ZipFile(f) as z:
                infos = z.infolist()
                if len(infos) != count:
                    raise FormatError(f"load_program: {p.name}: its directory lists "
                                      f"{len(infos)} members, its end record {count}")
                arrays: dict[str, np.ndarray] = {}
                budget = max_bytes
                for info in infos:
                    key = _key(info, arrays, p.name)
                    arrays[key] = _member(z, info, budget, p.name)
                    budget -= arrays[key].nbytes
                return arrays
    except FormatError:
        raise
    except Exception as e:      # zipfile's and the OS's failures, whatever their type
        raise FormatError(f"load_program: {p.name} is not a readable .npz of plain arrays "
                          f"(truncated or damaged): {type(e).__name__}: {e}") from None


def _member_count(f: IO[bytes], size: int) -> int:
    """The member count in the zip's end record (searched in the last 64 KiB, as zip readers
    do), read before anything else of the file."""
    tail = min(size, 22 + 2**16)
    f.seek(size - tail)
    data = f.read(tail)
    at = data.rfind(END)
    if at < 0 or len(data) - at < 22:
        raise ValueError("the zip's end record is missing")
    disk_count, total = struct.unpack("<HH", data[at + 8:at + 12])
    if total == 0xFFFF:         # a zip64 file: more members than a program needs
        return 2**64
    return total


def _key(info: zipfile.ZipInfo, arrays: dict, source: str) -> str:
    m = MEMBER.fullmatch(info.filename)
    if m is None or info.filename[:-4] in arrays:
        raise FormatError(f"load_program: {source}: member {info.filename[:80]!r} is not an "
                          "array the format writes (a0.npy, a1.npy, ..., each once)")
    return info.filename[:-4]


def _member(z: zipfile.ZipFile, info: zipfile.ZipInfo, budget: int, source: str
            ) -> np.ndarray:
    where = f"load_program: {source}: member {info.filename}"
    if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:
        raise FormatError(f"{where} is compressed or encrypted; the format stores arrays as "
                          "they are")
    if info.file_size > budget:
        raise FormatError(f"{where} has {info.file_size} bytes, more than what is left of the "
                          f"limit ({budget})")
    with z.open(info) as m:
        try:
            version = np.lib.format.read_magic(m)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(
                    m, max_header_size=HEADER_BYTES)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(
                    m, max_header_size=HEADER_BYTES)
            else:
                raise ValueError(f"npy version {version} is not 1.0 or 2.0")
        except (ValueError, TypeError, SyntaxError, OverflowError, RecursionError) as e:
            raise FormatError(f"{where}: not an npy array header: {e}") from None
        if dtype.name not in DTYPES or dtype.hasobject or not dtype.isnative:
            raise FormatError(f"{where} has dtype {dtype}; allowed (native byte order): "
                              f"{', '.join(sorted(DTYPES))}")
        if len(shape) > MAX_RANK or not all(type(n) is int and n >= 0 for n in shape):
            raise FormatError(f"{where} declares the shape {shape!r}")
        nbytes = math.prod(shape) * dtype.itemsize
        left = info.file_size - m.tell()
        if nbytes != left:
            raise FormatError(f"{where} declares shape {shape} of {dtype} ({nbytes} bytes) "
                              f"but holds {left} bytes of data")
        data = m.read(nbytes)
        if len(data) != nbytes or m.read(1):
            raise FormatError(f"{where} is truncated")
    array = np.frombuffer(data, dtype)       # read-only: a view of the bytes read
    return array.reshape(shape[::-1]).T if fortran else array.reshape(shape)
