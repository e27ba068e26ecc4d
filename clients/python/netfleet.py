"""netfleet wire protocol, version 1, in pure Python (standard library only).

It follows docs/protocol.md and nothing else. Contents:

- BitReader / BitWriter: LSB-first bit packing.
- Schema / Kind / Field: the schema, loaded from the JSON form of the golden vectors,
  its canonical encoding and its hash.
- Quantization: position, velocity, rotation (smallest three).
- Messages: decoders for every message (server and client ones), encoders for the client
  messages (HELLO, ACK, PING, COMMAND) and, for testing, for SNAPSHOT, RESET and CLOSE.
- Client: a client's state (history of 16 states per entity, baselines, tombstones,
  NeedFull, resets, the ACK window), with no I/O.

Decoders raise only ``Malformed``. Applying a delta that cannot be applied raises
``CannotApply`` (the client turns it into a NeedFull request).
"""

from __future__ import annotations

import hashlib
import math
import struct
from dataclasses import dataclass, field as dc_field
from typing import Iterable, Optional, Sequence, Union

VERSION = 1

T_SNAPSHOT = 1
T_RESET = 2
T_ACK = 3
T_PING = 4
T_COMMAND = 5
T_HELLO = 6
T_CLOSE = 7

SERVER_TYPES = (T_SNAPSHOT, T_RESET, T_CLOSE)
CLIENT_TYPES = (T_ACK, T_PING, T_COMMAND, T_HELLO)

FLAG_LAST = 1
FLAG_RESET = 2
FLAG_INPUT_ACK = 4

ACK_FLAG_RESYNC = 1
MAX_NEED_FULL = 32
MAX_TOKEN_BYTES = 255                           # the longest connect token a HELLO carries
HISTORY = 16
MAX_BASELINE_AGE = 1024

OP_SPAWN, OP_DELTA, OP_DESPAWN, OP_END = 0, 1, 2, 3

PART_POSITION, PART_ROTATION, PART_VELOCITY = 1, 2, 4
PART_NAMES = {"position": PART_POSITION, "rotation": PART_ROTATION, "velocity": PART_VELOCITY}

POS_MIN, POS_MAX, POS_BITS = -131072, 131071, 18
VEL_MIN, VEL_MAX, VEL_BITS = -8192, 8191, 14

M32 = 0xFFFFFFFF
M16 = 0xFFFF
M64 = (1 << 64) - 1


class Malformed(Exception):
    """A message that does not follow the protocol. The only exception decoders raise."""


class CannotApply(Exception):
    """A delta record that cannot be applied to the baseline it names (NeedFull)."""


# --------------------------------------------------------------------------- bits


class BitReader:
    """Reads LSB-first: bit k of the message is bit k % 8 of byte k // 8."""

    __slots__ = ("_value", "_nbits", "pos")

    def __init__(self, data: bytes, pos: int = 0):
        self._value = int.from_bytes(data, "little")
        self._nbits = len(data) * 8
        self.pos = pos

    @property
    def remaining(self) -> int:
        return self._nbits - self.pos

    def read(self, n: int) -> int:
        if n < 0 or self.pos + n > self._nbits:
            raise Malformed("message too short")
        v = (self._value >> self.pos) & ((1 << n) - 1)
        self.pos += n
        return v

    def bit(self) -> int:
        return self.read(1)

    def finish(self) -> None:
        """The message ends here: zero padding to the byte, and no byte after it."""
        if (self.pos + 7) // 8 * 8 != self._nbits:
            raise Malformed("bytes after the end of the message")
        if self._value >> self.pos:
            raise Malformed("padding is not zero")


