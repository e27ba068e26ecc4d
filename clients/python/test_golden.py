"""Checks netfleet.py against the golden vectors of gameserver/protocol/testdata/golden.

Run: python3 -m unittest discover -s clients/python -v   (from the repository root)
"""

import json
import math
import os
import random
import unittest

import netfleet as nf

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "..", "..", "gameserver", "protocol", "testdata", "golden",
                       "vectors.json")

with open(VECTORS) as fh:
    GOLDEN = json.load(fh)
FILE_SCHEMA = nf.Schema.from_json(GOLDEN["schema"])
NO_SCHEMA = nf.Schema.default()


def vector_schema(vec):
    return FILE_SCHEMA if vec.get("schema") == "file" else NO_SCHEMA


def kind_of(schema, kind_id):
    """The kind a record applies to. In the no-schema vectors deltas say kind 0 (the decoder
    cannot know it); every kind there is alike (whole transform, no field)."""
    if schema is NO_SCHEMA:
        return schema.kinds[kind_id or 1]
    return schema.kinds[kind_id]


def state_from_json(o, kind):
    fields = kind.fields_from_meaning(o["fields"]) if "fields" in o else ()
    return nf.State(tuple(o["pos"]), int(o["rot"], 16), tuple(o["vel"]), fields)


def meaning_json(kind, st):
    """The fields of a state as the vectors write them."""
    out = {}
    for name, v in kind.fields_meaning(st.fields).items():
        out[name] = v.hex() if isinstance(v, bytes) else v
    return out


def vectors_of(key):
    return [v for v in GOLDEN["vectors"] if key in v]


class TestSchema(unittest.TestCase):
    def test_file_schema_hash(self):
        self.assertEqual("%016x" % FILE_SCHEMA.hash, GOLDEN["schemaHash"])

    def test_no_schema_hash(self):
        self.assertEqual("%016x" % NO_SCHEMA.hash, "233344e50a0e2ce7")

    def test_widths(self):
        for k in GOLDEN["schema"]["kinds"]:
            kind = FILE_SCHEMA.kinds[k["id"]]
            for fj, f in zip(k["fields"], kind.fields):
                self.assertEqual(f.width, fj["width"], f.name)

    def test_canonical_prefix(self):
        c = NO_SCHEMA.canonical()
        self.assertEqual(c[:18], b"netfleet schema 1\0")
        self.assertEqual(c[18:22], (255).to_bytes(4, "little"))
        self.assertEqual(c[22:24], bytes([1, 7]))

    def test_bad_schemas(self):
        with self.assertRaises(ValueError):
            nf.Schema([nf.Kind(0, "zero")])
        with self.assertRaises(ValueError):
            nf.Schema([nf.Kind(1, "a"), nf.Kind(1, "b")])
        with self.assertRaises(ValueError):
            nf.Field("x", nf.FT_UINT, bits=33).validate()
        with self.assertRaises(ValueError):
            nf.Field("x", nf.FT_ENUM, values=("one",)).validate()


