"""Drives the C library through ctypes, as a foreign FFI (P/Invoke, a GDExtension) would.

It loads build/libnetfleet.so (or $NETFLEET_LIB), registers the golden vectors' schema as a table
of structs built in Python, supplies its own allocator as callbacks, feeds a client the golden
SNAPSHOT and CLOSE vectors, and reads the view through the typed accessors.
"""

import ctypes as C
import json
import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.environ.get("NETFLEET_LIB", os.path.join(HERE, "..", "build", "libnetfleet.so"))
VECTORS = os.path.join(HERE, "..", "..", "..", "gameserver", "protocol", "testdata", "golden", "vectors.json")

FIELD_TYPES = {"uint": 1, "int": 2, "bool": 3, "enum": 4, "float": 5, "bytes": 6}
PARTS = {"position": 1, "rotation": 2, "velocity": 4}


class FieldDef(C.Structure):
    _fields_ = [("name", C.c_char_p), ("type", C.c_int), ("bits", C.c_uint32), ("enum_count", C.c_uint32),
                ("enum_values", C.POINTER(C.c_char_p)), ("min", C.c_double), ("max", C.c_double),
                ("step", C.c_double), ("size", C.c_uint32)]


class KindDef(C.Structure):
    _fields_ = [("id", C.c_uint8), ("parts", C.c_uint8), ("name", C.c_char_p),
                ("fields", C.POINTER(FieldDef)), ("field_count", C.c_uint32)]


ALLOC = C.CFUNCTYPE(C.c_void_p, C.c_void_p, C.c_size_t)
FREE = C.CFUNCTYPE(None, C.c_void_p, C.c_void_p, C.c_size_t)


class Allocator(C.Structure):
    _fields_ = [("alloc", ALLOC), ("free", FREE), ("user", C.c_void_p)]


class ClientConfig(C.Structure):
    _fields_ = [("schema", C.c_void_p), ("allocator", C.POINTER(Allocator)),
                ("initial_entities", C.c_uint32), ("max_entities", C.c_uint32)]


class Transform(C.Structure):
    _fields_ = [("pos", C.c_int32 * 3), ("rot", C.c_uint32), ("vel", C.c_int32 * 3)]


class Entity(C.Structure):
    _fields_ = [("id", C.c_uint16), ("kind", C.c_uint8), ("tick", C.c_uint32), ("t", Transform),
                ("fields", C.POINTER(C.c_uint32)), ("field_words", C.c_uint32)]


class Stats(C.Structure):
    _fields_ = [(n, C.c_uint64) for n in ("packets", "bytes", "resets", "malformed", "records_applied",
                                          "records_stale", "records_unapplied", "records_dropped")] + \
               [("last_age_ms", C.c_int32)]