class BitWriter:
    __slots__ = ("_value", "pos")

    def __init__(self):
        self._value = 0
        self.pos = 0

    def write(self, value: int, n: int) -> None:
        if n < 0 or value < 0 or value >> n:
            raise ValueError(f"value {value} does not fit in {n} bits")
        self._value |= value << self.pos
        self.pos += n

    def bits(self, s: str) -> None:
        """Writes a bit string, in the order the bits are read ('110': 1, 1, 0)."""
        for ch in s:
            self.write(1 if ch == "1" else 0, 1)

    def getvalue(self) -> bytes:
        return self._value.to_bytes((self.pos + 7) // 8, "little")


def zigzag(v: int) -> int:
    return (v << 1) if v >= 0 else ((-v) << 1) - 1


def unzigzag(u: int) -> int:
    return (u >> 1) ^ -(u & 1)


def round_half_away(x: float) -> int:
    """round() of the spec: half away from zero, exact for every float64."""
    if x >= 0:
        f = math.floor(x)
        return int(f) + (1 if x - f >= 0.5 else 0)
    f = math.floor(-x)
    return -(int(f) + (1 if -x - f >= 0.5 else 0))


# --------------------------------------------------------------------------- schema

FT_UINT, FT_INT, FT_BOOL, FT_ENUM, FT_FLOAT, FT_BYTES = 1, 2, 3, 4, 5, 6
FIELD_TYPES = {"uint": FT_UINT, "int": FT_INT, "bool": FT_BOOL, "enum": FT_ENUM,
               "float": FT_FLOAT, "bytes": FT_BYTES}
FIELD_TYPE_NAMES = {v: k for k, v in FIELD_TYPES.items()}


@dataclass(frozen=True)
class Field:
    name: str
    type: int
    bits: int = 0                         # uint, int
    values: tuple = ()                    # enum
    min: float = 0.0                      # float
    max: float = 0.0
    step: float = 0.0
    size: int = 0                         # bytes

    @property
    def steps(self) -> int:
        """S of a float field."""
        return round_half_away((self.max - self.min) / self.step)

    @property
    def width(self) -> int:
        t = self.type
        if t in (FT_UINT, FT_INT):
            return self.bits
        if t == FT_BOOL:
            return 1
        if t == FT_ENUM:
            return (len(self.values) - 1).bit_length()          # ceil(log2 n)
        if t == FT_FLOAT:
            return self.steps.bit_length()
        if t == FT_BYTES:
            return 8 * self.size
        raise ValueError("unknown field type")

    def valid_wire(self, v: int) -> bool:
        """Whether a wire value (already within width) is a legal value of the field."""
        if self.type == FT_ENUM:
            return v < len(self.values)
        if self.type == FT_FLOAT:
            return v <= self.steps
        return True

    # wire value <-> meaning
    def to_meaning(self, v: int):
        t = self.type
        if t == FT_UINT:
            return v
        if t == FT_INT:
            b = self.bits
            return v - (1 << b) if v >> (b - 1) else v
        if t == FT_BOOL:
            return bool(v)
        if t == FT_ENUM:
            return self.values[v]
        if t == FT_FLOAT:
            return self.min + v * self.step
        if t == FT_BYTES:
            return v.to_bytes(self.size, "little")
        raise ValueError("unknown field type")

    def from_meaning(self, x) -> int:
        t = self.type
        if t == FT_UINT:
            x = int(x)
            if not 0 <= x < (1 << self.bits):
                raise ValueError(f"{self.name}: {x} out of range")
            return x
        if t == FT_INT:
            x = int(x)
            if not -(1 << (self.bits - 1)) <= x < (1 << (self.bits - 1)):
                raise ValueError(f"{self.name}: {x} out of range")
            return x & ((1 << self.bits) - 1)
        if t == FT_BOOL:
            return 1 if x else 0
        if t == FT_ENUM:
            if isinstance(x, int):
                if not 0 <= x < len(self.values):
                    raise ValueError(f"{self.name}: index {x} out of range")
                return x
            return self.values.index(x)
        if t == FT_FLOAT:
            x = float(x)
            if math.isnan(x):
                raise ValueError(f"{self.name}: a float field cannot hold NaN")
            x = min(max(x, self.min), self.max)
            return round_half_away((x - self.min) / self.step)
        if t == FT_BYTES:
            if isinstance(x, str):
                x = bytes.fromhex(x)
            x = bytes(x)
            if len(x) != self.size:
                raise ValueError(f"{self.name}: {len(x)} bytes, want {self.size}")
            return int.from_bytes(x, "little")
        raise ValueError("unknown field type")

    def words(self, v: int) -> list:
        """The vectors' `words`: one 32-bit word per field, bytes fields as ceil(size/4)
        little-endian words."""
        if self.type == FT_BYTES:
            b = v.to_bytes(self.size, "little")
            b += b"\0" * (-len(b) % 4)
            return [int.from_bytes(b[i:i + 4], "little") for i in range(0, len(b), 4)]
        return [v]

    def canonical(self) -> bytes:
        out = bytearray(struct.pack("<B", self.type))
        out += _cstr(self.name)
        t = self.type
        if t in (FT_UINT, FT_INT):
            out += struct.pack("<I", self.bits)
        elif t == FT_ENUM:
            out += struct.pack("<I", len(self.values))
            for v in self.values:
                out += _cstr(v)
        elif t == FT_FLOAT:
            out += struct.pack("<ddd", self.min, self.max, self.step)
        elif t == FT_BYTES:
            out += struct.pack("<I", self.size)
        return bytes(out)

    def validate(self) -> None:
        t = self.type
        if not self.name:
            raise ValueError("field without a name")
        if t in (FT_UINT, FT_INT) and not 1 <= self.bits <= 32:
            raise ValueError(f"field {self.name}: bits {self.bits} not in 1..32")
        if t == FT_ENUM and not 2 <= len(self.values) <= 65536:
            raise ValueError(f"field {self.name}: {len(self.values)} values, not 2..65536")
        if t == FT_FLOAT:
            if not (math.isfinite(self.min) and math.isfinite(self.max) and math.isfinite(self.step)
                    and self.step > 0 and self.max > self.min):
                raise ValueError(f"field {self.name}: bad float range")
            if not 1 <= self.width <= 32:
                raise ValueError(f"field {self.name}: float of {self.width} bits")
        if t == FT_BYTES and not 1 <= self.size <= 16:
            raise ValueError(f"field {self.name}: size {self.size} not in 1..16")
        if t not in FIELD_TYPE_NAMES:
            raise ValueError(f"field {self.name}: unknown type {t}")

    @classmethod
    def from_json(cls, o: dict) -> "Field":
        t = FIELD_TYPES[o["type"]]
        f = cls(name=o["name"], type=t, bits=int(o.get("bits", 0)),
                values=tuple(o.get("values", ())), min=float(o.get("min", 0)),
                max=float(o.get("max", 0)), step=float(o.get("step", 0)),
                size=int(o.get("size", 0)))
        f.validate()
        if "width" in o and int(o["width"]) != f.width:
            raise ValueError(f"field {f.name}: width {o['width']} but computed {f.width}")
        return f


def _cstr(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<I", len(b)) + b


@dataclass(frozen=True)
class Kind:
    id: int
    name: str
    parts: int = PART_POSITION | PART_ROTATION | PART_VELOCITY
    fields: tuple = ()

    @property
    def has_position(self) -> bool:
        return bool(self.parts & PART_POSITION)

    @property
    def has_rotation(self) -> bool:
        return bool(self.parts & PART_ROTATION)

    @property
    def has_velocity(self) -> bool:
        return bool(self.parts & PART_VELOCITY)

    def field_index(self, name: str) -> int:
        for i, f in enumerate(self.fields):
            if f.name == name:
                return i
        raise KeyError(name)

    def canonical(self) -> bytes:
        out = bytearray(struct.pack("<BB", self.id, self.parts))
        out += _cstr(self.name)
        out += struct.pack("<I", len(self.fields))
        for f in self.fields:
            out += f.canonical()
        return bytes(out)

    def fields_meaning(self, wire: Sequence[int]) -> dict:
        return {f.name: f.to_meaning(v) for f, v in zip(self.fields, wire)}

    def fields_from_meaning(self, meaning: dict) -> tuple:
        return tuple(f.from_meaning(meaning[f.name]) for f in self.fields)

    def words(self, wire: Sequence[int]) -> list:
        out = []
        for f, v in zip(self.fields, wire):
            out += f.words(v)
        return out


class Schema:
    def __init__(self, kinds: Iterable[Kind]):
        self.kinds = {}
        for k in kinds:
            if not 1 <= k.id <= 255:
                raise ValueError(f"kind id {k.id} not in 1..255")
            if k.id in self.kinds:
                raise ValueError(f"kind id {k.id} declared twice")
            if k.parts & ~7:
                raise ValueError(f"kind {k.name}: bad parts {k.parts}")
            if len(k.fields) > 32:
                raise ValueError(f"kind {k.name}: more than 32 fields")
            if sum(f.width for f in k.fields) > 1024:
                raise ValueError(f"kind {k.name}: more than 1024 bits of fields")
            names = [f.name for f in k.fields]
            if len(set(names)) != len(names):
                raise ValueError(f"kind {k.name}: two fields with one name")
            self.kinds[k.id] = k
        self.has_fields = any(k.fields for k in self.kinds.values())
        self._hash = None

    @classmethod
    def default(cls) -> "Schema":
        """The schema of a game that declares none."""
        return cls(Kind(i, f"kind{i}") for i in range(1, 256))

    @classmethod
    def from_json(cls, o: dict) -> "Schema":
        kinds = []
        for k in o["kinds"]:
            parts = 0
            for p in k.get("parts", ()):
                parts |= PART_NAMES[p]
            kinds.append(Kind(int(k["id"]), k["name"], parts,
                              tuple(Field.from_json(f) for f in k.get("fields", ()))))
        return cls(kinds)

    def canonical(self) -> bytes:
        out = bytearray(b"netfleet schema 1\0")
        out += struct.pack("<I", len(self.kinds))
        for kid in sorted(self.kinds):
            out += self.kinds[kid].canonical()
        return bytes(out)

    @property
    def hash(self) -> int:
        if self._hash is None:
            self._hash = int.from_bytes(hashlib.sha256(self.canonical()).digest()[:8], "little")
        return self._hash

    def kind(self, kid: int) -> Optional[Kind]:
        return self.kinds.get(kid)


# --------------------------------------------------------------------------- quantization

ROT_R = math.sqrt(0.5)          # r: the binary64 nearest sqrt(2)/2, 0x3FE6A09E667F3BCD
IDENTITY_ROTATION = 0xE0080200


def _quantize(m: float, lo: int, hi: int) -> int:
    if math.isnan(m):
        return lo
    x = m * 64 + 0.5
    if x >= hi + 1:
        return hi
    if x < lo:
        return lo
    return max(lo, min(hi, math.floor(x)))


def quantize_position(m: float) -> int:
    return _quantize(m, POS_MIN, POS_MAX)


def quantize_velocity(m: float) -> int:
    return _quantize(m, VEL_MIN, VEL_MAX)


def dequantize(u: int) -> float:
    return u / 64


def pack_rotation(q: Sequence[float]) -> int:
    """(x, y, z, w) -> 32-bit smallest three."""
    q = [float(c) for c in q]
    if len(q) != 4 or not all(math.isfinite(c) for c in q):
        return IDENTITY_ROTATION
    n = math.sqrt(sum(c * c for c in q))
    if n == 0:
        return IDENTITY_ROTATION
    if not math.isfinite(n) or n < 1e-150:     # overflow/underflow of the squares: scale first
        s = max(abs(c) for c in q)
        q = [c / s for c in q]
        n = math.sqrt(sum(c * c for c in q))
    q = [c / n for c in q]
    k = 0
    for i in range(1, 4):
        if abs(q[i]) > abs(q[k]):
            k = i
    if q[k] < 0:
        q = [-c for c in q]
    r = ROT_R
    codes = []
    for i in range(4):
        if i == k:
            continue
        c = min(max(q[i], -r), r)
        codes.append(min(1023, max(0, round_half_away((c + r) / (2 * r) * 1023))))
    return (k << 30) | (codes[0] << 20) | (codes[1] << 10) | codes[2]


def unpack_rotation(u: int) -> tuple:
    """32-bit smallest three -> unit quaternion (x, y, z, w)."""
    r = ROT_R
    k = (u >> 30) & 3
    kept = [((u >> s) & 1023) / 1023 * (2 * r) - r for s in (20, 10, 0)]
    d = math.sqrt(max(0.0, 1 - sum(c * c for c in kept)))
    q = kept[:k] + [d] + kept[k:]
    n = math.sqrt(sum(c * c for c in q))
    return tuple(c / n for c in q)


# --------------------------------------------------------------------------- state and records


@dataclass(frozen=True)
class State:
    """A quantized entity state: the transform and the fields' wire values."""
    pos: tuple = (0, 0, 0)
    rot: int = 0
    vel: tuple = (0, 0, 0)
    fields: tuple = ()


@dataclass(frozen=True)
class Spawn:
    id: int
    kind: int
    state: State
    op = "spawn"


@dataclass(frozen=True)
class Despawn:
    id: int
    op = "despawn"


@dataclass(frozen=True)
class Delta:
    """A delta as read: the differences, to be applied to a baseline of a known kind."""
    id: int
    age: int
    pos: Optional[tuple] = None           # three differences, or None (unchanged)
    rot_full: Optional[int] = None        # a new packed rotation
    rot_diff: Optional[tuple] = None      # three component differences (same dropped index)
    vel: Optional[tuple] = None
    fields_len: Optional[int] = None      # None: no fields section or '0'; else its length
    fields_bits: int = 0                  # the section's mask and values, LSB first
    op = "delta"

    def baseline_tick(self, tick: int) -> int:
        return tick - self.age

    def field_mask(self, kind: Kind) -> Optional[int]:
        """The section's mask if the section applies to the kind, else None."""
        if self.fields_len is None:
            return 0
        nf = len(kind.fields)
        if self.fields_len < nf:
            return None
        mask = self.fields_bits & ((1 << nf) - 1)
        if mask == 0:
            return None
        want = nf + sum(f.width for i, f in enumerate(kind.fields) if mask >> i & 1)
        if want != self.fields_len:
            return None
        return mask

    def apply(self, base: State, kind: Kind) -> State:
        """The state this delta gives from `base`; raises CannotApply."""
        pos, rot, vel, fields = base.pos, base.rot, base.vel, base.fields
        if self.pos is not None:
            if not kind.has_position:
                raise CannotApply("position of a kind without one")
            pos = tuple(b + d for b, d in zip(pos, self.pos))
            if not all(POS_MIN <= v <= POS_MAX for v in pos):
                raise CannotApply("position out of range")
        if self.rot_full is not None or self.rot_diff is not None:
            if not kind.has_rotation:
                raise CannotApply("rotation of a kind without one")
            if self.rot_full is not None:
                rot = self.rot_full
            else:
                comps = [(rot >> s) & 1023 for s in (20, 10, 0)]
                comps = [c + d for c, d in zip(comps, self.rot_diff)]
                if not all(0 <= c <= 1023 for c in comps):
                    raise CannotApply("rotation component out of range")
                rot = (rot & 0xC0000000) | (comps[0] << 20) | (comps[1] << 10) | comps[2]
        if self.vel is not None:
            if not kind.has_velocity:
                raise CannotApply("velocity of a kind without one")
            vel = tuple(b + d for b, d in zip(vel, self.vel))
            if not all(VEL_MIN <= v <= VEL_MAX for v in vel):
                raise CannotApply("velocity out of range")
        if self.fields_len is not None:
            mask = self.field_mask(kind)
            if mask is None:
                raise CannotApply("fields section does not fit the kind")
            if len(fields) != len(kind.fields):
                raise CannotApply("baseline of another kind")
            bits = self.fields_bits >> len(kind.fields)
            new = list(fields)
            for i, f in enumerate(kind.fields):
                if mask >> i & 1:
                    w = f.width
                    v = bits & ((1 << w) - 1)
                    bits >>= w
                    if not f.valid_wire(v):
                        raise CannotApply(f"field {f.name}: value {v} out of range")
                    new[i] = v
            fields = tuple(new)
        return State(pos, rot, vel, fields)


def changed_fields(kind: Kind, base: State, new: State) -> list:
    """Names of the fields whose value differs from the baseline's."""
    return [f.name for f, a, b in zip(kind.fields, base.fields, new.fields) if a != b]


Record = Union[Spawn, Delta, Despawn]


# --------------------------------------------------------------------------- messages


@dataclass(frozen=True)
class Snapshot:
    tick: int
    server_time_ms: int
    seq: int
    flags: int
    input_seq: Optional[int]
    records: tuple
    type = T_SNAPSHOT

    @property
    def last(self) -> bool:
        return bool(self.flags & FLAG_LAST)

    @property
    def reset(self) -> bool:
        return bool(self.flags & FLAG_RESET)


@dataclass(frozen=True)
class Reset:
    tick: int
    type = T_RESET


@dataclass(frozen=True)
class Close:
    code: int
    reason: str
    type = T_CLOSE


@dataclass(frozen=True)
class Hello:
    schema_hash: int
    token: bytes = b""                          # the connect token, if any (1 to 255 bytes)
    type = T_HELLO


@dataclass(frozen=True)
class Ack:
    latest: int
    received: int
    last_applied_tick: int
    resync: bool = False
    need_full: tuple = ()
    type = T_ACK


@dataclass(frozen=True)
class Ping:
    client_time_ms: int
    last_applied_tick: int
    type = T_PING


@dataclass(frozen=True)
class Command:
    seq: int
    tick: int
    payload: bytes = b""
    type = T_COMMAND


Message = Union[Snapshot, Reset, Close, Hello, Ack, Ping, Command]


def _as_bytes(data) -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise Malformed(f"not bytes: {type(data).__name__}")


def message_type(data: bytes) -> int:
    data = _as_bytes(data)
    if not data:
        raise Malformed("empty message")
    b = data[0]
    if b >> 4 != VERSION:
        raise Malformed(f"protocol version {b >> 4}")
    t = b & 15
    if not T_SNAPSHOT <= t <= T_CLOSE:
        raise Malformed(f"unknown message type {t}")
    return t


def decode_message(data: bytes, schema: Optional[Schema] = None) -> Message:
    """Decodes any message. `schema` is needed for SNAPSHOT (default: no schema)."""
    data = _as_bytes(data)
    t = message_type(data)
    r = BitReader(data, 8)
    if t == T_SNAPSHOT:
        return _decode_snapshot(r, schema if schema is not None else _DEFAULT_SCHEMA)
    if t == T_RESET:
        m = Reset(r.read(32))
    elif t == T_CLOSE:
        code = r.read(32)
        n = r.read(8)
        raw = bytes(r.read(8) for _ in range(n))
        try:
            reason = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise Malformed("reason is not UTF-8") from None
        m = Close(code, reason)
    elif t == T_HELLO:
        h = r.read(64)
        token = b""
        if r.remaining > 0:
            n = r.read(8)
            if n == 0:
                raise Malformed("HELLO token of 0 bytes")
            token = bytes(r.read(8) for _ in range(n))
        m = Hello(h, token)
    elif t == T_ACK:
        latest = r.read(16)
        received = r.read(64)
        lat = r.read(32)
        flags = r.read(8)
        if flags & ~ACK_FLAG_RESYNC:
            raise Malformed("unknown ACK flags")
        n = r.read(8)
        if n > MAX_NEED_FULL:
            raise Malformed("more than 32 NeedFull ids")
        m = Ack(latest, received, lat, bool(flags & ACK_FLAG_RESYNC),
                tuple(r.read(16) for _ in range(n)))
    elif t == T_PING:
        m = Ping(r.read(32), r.read(32))
    else:  # T_COMMAND
        seq = r.read(16)
        tick = r.read(32)
        n = r.read(8)
        m = Command(seq, tick, bytes(r.read(8) for _ in range(n)))
    r.finish()
    return m


def decode_server_message(data: bytes, schema: Optional[Schema] = None) -> Message:
    """Decodes a message a client may receive: SNAPSHOT, RESET or CLOSE."""
    t = message_type(data)
    if t not in SERVER_TYPES:
        raise Malformed(f"message type {t} is not sent by a server")
    return decode_message(data, schema)


def decode_snapshot(data: bytes, schema: Optional[Schema] = None) -> Snapshot:
    if message_type(data) != T_SNAPSHOT:
        raise Malformed("not a SNAPSHOT")
    return decode_message(data, schema)


def _read_id(r: BitReader) -> int:
    return r.read(16) if r.bit() else r.read(12)


def _read_pos_diff(r: BitReader) -> int:
    if not r.bit():
        return 0
    if not r.bit():
        return unzigzag(r.read(4))
    if not r.bit():
        return unzigzag(r.read(8))
    if not r.bit():
        return unzigzag(r.read(12))
    return unzigzag(r.read(19))


def _read_vel_diff(r: BitReader) -> int:
    if not r.bit():
        return 0
    if not r.bit():
        return unzigzag(r.read(4))
    if not r.bit():
        return unzigzag(r.read(8))
    return unzigzag(r.read(15))


def _read_rot_diff(r: BitReader) -> int:
    if not r.bit():
        return unzigzag(r.read(3))
    if not r.bit():
        return unzigzag(r.read(6))
    return unzigzag(r.read(11))


def _decode_snapshot(r: BitReader, schema: Schema) -> Snapshot:
    tick = r.read(32)
    stime = r.read(32)
    seq = r.read(16)
    flags = r.read(8)
    if flags & ~(FLAG_LAST | FLAG_RESET | FLAG_INPUT_ACK):
        raise Malformed("unknown SNAPSHOT flags")
    input_seq = r.read(16) if flags & FLAG_INPUT_ACK else None
    records = []
    while True:
        op = r.read(2)
        if op == OP_END:
            break
        eid = _read_id(r)
        if op == OP_SPAWN:
            kid = r.read(8)
            kind = schema.kind(kid)
            if kind is None:
                raise Malformed(f"spawn of unknown kind {kid}")
            pos, rot, vel = (0, 0, 0), 0, (0, 0, 0)
            if kind.has_position:
                pos = tuple(r.read(POS_BITS) + POS_MIN for _ in range(3))
            if kind.has_rotation:
                rot = r.read(32)
            if kind.has_velocity and r.bit():
                vel = tuple(r.read(VEL_BITS) + VEL_MIN for _ in range(3))
            fields = []
            for f in kind.fields:
                v = r.read(f.width)
                if not f.valid_wire(v):
                    raise Malformed(f"spawn of {eid}: field {f.name} value {v} out of range")
                fields.append(v)
            records.append(Spawn(eid, kid, State(pos, rot, vel, tuple(fields))))
        elif op == OP_DELTA:
            age = (r.read(10) if r.bit() else r.read(4)) + 1
            pos = tuple(_read_pos_diff(r) for _ in range(3)) if r.bit() else None
            rot_full = rot_diff = None
            if r.bit():
                if r.bit():
                    rot_diff = tuple(_read_rot_diff(r) for _ in range(3))
                else:
                    rot_full = r.read(32)
            vel = tuple(_read_vel_diff(r) for _ in range(3)) if r.bit() else None
            flen, fbits = None, 0
            if schema.has_fields and r.bit():
                flen = r.read(11) if r.bit() else r.read(6)
                fbits = r.read(flen)
            records.append(Delta(eid, age, pos, rot_full, rot_diff, vel, flen, fbits))
        else:
            records.append(Despawn(eid))
    r.finish()
    return Snapshot(tick, stime, seq, flags, input_seq, tuple(records))


# ---- encoders


def _type_byte(t: int) -> int:
    return (VERSION << 4) | t


def encode_hello(schema_hash: int, token: bytes = b"") -> bytes:
    if len(token) > MAX_TOKEN_BYTES:
        raise ValueError("connect token over 255 bytes")
    out = struct.pack("<BQ", _type_byte(T_HELLO), schema_hash & M64)
    if token:
        out += bytes([len(token)]) + bytes(token)
    return out


def encode_ack(latest: int, received: int, last_applied_tick: int, resync: bool = False,
               need_full: Sequence[int] = ()) -> bytes:
    if len(need_full) > MAX_NEED_FULL:
        raise ValueError("more than 32 NeedFull ids")
    out = struct.pack("<BHQIBB", _type_byte(T_ACK), latest & M16, received & M64,
                      last_applied_tick & M32, ACK_FLAG_RESYNC if resync else 0, len(need_full))
    return out + b"".join(struct.pack("<H", i) for i in need_full)


def encode_ping(client_time_ms: int, last_applied_tick: int) -> bytes:
    return struct.pack("<BII", _type_byte(T_PING), client_time_ms & M32, last_applied_tick & M32)


def encode_command(seq: int, tick: int, payload: bytes = b"") -> bytes:
    payload = bytes(payload)
    if len(payload) > 255:
        raise ValueError("COMMAND payload over 255 bytes")
    return struct.pack("<BHIB", _type_byte(T_COMMAND), seq & M16, tick & M32, len(payload)) + payload


def encode_reset(tick: int) -> bytes:
    return struct.pack("<BI", _type_byte(T_RESET), tick)


def encode_close(code: int, reason: str) -> bytes:
    b = reason.encode("utf-8")
    if len(b) > 255:
        raise ValueError("reason over 255 bytes")
    return struct.pack("<BIB", _type_byte(T_CLOSE), code, len(b)) + b


def encode_message(m: Message, schema: Optional[Schema] = None) -> bytes:
    if isinstance(m, Hello):
        return encode_hello(m.schema_hash, m.token)
    if isinstance(m, Ack):
        return encode_ack(m.latest, m.received, m.last_applied_tick, m.resync, m.need_full)
    if isinstance(m, Ping):
        return encode_ping(m.client_time_ms, m.last_applied_tick)
    if isinstance(m, Command):
        return encode_command(m.seq, m.tick, m.payload)
    if isinstance(m, Reset):
        return encode_reset(m.tick)
    if isinstance(m, Close):
        return encode_close(m.code, m.reason)
    raise TypeError("use SnapshotWriter for SNAPSHOT")


class SnapshotWriter:
    """Builds a SNAPSHOT the way the spec says a server does (shortest codes). For tests."""

    def __init__(self, schema: Schema, tick: int, server_time_ms: int, seq: int, flags: int,
                 input_seq: Optional[int] = None):
        self.schema = schema
        self.tick = tick
        w = self.w = BitWriter()
        if bool(flags & FLAG_INPUT_ACK) != (input_seq is not None):
            raise ValueError("input_seq goes with FlagInputAck")
        w.write(_type_byte(T_SNAPSHOT), 8)
        w.write(tick, 32)
        w.write(server_time_ms, 32)
        w.write(seq, 16)
        w.write(flags, 8)
        if input_seq is not None:
            w.write(input_seq, 16)

    def _id(self, eid: int) -> None:
        if eid < 4096:
            self.w.bits("0")
            self.w.write(eid, 12)
        else:
            self.w.bits("1")
            self.w.write(eid, 16)

    def spawn(self, eid: int, kind_id: int, st: State) -> None:
        kind = self.schema.kinds[kind_id]
        w = self.w
        w.write(OP_SPAWN, 2)
        self._id(eid)
        w.write(kind_id, 8)
        if kind.has_position:
            for v in st.pos:
                w.write(v - POS_MIN, POS_BITS)
        if kind.has_rotation:
            w.write(st.rot, 32)
        if kind.has_velocity:
            if st.vel == (0, 0, 0):
                w.bits("0")
            else:
                w.bits("1")
                for v in st.vel:
                    w.write(v - VEL_MIN, VEL_BITS)
        for f, v in zip(kind.fields, st.fields):
            w.write(v, f.width)

    def despawn(self, eid: int) -> None:
        self.w.write(OP_DESPAWN, 2)
        self._id(eid)

    @staticmethod
    def _pos_code(d: int) -> tuple:
        z = zigzag(d)
        if z == 0:
            return ("0", None, 0)
        for prefix, n in (("10", 4), ("110", 8), ("1110", 12), ("1111", 19)):
            if z < (1 << n):
                return (prefix, z, n)
        raise ValueError("position difference too large")

    @staticmethod
    def _vel_code(d: int) -> tuple:
        z = zigzag(d)
        if z == 0:
            return ("0", None, 0)
        for prefix, n in (("10", 4), ("110", 8), ("111", 15)):
            if z < (1 << n):
                return (prefix, z, n)
        raise ValueError("velocity difference too large")

    @staticmethod
    def _rot_code(d: int) -> tuple:
        z = zigzag(d)
        for prefix, n in (("0", 3), ("10", 6), ("11", 11)):
            if z < (1 << n):
                return (prefix, z, n)
        raise ValueError("rotation difference too large")

    def _codes(self, codes) -> None:
        for prefix, v, n in codes:
            self.w.bits(prefix)
            if v is not None:
                self.w.write(v, n)

    def delta(self, eid: int, kind_id: int, baseline_tick: int, base: State, st: State) -> None:
        kind = self.schema.kinds[kind_id] if self.schema.kinds.get(kind_id) else Kind(0, "")
        w = self.w
        a = self.tick - baseline_tick
        if not 1 <= a <= MAX_BASELINE_AGE:
            raise ValueError("baseline age out of range")
        w.write(OP_DELTA, 2)
        self._id(eid)
        if a <= 16:
            w.bits("0")
            w.write(a - 1, 4)
        else:
            w.bits("1")
            w.write(a - 1, 10)
        if st.pos == base.pos:
            w.bits("0")
        else:
            w.bits("1")
            self._codes([self._pos_code(n - b) for n, b in zip(st.pos, base.pos)])
        if st.rot == base.rot:
            w.bits("0")
        else:
            comp = None
            if st.rot >> 30 == base.rot >> 30:
                comp = [self._rot_code(((st.rot >> s) & 1023) - ((base.rot >> s) & 1023))
                        for s in (20, 10, 0)]
                if 2 + sum(len(p) + n for p, _, n in comp) >= 34:
                    comp = None
            if comp is not None:
                w.bits("11")
                self._codes(comp)
            else:
                w.bits("10")
                w.write(st.rot, 32)
        if st.vel == base.vel:
            w.bits("0")
        else:
            w.bits("1")
            self._codes([self._vel_code(n - b) for n, b in zip(st.vel, base.vel)])
        if self.schema.has_fields:
            changed = [i for i, (x, y) in enumerate(zip(base.fields, st.fields)) if x != y]
            if not changed:
                w.bits("0")
            else:
                nf = len(kind.fields)
                length = nf + sum(kind.fields[i].width for i in changed)
                w.bits("1")
                if length < 64:
                    w.bits("0")
                    w.write(length, 6)
                else:
                    w.bits("1")
                    w.write(length, 11)
                for i in range(nf):
                    w.write(1 if i in changed else 0, 1)
                for i in changed:
                    w.write(st.fields[i], kind.fields[i].width)

    def finish(self) -> bytes:
        self.w.write(OP_END, 2)
        return self.w.getvalue()


_DEFAULT_SCHEMA = Schema.default()


# --------------------------------------------------------------------------- client


def _seq_newer(a: int, b: int) -> bool:
    """a is newer than b, modulo 2^16."""
    return a != b and ((a - b) & M16) < 0x8000


@dataclass
class Entity:
    id: int
    kind: int = 0
    alive: bool = False
    newest_tick: int = 0                       # tick of the newest record (despawn too)
    history: list = dc_field(default_factory=list)   # [(tick, State)], in tick order

    def state_at(self, tick: int) -> Optional[State]:
        for t, s in self.history:
            if t == tick:
                return s
        return None

    @property
    def state(self) -> Optional[State]:
        """The state the client shows: its newest."""
        return self.history[-1][1] if self.history else None

    def add(self, tick: int, st: State) -> None:
        h = self.history
        for i, (t, _) in enumerate(h):
            if t == tick:
                h[i] = (tick, st)
                return
        i = len(h)
        while i > 0 and h[i - 1][0] > tick:
            i -= 1
        h.insert(i, (tick, st))
        if len(h) > HISTORY:
            del h[0]


class Client:
    """A client's protocol state, with no I/O.

    Feed it every received ENet packet with handle_message(); send hello(), ack(),
    ping(now_ms) and command(payload) when the loop says so (see ack_due).
    """

    def __init__(self, schema: Optional[Schema] = None):
        self.schema = schema if schema is not None else _DEFAULT_SCHEMA
        self.entities: dict = {}                # id -> Entity (alive, or a tombstone)
        self.need_full: list = []
        self.resync = False
        self.last_reset: Optional[int] = None
        self.last_applied_tick = 0
        self.latest_seq: Optional[int] = None
        self.received_mask = 0
        self.input_seq: Optional[int] = None
        self._input_seq_tick: Optional[int] = None
        self.command_seq = 0
        self.close: Optional[Close] = None
        self.ack_due = False
        self.errors = 0                          # malformed messages received

    # ---- outgoing

    def hello(self, token: bytes = b"") -> bytes:
        """The HELLO, carrying the connect token the matchmaker handed the player, if any."""
        return encode_hello(self.schema.hash, token)

    def ack(self) -> bytes:
        self.ack_due = False
        return encode_ack(self.latest_seq or 0, self.received_mask, self.last_applied_tick,
                          self.resync, self.need_full)

    def ping(self, now_ms: int) -> bytes:
        return encode_ping(now_ms & M32, self.last_applied_tick)

    def command(self, payload: bytes) -> bytes:
        out = encode_command(self.command_seq, self.last_applied_tick, payload)
        self.command_seq = (self.command_seq + 1) & M16
        return out

    # ---- view

    def alive(self) -> dict:
        """id -> Entity of the entities in view."""
        return {i: e for i, e in self.entities.items() if e.alive}

    def fields(self, eid: int) -> dict:
        e = self.entities[eid]
        return self.schema.kinds[e.kind].fields_meaning(e.state.fields)

    # ---- incoming

    def handle_message(self, data: bytes) -> Message:
        """Decodes and applies a server message; raises Malformed (nothing applied)."""
        try:
            m = decode_server_message(data, self.schema)
        except Malformed:
            self.errors += 1
            raise
        if isinstance(m, Snapshot):
            self.apply_snapshot(m)
        elif isinstance(m, Reset):
            self.reset(m.tick)
        elif isinstance(m, Close):
            self.close = m
        return m

    def reset(self, tick: int) -> None:
        if self.last_reset is not None and tick <= self.last_reset:
            return
        self.last_reset = tick
        for eid in [i for i, e in self.entities.items() if e.newest_tick < tick]:
            del self.entities[eid]
        for e in self.entities.values():
            e.history = [(t, s) for t, s in e.history if t >= tick]
        self.need_full.clear()
        self.resync = False

    def _note_seq(self, seq: int) -> None:
        if self.latest_seq is None:
            self.latest_seq, self.received_mask = seq, 0
        elif _seq_newer(seq, self.latest_seq):
            d = (seq - self.latest_seq) & M16
            self.received_mask = ((self.received_mask << d) | (1 << (d - 1))) & M64
            self.latest_seq = seq
        elif seq != self.latest_seq:
            i = ((self.latest_seq - seq) & M16) - 1
            if i < 64:
                self.received_mask |= 1 << i

    def _want_full(self, eid: int) -> None:
        if eid in self.need_full:
            return
        if len(self.need_full) >= MAX_NEED_FULL:
            if not self.resync:
                self.resync = True
                self.ack_due = True
            return
        self.need_full.append(eid)
        self.ack_due = True

    def _got_full(self, eid: int) -> None:
        if eid in self.need_full:
            self.need_full.remove(eid)

    def apply_snapshot(self, snap: Snapshot) -> None:
        self._note_seq(snap.seq)
        self.ack_due = True
        t = snap.tick
        if snap.reset:
            self.reset(t)
        if self.last_reset is not None and t < self.last_reset:
            return                                   # older than the last reset: ignored
        if snap.input_seq is not None and (self._input_seq_tick is None or t >= self._input_seq_tick):
            self.input_seq, self._input_seq_tick = snap.input_seq, t
        for rec in snap.records:
            self._apply_record(t, rec)
        if t > self.last_applied_tick:
            self.last_applied_tick = t

    def _apply_record(self, t: int, rec: Record) -> None:
        e = self.entities.get(rec.id)
        stale = e is not None and t < e.newest_tick
        if isinstance(rec, Spawn):
            if stale:
                if e.alive and e.kind == rec.kind:
                    e.add(t, rec.state)
                return
            self.entities[rec.id] = Entity(rec.id, rec.kind, True, t, [(t, rec.state)])
            self._got_full(rec.id)
        elif isinstance(rec, Despawn):
            if stale:
                return
            if e is None:
                e = self.entities[rec.id] = Entity(rec.id)
            e.alive, e.newest_tick, e.history = False, t, []
            self._got_full(rec.id)
        else:
            if e is None or not e.alive:
                if not stale:
                    self._want_full(rec.id)
                return
            base = e.state_at(rec.baseline_tick(t))
            kind = self.schema.kinds[e.kind]
            try:
                if base is None:
                    raise CannotApply("baseline not in history")
                st = rec.apply(base, kind)
            except CannotApply:
                if not stale:
                    self._want_full(rec.id)
                return
            e.add(t, st)
            if not stale:
                e.newest_tick = t