class TestGoldenVectors(unittest.TestCase):
    def decode(self, vec):
        return nf.decode_message(bytes.fromhex(vec["hex"]), vector_schema(vec))

    def test_every_vector_has_a_check(self):
        known = {"hello", "close", "reset", "ping", "ack", "command", "snapshot"}
        for vec in GOLDEN["vectors"]:
            self.assertTrue(known & set(vec), vec["name"])

    def test_hello(self):
        for vec in vectors_of("hello"):
            with self.subTest(vec["name"]):
                m = self.decode(vec)
                self.assertIsInstance(m, nf.Hello)
                h = int(vec["hello"]["schemaHash"], 16)
                token = bytes.fromhex(vec["hello"].get("token", ""))
                self.assertEqual(m.schema_hash, h)
                self.assertEqual(m.token, token)
                self.assertEqual(h, FILE_SCHEMA.hash)
                self.assertEqual(nf.encode_hello(h, token).hex(), vec["hex"])
                self.assertEqual(nf.Client(FILE_SCHEMA).hello(token).hex(), vec["hex"])

    def test_close(self):
        for vec in vectors_of("close"):
            with self.subTest(vec["name"]):
                m = self.decode(vec)
                self.assertEqual(m, nf.Close(vec["close"]["code"], vec["close"]["reason"]))
                self.assertEqual(nf.encode_close(m.code, m.reason).hex(), vec["hex"])

    def test_reset(self):
        for vec in vectors_of("reset"):
            with self.subTest(vec["name"]):
                m = self.decode(vec)
                self.assertEqual(m, nf.Reset(vec["reset"]["tick"]))
                self.assertEqual(nf.encode_reset(m.tick).hex(), vec["hex"])

    def test_ping(self):
        for vec in vectors_of("ping"):
            with self.subTest(vec["name"]):
                p = vec["ping"]
                m = self.decode(vec)
                self.assertEqual(m, nf.Ping(p["clientTimeMs"], p["lastAppliedTick"]))
                self.assertEqual(nf.encode_ping(p["clientTimeMs"], p["lastAppliedTick"]).hex(),
                                 vec["hex"])

    def test_ack(self):
        for vec in vectors_of("ack"):
            with self.subTest(vec["name"]):
                a = vec["ack"]
                m = self.decode(vec)
                want = nf.Ack(a["latest"], int(a["received"], 16), a["lastAppliedTick"],
                              a["resync"], tuple(a["needFull"]))
                self.assertEqual(m, want)
                self.assertEqual(nf.encode_message(want).hex(), vec["hex"])

    def test_command(self):
        for vec in vectors_of("command"):
            with self.subTest(vec["name"]):
                c = vec["command"]
                m = self.decode(vec)
                want = nf.Command(c["seq"], c["tick"], bytes.fromhex(c["payload"]))
                self.assertEqual(m, want)
                self.assertEqual(nf.encode_command(c["seq"], c["tick"],
                                                   bytes.fromhex(c["payload"])).hex(), vec["hex"])

    def test_snapshot_decode(self):
        for vec in vectors_of("snapshot"):
            with self.subTest(vec["name"]):
                schema = vector_schema(vec)
                s = vec["snapshot"]
                m = self.decode(vec)
                self.assertIsInstance(m, nf.Snapshot)
                self.assertEqual(m.tick, s["tick"])
                self.assertEqual(m.server_time_ms, s["serverTimeMs"])
                self.assertEqual(m.seq, s["seq"])
                self.assertEqual(m.flags, s["flags"])
                self.assertEqual(m.input_seq, s.get("inputSeq"))
                self.assertEqual(len(m.records), len(s["records"]))
                for i, (rec, rj) in enumerate(zip(m.records, s["records"])):
                    with self.subTest(record=i):
                        self.check_record(schema, m.tick, rec, rj)

    def check_record(self, schema, tick, rec, rj):
        self.assertEqual(rec.op, rj["op"])
        self.assertEqual(rec.id, rj["id"])
        if rj["op"] == "despawn":
            return
        kind = kind_of(schema, rj["kind"])
        want = state_from_json(rj["state"], kind)
        if rj["op"] == "spawn":
            self.assertEqual(rec.kind, rj["kind"])
            got = rec.state
        else:
            self.assertEqual(rec.baseline_tick(tick), rj["baselineTick"])
            base = state_from_json(rj["base"], kind)
            if "words" in rj["base"]:
                self.assertEqual(kind.words(base.fields), rj["base"]["words"])
            got = rec.apply(base, kind)
            changed = rj.get("fieldsChanged", [])
            self.assertEqual(nf.changed_fields(kind, base, got), changed)
            mask = rec.field_mask(kind)
            self.assertEqual([f.name for i, f in enumerate(kind.fields) if mask >> i & 1], changed)
        self.assertEqual(got, want)
        self.assertEqual(got.pos, tuple(rj["state"]["pos"]))
        self.assertEqual("%08x" % got.rot, rj["state"]["rot"])
        self.assertEqual(got.vel, tuple(rj["state"]["vel"]))
        if "fields" in rj["state"]:
            self.assertEqual(meaning_json(kind, got), rj["state"]["fields"])
            self.assertEqual(kind.words(got.fields), rj["state"]["words"])
        else:
            self.assertEqual(got.fields, ())

    def test_snapshot_encode(self):
        """Encoding the meaning with the shortest codes gives the vector's bytes."""
        for vec in vectors_of("snapshot"):
            with self.subTest(vec["name"]):
                schema = vector_schema(vec)
                s = vec["snapshot"]
                w = nf.SnapshotWriter(schema, s["tick"], s["serverTimeMs"], s["seq"], s["flags"],
                                      s.get("inputSeq"))
                for rj in s["records"]:
                    if rj["op"] == "despawn":
                        w.despawn(rj["id"])
                        continue
                    kind = kind_of(schema, rj["kind"])
                    st = state_from_json(rj["state"], kind)
                    if rj["op"] == "spawn":
                        w.spawn(rj["id"], rj["kind"], st)
                    else:
                        w.delta(rj["id"], kind.id, rj["baselineTick"],
                                state_from_json(rj["base"], kind), st)
                self.assertEqual(w.finish().hex(), vec["hex"])

    def test_worked_example(self):
        """docs/protocol.md, Entity records, worked example."""
        data = bytes.fromhex("11 50 c3 00 00 40 e2 01 00 4d 00 01 41 00 32 87 01".replace(" ", ""))
        m = nf.decode_message(data)
        self.assertEqual((m.tick, m.server_time_ms, m.seq, m.flags), (50000, 123456, 77, 1))
        self.assertEqual(m.records, (nf.Delta(8, 3, pos=(7, 0, 0)),))
        w = nf.SnapshotWriter(NO_SCHEMA, 50000, 123456, 77, nf.FLAG_LAST)
        w.delta(8, 1, 49997, nf.State((0, 0, 0), 0, (0, 0, 0)), nf.State((7, 0, 0), 0, (0, 0, 0)))
        self.assertEqual(w.finish(), data)