def load():
    lib = C.CDLL(LIB)
    P, u8p = C.c_void_p, C.POINTER(C.c_uint8)
    sig = {
        "nf_schema_create": (C.c_int, [C.POINTER(KindDef), C.c_uint32, C.POINTER(Allocator), C.POINTER(P)]),
        "nf_schema_destroy": (None, [P]),
        "nf_schema_hash": (C.c_uint64, [P]),
        "nf_schema_field_index": (C.c_int, [P, C.c_uint8, C.c_char_p]),
        "nf_client_create": (C.c_int, [C.POINTER(ClientConfig), C.POINTER(P)]),
        "nf_client_destroy": (None, [P]),
        "nf_client_handle": (C.c_int, [P, u8p, C.c_size_t, C.c_int64]),
        "nf_client_hello": (C.c_int, [P, u8p, C.c_size_t, u8p, C.c_size_t]),
        "nf_client_ack": (C.c_int, [P, u8p, C.c_size_t]),
        "nf_client_entity": (C.c_int, [P, C.c_uint16, C.POINTER(Entity)]),
        "nf_client_entity_count": (C.c_uint32, [P]),
        "nf_client_need_full": (C.c_int, [P, C.POINTER(C.c_int)]),
        "nf_client_closed": (C.c_int, [P, C.POINTER(C.c_uint32), C.POINTER(C.c_char_p)]),
        "nf_client_stats_get": (None, [P, C.POINTER(Stats)]),
        "nf_client_memory": (C.c_size_t, [P]),
        "nf_entity_float": (C.c_int, [P, C.POINTER(Entity), C.c_int, C.POINTER(C.c_double)]),
        "nf_entity_int": (C.c_int, [P, C.POINTER(Entity), C.c_int, C.POINTER(C.c_int32)]),
        "nf_entity_uint": (C.c_int, [P, C.POINTER(Entity), C.c_int, C.POINTER(C.c_uint32)]),
        "nf_entity_bool": (C.c_int, [P, C.POINTER(Entity), C.c_int, C.POINTER(C.c_int)]),
        "nf_entity_enum": (C.c_int, [P, C.POINTER(Entity), C.c_int, C.POINTER(C.c_uint32), C.POINTER(C.c_char_p)]),
        "nf_entity_bytes": (C.c_int, [P, C.POINTER(Entity), C.c_int, u8p, C.c_size_t]),
        "nf_close_name": (C.c_char_p, [C.c_uint32]),
        "nf_close_meaning": (C.c_char_p, [C.c_uint32]),
        "nf_error_string": (C.c_char_p, [C.c_int]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    return lib


def buf(b):
    return (C.c_uint8 * max(1, len(b))).from_buffer_copy(bytes(b) or b"\0")


class CtypesTest(unittest.TestCase):
    def setUp(self):
        self.lib = load()
        with open(VECTORS) as f:
            self.golden = json.load(f)
        self.vectors = {v["name"]: v for v in self.golden["vectors"]}
        # The allocator, in Python: every block the library takes and gives back is counted.
        self.blocks = {}
        self.alloc_cb = ALLOC(self._alloc)
        self.free_cb = FREE(self._free)
        self.allocator = Allocator(self.alloc_cb, self.free_cb, None)
        self.schema = self._register(self.golden["schema"])

    def _alloc(self, _user, size):
        block = C.create_string_buffer(size)
        addr = C.addressof(block)
        self.blocks[addr] = (block, size)
        return addr

    def _free(self, _user, ptr, size):
        block, want = self.blocks.pop(ptr)
        self.assertEqual(size, want)

    def _register(self, schema):
        """The schema as the C table: kinds and fields built in Python."""
        self.keep = []
        kinds = (KindDef * len(schema["kinds"]))()
        for i, k in enumerate(schema["kinds"]):
            fields = (FieldDef * max(1, len(k["fields"])))()
            for j, f in enumerate(k["fields"]):
                fd = fields[j]
                fd.name = f["name"].encode()
                fd.type = FIELD_TYPES[f["type"]]
                fd.bits = f.get("bits", 0)
                fd.size = f.get("size", 0)
                fd.min, fd.max, fd.step = f.get("min", 0), f.get("max", 0), f.get("step", 0)
                if "values" in f:
                    vals = (C.c_char_p * len(f["values"]))(*[v.encode() for v in f["values"]])
                    self.keep.append(vals)
                    fd.enum_count, fd.enum_values = len(f["values"]), vals
            self.keep.append(fields)
            kinds[i] = KindDef(k["id"], sum(PARTS[p] for p in k["parts"]), k["name"].encode(), fields,
                               len(k["fields"]))
        out = C.c_void_p()
        rc = self.lib.nf_schema_create(kinds, len(schema["kinds"]), C.pointer(self.allocator), C.byref(out))
        self.assertEqual(rc, 0, self.lib.nf_error_string(rc))
        return out

    def tearDown(self):
        self.lib.nf_schema_destroy(self.schema)
        self.assertEqual(self.blocks, {}, "every block the library allocated was freed")

    def test_client_through_ctypes(self):
        lib = self.lib
        self.assertEqual(lib.nf_schema_hash(self.schema), int(self.golden["schemaHash"], 16))
        cfg = ClientConfig(self.schema, C.pointer(self.allocator), 0, 0)
        client = C.c_void_p()
        self.assertEqual(lib.nf_client_create(C.byref(cfg), C.byref(client)), 0)
        try:
            hello = (C.c_uint8 * 300)()
            n = lib.nf_client_hello(client, None, 0, hello, 300)
            self.assertEqual(bytes(hello[:n]).hex(), self.vectors["HELLO"]["hex"])

            v = self.vectors["SNAPSHOT with fields"]
            pkt = bytes.fromhex(v["hex"])
            self.assertEqual(lib.nf_client_handle(client, buf(pkt), len(pkt), 0), 1)
            records = v["snapshot"]["records"]
            gone = {r["id"] for r in records if r["op"] == "despawn"}
            spawns = [r for r in records if r["op"] == "spawn" and r["id"] not in gone]
            self.assertEqual(lib.nf_client_entity_count(client), len(spawns))
            gone_entity = Entity()
            for i in gone:
                self.assertEqual(lib.nf_client_entity(client, i, C.byref(gone_entity)), -7)
            # The packet's deltas name baselines the client never held: full state is asked for.
            need = {r["id"] for r in records if r["op"] == "delta"}
            resync = C.c_int()
            self.assertEqual(lib.nf_client_need_full(client, C.byref(resync)), len(need))

            for r in spawns:
                e = Entity()
                self.assertEqual(lib.nf_client_entity(client, r["id"], C.byref(e)), 0)
                self.assertEqual(e.kind, r["kind"])
                self.assertEqual(list(e.t.pos), r["state"]["pos"])
                self.assertEqual(e.t.rot, int(r["state"]["rot"], 16))
                self.assertEqual([e.fields[i] for i in range(e.field_words)], r["state"].get("words", []))
                kind = next(k for k in self.golden["schema"]["kinds"] if k["id"] == r["kind"])
                for f in kind["fields"]:
                    idx = lib.nf_schema_field_index(self.schema, r["kind"], f["name"].encode())
                    want = r["state"]["fields"][f["name"]]
                    t = f["type"]
                    if t == "float":
                        got = C.c_double()
                        lib.nf_entity_float(client, C.byref(e), idx, C.byref(got))
                    elif t == "int":
                        got = C.c_int32()
                        lib.nf_entity_int(client, C.byref(e), idx, C.byref(got))
                    elif t == "uint":
                        got = C.c_uint32()
                        lib.nf_entity_uint(client, C.byref(e), idx, C.byref(got))
                    elif t == "bool":
                        got = C.c_int()
                        lib.nf_entity_bool(client, C.byref(e), idx, C.byref(got))
                        want = int(want)
                    elif t == "enum":
                        index, name = C.c_uint32(), C.c_char_p()
                        lib.nf_entity_enum(client, C.byref(e), idx, C.byref(index), C.byref(name))
                        self.assertEqual(name.value.decode(), want)
                        continue
                    else:
                        out = (C.c_uint8 * 16)()
                        size = lib.nf_entity_bytes(client, C.byref(e), idx, out, 16)
                        self.assertEqual(bytes(out[:size]).hex(), want)
                        continue
                    self.assertEqual(got.value, want, f["name"])

            ack = (C.c_uint8 * 128)()
            n = lib.nf_client_ack(client, ack, 128)
            self.assertEqual(n, 17 + 2 * len(need))
            self.assertEqual(ack[0], 0x13)

            close = bytes.fromhex(self.vectors["CLOSE"]["hex"])
            self.assertEqual(lib.nf_client_handle(client, buf(close), len(close), 0), 7)
            code, reason = C.c_uint32(), C.c_char_p()
            self.assertEqual(lib.nf_client_closed(client, C.byref(code), C.byref(reason)), 1)
            self.assertEqual((code.value, reason.value.decode()), (4004, self.vectors["CLOSE"]["close"]["reason"]))
            self.assertEqual(lib.nf_close_name(4004), b"schema")
            self.assertEqual(lib.nf_close_name(4006), b"token invalid")

            junk = b"\x11\x00"
            self.assertEqual(lib.nf_client_handle(client, buf(junk), len(junk), 0), -1)
            st = Stats()
            lib.nf_client_stats_get(client, C.byref(st))
            self.assertEqual((st.packets, st.malformed), (1, 1))
            self.assertEqual(lib.nf_client_memory(client), sum(s for _, s in self.blocks.values())
                             - self._schema_bytes())
        finally:
            lib.nf_client_destroy(client)

    def _schema_bytes(self):
        # The schema is the one block allocated before the client: the smallest address is not
        # guaranteed, so it is found as the block nf_schema_create returned.
        return self.blocks[self.schema.value][1]


if __name__ == "__main__":
    unittest.main()
