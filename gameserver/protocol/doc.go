// Package protocol owns netfleet's game wire format, shared by the game server and by clients
// (load bots, tests, Go game clients): message framing, the bit-packed little-endian bitstream,
// quantization of positions, rotations and velocities, the schema a game declares its replicated
// state in, and the encoders and decoders of every message. docs/protocol.md is the complete
// specification, precise enough to write a client in another language from, and
// testdata/golden/vectors.json holds encoded messages with their meaning, which the tests check
// in both directions.
//
// It is pure: no I/O, no clock, no transport. It imports nothing from netfleet, so that a client
// can be built on it alone.
//
// # Framing
//
// Every message starts with one byte: the protocol version in the high nibble and the message
// type in the low nibble. Server to client: SNAPSHOT, RESET and CLOSE. Client to server: HELLO
// (the first message, naming the client's schema by its hash), ACK, PING and COMMAND. A session
// ends with ENet disconnect data carrying a close code (CloseGoingAway, CloseAbuse,
// CloseGameError, CloseStalled, CloseNoPing, CloseHandshake, CloseRefused, CloseSchema, the
// connect-token refusals CloseTokenMissing to CloseTokenReplayed, and the
// codes a game chooses, CloseGameMin to CloseGameMax); a refusal sends a CLOSE with the reason
// first.
//
// # Bit order
//
// Fields are packed least significant bit first into bytes taken in order, so byte-sized fields
// at byte-aligned offsets read like ordinary little-endian integers. A message is padded with
// zero bits to a whole byte; decoders refuse non-zero padding and trailing bytes.
//
// # Schemas
//
// A Schema lists a game's entity kinds: the parts of the transform each has (position, rotation,
// velocity) and its typed fields (Uint, Int, Bool, Enum, Float, Bytes). Validate refuses a bad
// declaration with errors naming the kind and the field; Compile makes the Layout that encoders
// and decoders follow; Hash is the schema's identity on the wire. A game that declares no schema
// has TransformSchema: kinds 1 to 255, each with the whole transform and no fields.
//
// # Quantization
//
// Positions are fixed point at 1/64 m (PosUnitsPerMeter) in 18 bits per axis: the world spans
// ±2048 m on every axis. Velocities are 1/64 m/s in 14 bits per axis (±128 m/s). Rotations are
// smallest-three quaternions: a 2-bit index of the dropped (largest) component and the other
// three at 10 bits each over [-1/√2, 1/√2], 32 bits in all. State holds the quantized values; the
// server replicates State and the field words exactly, so a client's view equals the server's
// quantized state.
//
// # SNAPSHOT
//
// Header (96 bits, byte-aligned): type byte, server tick (u32), server wall time (unix
// milliseconds, low 32 bits), per-session packet sequence (u16), flags (u8), and with
// FlagInputAck the sequence of the newest COMMAND the game applied (u16). Then entity records,
// each a 2-bit op and an entity id, ended by the end op:
//
//   - spawn: kind (u8), the kind's transform parts and every field; it replaces whatever the
//     client holds for the id;
//   - delta: the age of the baseline (packet tick minus baseline tick, 1..MaxBaselineAge), the
//     transform parts that differ from that baseline, small differences in fewer bits, and, in
//     a schema with fields, the fields that changed;
//   - despawn: the entity leaves the client's view.
//
// A packet never splits a record and applies on its own: a client can apply any packet without
// any other packet of the same tick, given the baselines it holds. Entity ids are slot numbers
// below MaxEntities; a spawn starts a new incarnation of an id. Clients apply a record only if it
// is not older than what they already hold for that id (see the client package).
//
// # Baselines
//
// A client keeps the last HistoryDepth states it received per entity. The server deltas only
// against a state the client has acknowledged and that it has sent fewer than HistoryDepth-1 newer
// states of since, so the baseline is still in the client's history. A delta the client still
// cannot resolve is reported back in the client's next ACKs (NeedFull) and the server answers
// with a spawn.
package protocol