class TestLongerCodes(unittest.TestCase):
    """A decoder accepts any code whose value fits, not only the shortest."""

    def packet(self, body):
        w = nf.BitWriter()
        for v, n in ((0x11, 8), (50000, 32), (0, 32), (0, 16), (1, 8)):
            w.write(v, n)
        body(w)
        w.write(3, 2)
        return w.getvalue()

    def test_long_forms(self):
        def body(w):
            w.write(nf.OP_DELTA, 2)
            w.bits("1"); w.write(8, 16)                      # long id for a short one
            w.bits("1"); w.write(2, 10)                      # long age for 3
            w.bits("1")                                      # position
            w.bits("1111"); w.write(nf.zigzag(7), 19)
            w.bits("1110"); w.write(nf.zigzag(-1), 12)
            w.bits("110"); w.write(0, 8)                     # zero, coded long
            w.bits("11")                                     # rotation components
            w.bits("11"); w.write(nf.zigzag(1), 11)
            w.bits("10"); w.write(0, 6)
            w.bits("0"); w.write(nf.zigzag(-2), 3)
            w.bits("1")                                      # velocity
            w.bits("111"); w.write(nf.zigzag(3), 15)
            w.bits("110"); w.write(nf.zigzag(-3), 8)
            w.bits("10"); w.write(0, 4)
            w.write(nf.OP_SPAWN, 2)
            w.bits("1"); w.write(9, 16)
            w.write(4, 8)
            for _ in range(3):
                w.write(131072, 18)
            w.write(nf.IDENTITY_ROTATION, 32)
            w.bits("1")                                      # zero velocity, coded long
            for _ in range(3):
                w.write(8192, 14)
        m = nf.decode_message(self.packet(body))
        d, sp = m.records
        self.assertEqual((d.id, d.age), (8, 3))
        base = nf.State((0, 0, 0), nf.IDENTITY_ROTATION, (0, 0, 0))
        got = d.apply(base, NO_SCHEMA.kinds[1])
        self.assertEqual(got, nf.State((7, -1, 0), 0xE0080200 + (1 << 20) - 2, (3, -3, 0)))
        self.assertEqual(sp, nf.Spawn(9, 4, nf.State((0, 0, 0), nf.IDENTITY_ROTATION, (0, 0, 0))))


class TestBits(unittest.TestCase):
    def test_lsb_first(self):
        w = nf.BitWriter()
        w.bits("110")
        w.write(0x2D, 6)
        self.assertEqual(w.getvalue(), bytes([0b01101011, 0b1]))
        r = nf.BitReader(w.getvalue())
        self.assertEqual([r.read(1), r.read(1), r.read(1), r.read(6)], [1, 1, 0, 0x2D])
        r.finish()

    def test_zigzag(self):
        self.assertEqual([nf.zigzag(v) for v in (0, -1, 1, -2, 2)], [0, 1, 2, 3, 4])
        for v in range(-300000, 300000, 997):
            self.assertEqual(nf.unzigzag(nf.zigzag(v)), v)

    def test_padding_and_trailing(self):
        with self.assertRaises(nf.Malformed):
            nf.decode_message(bytes.fromhex("120403020100"))       # a byte after the end
        with self.assertRaises(nf.Malformed):
            nf.decode_message(bytes.fromhex("1100000000000000000000000007"))  # padding bits
        with self.assertRaises(nf.Malformed):
            nf.decode_message(bytes.fromhex("12040302"))           # too short
        for b in ("", "00", "21", "10", "18", "1f"):
            with self.assertRaises(nf.Malformed):
                nf.decode_message(bytes.fromhex(b + "04030201"))

    def test_round_half_away(self):
        self.assertEqual([nf.round_half_away(x) for x in (0.5, 1.5, -0.5, -1.5, 0.49999999999999994)],
                         [1, 2, -1, -2, 0])


class TestQuantization(unittest.TestCase):
    def test_position(self):
        q = nf.quantize_position
        self.assertEqual([q(0), q(1), q(-1), q(1 / 128), q(-1 / 128), q(1e9), q(-1e9)],
                         [0, 64, -64, 1, 0, 131071, -131072])
        self.assertEqual([q(math.nan), q(math.inf), q(-math.inf)], [-131072, 131071, -131072])
        self.assertEqual(nf.dequantize(96), 1.5)

    def test_velocity(self):
        q = nf.quantize_velocity
        self.assertEqual([q(2), q(200), q(-200), q(math.nan)], [128, 8191, -8192, -8192])

    def test_rotation_identity(self):
        self.assertEqual(nf.pack_rotation((0, 0, 0, 1)), 0xE0080200)
        self.assertEqual(nf.pack_rotation((0, 0, 0, -1)), 0xE0080200)
        for bad in ((0, 0, 0, 0), (math.nan, 0, 0, 1), (math.inf, 0, 0, 1)):
            self.assertEqual(nf.pack_rotation(bad), 0xE0080200)
        x, y, z, w = nf.unpack_rotation(0xE0080200)
        self.assertAlmostEqual(w, 1, places=5)

    def test_rotation_round_trip(self):
        rnd = random.Random(7)
        for _ in range(2000):
            q = [rnd.gauss(0, 1) for _ in range(4)]
            n = math.sqrt(sum(c * c for c in q))
            q = [c / n for c in q]
            u = nf.pack_rotation(q)
            p = nf.unpack_rotation(u)
            dot = abs(sum(a * b for a, b in zip(p, q)))
            self.assertGreater(dot, 0.99999)

    def test_every_word_unpacks_to_unit(self):
        rnd = random.Random(8)
        for u in [0, 0xFFFFFFFF] + [rnd.getrandbits(32) for _ in range(2000)]:
            q = nf.unpack_rotation(u)
            self.assertAlmostEqual(sum(c * c for c in q), 1.0, places=9)
            self.assertTrue(all(math.isfinite(c) for c in q))


# --------------------------------------------------------------------------- client

S = FILE_SCHEMA
PLAYER = S.kinds[1]
ROCK = S.kinds[9]


def player_state(x=0, health=100.0, team="red"):
    return nf.State((x, 0, 0), nf.IDENTITY_ROTATION, (0, 0, 0), PLAYER.fields_from_meaning(
        {"health": health, "ammo": 5, "team": team, "crouched": False, "score": 0,
         "name": "000000000000"}))


class Server:
    """Builds packets for a client, tracking seq."""

    def __init__(self, schema=S):
        self.schema = schema
        self.seq = 0

    def packet(self, tick, records=(), flags=nf.FLAG_LAST, input_seq=None):
        if input_seq is not None:
            flags |= nf.FLAG_INPUT_ACK
        w = nf.SnapshotWriter(self.schema, tick, 1000 + tick, self.seq, flags, input_seq)
        self.seq = (self.seq + 1) & 0xFFFF
        for r in records:
            if r[0] == "spawn":
                w.spawn(*r[1:])
            elif r[0] == "delta":
                w.delta(*r[1:])
            else:
                w.despawn(r[1])
        return w.finish()


class TestClient(unittest.TestCase):
    def setUp(self):
        self.c = nf.Client(S)
        self.s = Server()

    def feed(self, tick, records=(), **kw):
        return self.c.handle_message(self.s.packet(tick, records, **kw))

    def test_spawn_delta_ack(self):
        a, b = player_state(0), player_state(5, health=50)
        self.feed(10, [("spawn", 1, 1, a)])
        self.feed(11, [("delta", 1, 1, 10, a, b)])
        e = self.c.entities[1]
        self.assertEqual(e.state, b)
        self.assertEqual(self.c.fields(1)["health"], 50.0)
        self.assertEqual([t for t, _ in e.history], [10, 11])
        ack = nf.decode_message(self.c.ack())
        self.assertEqual(ack, nf.Ack(1, 1, 11, False, ()))
        self.assertFalse(self.c.ack_due)

    def test_stale_delta_joins_history(self):
        a, b, c, d = (player_state(x) for x in (0, 1, 2, 3))
        p11 = self.s.packet(11, [("delta", 1, 1, 10, a, b)])
        self.feed(10, [("spawn", 1, 1, a)])
        self.feed(12, [("delta", 1, 1, 10, a, c)])
        self.c.handle_message(p11)                       # late: stale
        e = self.c.entities[1]
        self.assertEqual(e.state, c)                     # the view is unchanged
        self.assertEqual([t for t, _ in e.history], [10, 11, 12])
        self.feed(13, [("delta", 1, 1, 11, b, d)])      # against the stale state
        self.assertEqual(e.state, d)
        self.assertEqual(self.c.need_full, [])

    def test_tombstone(self):
        a = player_state(0)
        late = self.s.packet(11, [("spawn", 1, 1, a)])
        late_delta = self.s.packet(11, [("delta", 1, 1, 10, a, player_state(4))])
        self.feed(10, [("spawn", 1, 1, a)])
        self.feed(12, [("despawn", 1)])
        self.c.handle_message(late)
        self.c.handle_message(late_delta)
        self.assertFalse(self.c.entities[1].alive)
        self.assertEqual(self.c.alive(), {})
        self.assertEqual(self.c.need_full, [])
        self.feed(13, [("spawn", 1, 1, a)])             # a new incarnation
        self.assertTrue(self.c.entities[1].alive)

    def test_need_full(self):
        a = player_state(0)
        self.feed(10, [("delta", 7, 1, 9, a, player_state(1))])    # unknown entity
        self.assertEqual(self.c.need_full, [7])
        self.assertTrue(self.c.ack_due)
        self.assertEqual(nf.decode_message(self.c.ack()).need_full, (7,))
        self.feed(11, [("spawn", 7, 1, a)])
        self.assertEqual(self.c.need_full, [])
        self.feed(13, [("delta", 7, 1, 12, a, player_state(1))])   # baseline not held
        self.assertEqual(self.c.need_full, [7])
        self.feed(14, [("despawn", 7)])
        self.assertEqual(self.c.need_full, [])

    def test_history_of_16(self):
        states = [player_state(x) for x in range(40)]
        self.feed(100, [("spawn", 1, 1, states[0])])
        for i in range(1, 20):
            self.feed(100 + i, [("delta", 1, 1, 100 + i - 1, states[i - 1], states[i])])
        e = self.c.entities[1]
        self.assertEqual(len(e.history), 16)
        self.assertEqual(e.history[0][0], 104)
        self.feed(120, [("delta", 1, 1, 104, states[4], states[20])])
        self.assertEqual(self.c.need_full, [])
        self.feed(121, [("delta", 1, 1, 104, states[4], states[21])])  # 104 evicted now
        self.assertEqual(self.c.need_full, [1])

    def test_resync_over_32(self):
        a = player_state(0)
        self.feed(10, [("delta", i, 1, 9, a, a) for i in range(1, 34)])
        self.assertEqual(len(self.c.need_full), 32)
        self.assertTrue(self.c.resync)
        ack = nf.decode_message(self.c.ack())
        self.assertTrue(ack.resync)

    def test_reset(self):
        a = player_state(0)
        early = self.s.packet(20, [("spawn", 2, 1, a)], flags=nf.FLAG_LAST | nf.FLAG_RESET)
        old = self.s.packet(15, [("spawn", 3, 1, a)])
        self.feed(10, [("spawn", 1, 1, a), ("delta", 9, 1, 9, a, a)])
        self.assertEqual(self.c.need_full, [9])
        self.c.handle_message(early)                      # reset at 20 by the flag
        self.assertNotIn(1, self.c.entities)
        self.assertIn(2, self.c.entities)
        self.assertEqual(self.c.need_full, [])
        self.c.handle_message(nf.encode_reset(20))        # the same reset: nothing
        self.assertIn(2, self.c.entities)
        self.c.handle_message(old)                        # older than the reset: ignored
        self.assertNotIn(3, self.c.entities)
        self.feed(21, [("spawn", 3, 1, a)])
        self.c.handle_message(nf.encode_reset(21))        # 2's newest record is older
        self.assertNotIn(2, self.c.entities)
        self.assertIn(3, self.c.entities)

    def test_ack_window(self):
        c = nf.Client(S)
        for seq in (65534, 65535, 0, 2):
            c.apply_snapshot(nf.Snapshot(5, 0, seq, 1, None, ()))
        ack = nf.decode_message(c.ack())
        self.assertEqual(ack.latest, 2)
        self.assertEqual(ack.received, 0b1110)           # 0, 65535, 65534
        c.apply_snapshot(nf.Snapshot(5, 0, 1, 1, None, ()))
        self.assertEqual(nf.decode_message(c.ack()).received, 0b1111)
        c.apply_snapshot(nf.Snapshot(5, 0, 67, 1, None, ()))
        self.assertEqual(nf.decode_message(c.ack()).received, 0)   # 2 is out of the window
        c.apply_snapshot(nf.Snapshot(5, 0, 3, 1, None, ()))          # 67 - 1 - 63
        self.assertEqual(nf.decode_message(c.ack()).received, 1 << 63)
        c.apply_snapshot(nf.Snapshot(5, 0, 2, 1, None, ()))          # too old: not counted
        self.assertEqual(nf.decode_message(c.ack()).received, 1 << 63)

    def test_input_seq_and_command(self):
        self.feed(10, input_seq=4)
        late = self.s.packet(9, input_seq=3)
        self.feed(11, input_seq=5)
        self.c.handle_message(late)
        self.assertEqual(self.c.input_seq, 5)
        self.assertEqual(self.c.last_applied_tick, 11)
        m = nf.decode_message(self.c.command(b"\x01"))
        self.assertEqual((m.seq, m.tick, m.payload), (0, 11, b"\x01"))
        self.assertEqual(nf.decode_message(self.c.command(b"")).seq, 1)
        self.assertEqual(nf.decode_message(self.c.ping(1 << 40 | 5)), nf.Ping(5, 11))

    def test_close_and_client_types(self):
        self.c.handle_message(nf.encode_close(4004, "schema mismatch"))
        self.assertEqual(self.c.close.code, 4004)
        with self.assertRaises(nf.Malformed):
            self.c.handle_message(nf.encode_ping(1, 2))


def raw_delta(schema, eid, age, section_bits):
    """A packet of tick 100 with a delta of only a fields section, given as a bit string."""
    w = nf.BitWriter()
    for v, n in ((0x11, 8), (100, 32), (0, 32), (0, 16), (1, 8)):
        w.write(v, n)
    w.write(nf.OP_DELTA, 2)
    w.bits("0")
    w.write(eid, 12)
    w.bits("0")
    w.write(age - 1, 4)
    w.bits("000")
    w.bits(section_bits)
    w.write(3, 2)
    return w.getvalue()


def bits_of(v, n):
    return "".join("1" if v >> i & 1 else "0" for i in range(n))


class TestFieldsSection(unittest.TestCase):
    def client_with_scoreboard(self):
        c = nf.Client(S)
        w = nf.SnapshotWriter(S, 99, 0, 0, 1)
        w.spawn(3, 7, nf.State(fields=(1, 2, 3)))
        w.spawn(2, 2, nf.State(fields=(0, 0)))
        c.handle_message(w.finish())
        return c

    def test_section_applies(self):
        c = self.client_with_scoreboard()
        # length 3 + 12: mask '100' (red), red = 77
        c.handle_message(raw_delta(S, 3, 1, "1" + "0" + bits_of(15, 6) + "100" + bits_of(77, 12)))
        self.assertEqual(c.fields(3), {"red": 77, "blue": 2, "clock": 3})
        self.assertEqual(c.need_full, [])

    def test_long_length_code_accepted(self):
        c = self.client_with_scoreboard()
        c.handle_message(raw_delta(S, 3, 1, "1" + "1" + bits_of(15, 11) + "100" + bits_of(77, 12)))
        self.assertEqual(c.fields(3)["red"], 77)

    def test_sections_that_do_not_apply(self):
        for name, sec in (
            ("empty mask", "1" + "0" + bits_of(3, 6) + "000"),
            ("length 0", "1" + "0" + bits_of(0, 6)),
            ("length too long", "1" + "0" + bits_of(16, 6) + "100" + bits_of(77, 12) + "0"),
            ("length short", "1" + "0" + bits_of(2, 6) + "10"),
        ):
            with self.subTest(name):
                c = self.client_with_scoreboard()
                c.handle_message(raw_delta(S, 3, 1, sec))
                self.assertEqual(c.need_full, [3])
                self.assertEqual(c.fields(3), {"red": 1, "blue": 2, "clock": 3})

    def test_enum_out_of_range_in_delta(self):
        # player team is an enum of 3 values, 2 bits: index 3 is out of range
        c = nf.Client(S)
        w = nf.SnapshotWriter(S, 99, 0, 0, 1)
        w.spawn(1, 1, player_state())
        spawn = w.finish()
        c.handle_message(spawn)
        c.handle_message(raw_delta(S, 1, 1, "1" + "0" + bits_of(8, 6) + "001000" + "11"))
        self.assertEqual(c.need_full, [1])
        # float health: S = 200; 255 is over it
        c = nf.Client(S)
        c.handle_message(spawn)
        c.handle_message(raw_delta(S, 1, 1, "1" + "0" + bits_of(14, 6) + "100000" + bits_of(255, 8)))
        self.assertEqual(c.need_full, [1])

    def test_skips_section_of_unknown_entity(self):
        c = nf.Client(S)
        c.handle_message(raw_delta(S, 5, 1, "1" + "0" + bits_of(15, 6) + "100" + bits_of(77, 12)))
        self.assertEqual(c.need_full, [5])

    def test_spawn_out_of_range_is_malformed(self):
        w = nf.SnapshotWriter(S, 99, 0, 0, 1)
        w.spawn(2, 2, nf.State(fields=(0, 0)))
        good = w.finish()
        nf.decode_message(good, S)
        w = nf.SnapshotWriter(S, 99, 0, 0, 1)
        st = player_state()
        w.spawn(1, 1, nf.State(st.pos, st.rot, st.vel, (201,) + st.fields[1:]))   # health > S
        with self.assertRaises(nf.Malformed):
            nf.decode_message(w.finish(), S)
        w = nf.SnapshotWriter(S, 99, 0, 0, 1)
        w.spawn(1, 1, nf.State(st.pos, st.rot, st.vel, st.fields[:2] + (3,) + st.fields[3:]))
        with self.assertRaises(nf.Malformed):
            nf.decode_message(w.finish(), S)
        # an unknown kind
        with self.assertRaises(nf.Malformed):
            nf.decode_message(bytes.fromhex("116300000000000000000001") + bytes([0x04, 0x0c, 0]), S)

    def test_transform_out_of_range_in_delta(self):
        c = nf.Client(S)
        w = nf.SnapshotWriter(S, 99, 0, 0, 1)
        w.spawn(4, 9, nf.State((131071, 0, 0), 0xE0080200, (0, 0, 0)))
        c.handle_message(w.finish())
        w = nf.SnapshotWriter(S, 100, 0, 1, 1)
        w.delta(4, 9, 99, nf.State((131070, 0, 0), 0xE0080200, (0, 0, 0)),
                nf.State((131072, 0, 0), 0xE0080200, (0, 0, 0)))  # +2 from 131071
        c.handle_message(w.finish())
        self.assertEqual(c.need_full, [4])
        self.assertEqual(c.entities[4].state.pos, (131071, 0, 0))


class TestFuzz(unittest.TestCase):
    def check(self, data, schemas=(FILE_SCHEMA, NO_SCHEMA)):
        for schema in schemas:
            try:
                nf.decode_message(data, schema)
            except nf.Malformed:
                pass
            c = nf.Client(schema)
            try:
                c.handle_message(data)
            except nf.Malformed:
                pass
            c.ack()

    def test_random_bytes(self):
        rnd = random.Random(1)
        for _ in range(3000):
            n = rnd.randrange(0, 80)
            data = bytearray(rnd.getrandbits(8) for _ in range(n))
            if data and rnd.random() < 0.9:
                data[0] = 0x10 | rnd.randrange(0, 9)
            self.check(bytes(data))

    def test_bit_flips_of_every_vector(self):
        for vec in GOLDEN["vectors"]:
            data = bytes.fromhex(vec["hex"])
            with self.subTest(vec["name"]):
                for bit in range(len(data) * 8):
                    b = bytearray(data)
                    b[bit // 8] ^= 1 << (bit % 8)
                    self.check(bytes(b))
                for n in range(len(data)):
                    self.check(data[:n])
                self.check(data + b"\0")

    def seeded_client(self, vec):
        """A client holding every baseline the vector's deltas name, so that flipped deltas
        get applied."""
        schema = vector_schema(vec)
        c = nf.Client(schema)
        for rj in vec["snapshot"]["records"]:
            if rj["op"] != "delta":
                continue
            kind = kind_of(schema, rj["kind"])
            e = c.entities.setdefault(rj["id"], nf.Entity(rj["id"], kind.id, True, 0, []))
            e.add(rj["baselineTick"], state_from_json(rj["base"], kind))
            e.newest_tick = max(e.newest_tick, rj["baselineTick"])
        return c

    def test_bit_flips_with_baselines(self):
        rnd = random.Random(3)
        for vec in vectors_of("snapshot"):
            data = bytes.fromhex(vec["hex"])
            c = self.seeded_client(vec)
            c.handle_message(data)
            with self.subTest(vec["name"]):
                for bit in range(len(data) * 8):
                    for _ in range(3):
                        b = bytearray(data)
                        b[bit // 8] ^= 1 << (bit % 8)
                        if rnd.random() < 0.5:
                            extra = rnd.randrange(len(b) * 8)
                            b[extra // 8] ^= 1 << (extra % 8)
                        c = self.seeded_client(vec)
                        try:
                            c.handle_message(bytes(b))
                        except nf.Malformed:
                            pass
                        c.ack()

    def test_random_multi_bit_flips(self):
        rnd = random.Random(2)
        vecs = [bytes.fromhex(v["hex"]) for v in GOLDEN["vectors"]]
        for _ in range(3000):
            b = bytearray(rnd.choice(vecs))
            for _ in range(rnd.randrange(1, 6)):
                bit = rnd.randrange(len(b) * 8)
                b[bit // 8] ^= 1 << (bit % 8)
            self.check(bytes(b))


class TestQuantizationVectors(unittest.TestCase):
    """The quantization vectors: the formulas of docs/protocol.md, to the last bit."""

    def test_positions_and_velocities(self):
        q = GOLDEN["quantization"]
        for c in q["positions"]:
            self.assertEqual(nf.quantize_position(c["in"]), c["units"], c)
        for c in q["velocities"]:
            self.assertEqual(nf.quantize_velocity(c["in"]), c["units"], c)

    def test_pack(self):
        for c in GOLDEN["quantization"]["pack"]:
            self.assertEqual("%08x" % nf.pack_rotation(c["quat"]), c["packed"], c)

    def test_unpack(self):
        for c in GOLDEN["quantization"]["unpack"]:
            self.assertEqual(list(nf.unpack_rotation(int(c["packed"], 16))), c["quat"], c)


if __name__ == "__main__":
    unittest.main()
