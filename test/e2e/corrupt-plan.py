#!/usr/bin/env python3
"""Damages a compiled plan on purpose, for the bad-input tests.

  corrupt-plan.py PLAN_DIR flip OFFSET          flip one byte of plan.moeplan
  corrupt-plan.py PLAN_DIR truncate BYTES       cut plan.moeplan to BYTES
  corrupt-plan.py PLAN_DIR identifier XXXX      set the file identifier (resealed)
  corrupt-plan.py PLAN_DIR version MAJOR MINOR  set format_major/minor (resealed)
  corrupt-plan.py PLAN_DIR drop-waits N         empty the waits of the N-th instruction
                                                that has any (resealed): streams race
  corrupt-plan.py PLAN_DIR set-replica I VALUE  rank 0's first expert_rows with replicas:
                                                its stack I's replica number := VALUE (resealed)
  corrupt-plan.py PLAN_DIR set-experts FIELD V  rank 0's first expert_rows: its ExpertsParams
                                                field `layer` or `stacked` := V (resealed)
  corrupt-plan.py PLAN_DIR set-view FIELD V     the first tensor that is rows of part 1 of
                                                another: its `base`, `part` or `parts` := V
                                                (resealed)
  corrupt-plan.py PLAN_DIR set-layout V         the first weight in panels: its `layout`
                                                := V (resealed)
  corrupt-plan.py PLAN_DIR set-group-kind I V   plan.groups[I]'s kind := V, a group whose
                                                kind is not the default (resealed)
  corrupt-plan.py PLAN_DIR weights-flip OFFSET  flip one byte of weights-0.bin
  corrupt-plan.py PLAN_DIR weights-truncate N   cut weights-0.bin to N bytes
  corrupt-plan.py PLAN_DIR old-checksums        as a plan before format 2.10: every weight's
                                                checksum := checksum64 of its bytes,
                                                weight_checksum := 0 (Checksum64), format
                                                2.9 (resealed)

"Resealed" edits recompute the trailer checksum, so that the runtime's later
checks (identifier, version) are the ones that fire. The checksum is written
here from its definition in runtime/src/Checksum.cpp, independently; it is
also the weights' checksum in plans before format 2.10.
"""
import struct
import sys

MASK = (1 << 64) - 1


def mix(h, word):
    h ^= (word * 0xbf58476d1ce4e5b9) & MASK
    h = ((h << 31) | (h >> 33)) & MASK
    return (h * 0x94d049bb133111eb) & MASK


def checksum64(data):
    h = 0x9e3779b97f4a7c15
    words = len(data) // 8
    for (w,) in struct.iter_unpack("<Q", data[:words * 8]):
        h = mix(h, w)
    tail = len(data) % 8
    if tail:
        w = int.from_bytes(data[words * 8:] + b"\0" * (8 - tail), "little")
        h = mix(h, w ^ (tail << 56))
    return mix(h, len(data))


def reseal(body):
    return body + b"MOEPSUM1" + struct.pack("<Q", checksum64(body))


def field(buf, table, index):
    """Position of field `index` of the table at `table`, or None if absent."""
    vtable = table - struct.unpack_from("<i", buf, table)[0]
    if 4 + 2 * index >= struct.unpack_from("<H", buf, vtable)[0]:
        return None
    offset = struct.unpack_from("<H", buf, vtable + 4 + 2 * index)[0]
    return table + offset if offset else None


def deref(buf, pos):
    """Follows the uoffset at `pos` (to a table, vector or string)."""
    return pos + struct.unpack_from("<I", buf, pos)[0]


# Field slots in plan.fbs (a union takes two: type and value).
PLAN_PROGRAMS, PROGRAM_INSTRUCTIONS, INSTRUCTION_PARAMS, INSTRUCTION_WAITS = 5, 1, 4, 7
OPPARAMS_EXPERTS, EXPERTS_PARAMS_REPLICA = 5, 10  # the union's member; its field
EXPERTS_PARAMS_FIELDS = {"stacked": 6, "layer": 7}
PLAN_TENSORS, TENSOR_VIEW_FIELDS = 3, {"base": 11, "part": 12, "parts": 13}
TENSOR_LAYOUT = 15
PLAN_GROUPS, GROUP_KIND = 12, 0
PLAN_WEIGHT_FILES, PLAN_WEIGHT_CHECKSUM, WEIGHT_FILE_PATH = 4, 11, 0
TENSOR_WEIGHT_FIELDS = {"storage": 3, "weight_file": 4, "offset": 5, "size": 6, "checksum": 7}


def rank0_instructions(body):
    """Position of rank 0's instruction vector."""
    plan = deref(body, 0)
    programs = deref(body, field(body, plan, PLAN_PROGRAMS))
    program = deref(body, programs + 4)
    return deref(body, field(body, program, PROGRAM_INSTRUCTIONS))


def rank0_experts_params(body, needs):
    """Rank 0's first ExpertsParams table that has field `needs`."""
    insts = rank0_instructions(body)
    for i in range(struct.unpack_from("<I", body, insts)[0]):
        inst = deref(body, insts + 4 + 4 * i)
        kind = field(body, inst, INSTRUCTION_PARAMS - 1)
        if kind is None or body[kind] != OPPARAMS_EXPERTS:
            continue
        params = deref(body, field(body, inst, INSTRUCTION_PARAMS))
        if field(body, params, needs):
            return params
    sys.exit(f"rank 0 has no expert_rows with ExpertsParams field {needs}")


def set_replica(body, index, value):
    params = rank0_experts_params(body, EXPERTS_PARAMS_REPLICA)
    replica = deref(body, field(body, params, EXPERTS_PARAMS_REPLICA))
    struct.pack_into("<i", body, replica + 4 + 4 * index, value)


def set_experts(body, name, value):
    params = rank0_experts_params(body, EXPERTS_PARAMS_FIELDS[name])
    struct.pack_into("<i", body, field(body, params, EXPERTS_PARAMS_FIELDS[name]), value)


def set_view(body, name, value):
    plan = deref(body, 0)
    tensors = deref(body, field(body, plan, PLAN_TENSORS))
    for i in range(struct.unpack_from("<I", body, tensors)[0]):
        tensor = deref(body, tensors + 4 + 4 * i)
        part = field(body, tensor, TENSOR_VIEW_FIELDS["part"])
        if part is not None and struct.unpack_from("<i", body, part)[0] == 1:
            kind = "<I" if name == "base" else "<i"
            struct.pack_into(kind, body, field(body, tensor, TENSOR_VIEW_FIELDS[name]), value)
            return
    sys.exit("the plan has no tensor that is rows of part 1")


def set_layout(body, value):
    plan = deref(body, 0)
    tensors = deref(body, field(body, plan, PLAN_TENSORS))
    for i in range(struct.unpack_from("<I", body, tensors)[0]):
        tensor = deref(body, tensors + 4 + 4 * i)
        layout = field(body, tensor, TENSOR_LAYOUT)
        if layout is not None and body[layout] != 0:
            body[layout] = value
            return
    sys.exit("the plan has no weight in panels")


def set_group_kind(body, index, value):
    plan = deref(body, 0)
    groups = deref(body, field(body, plan, PLAN_GROUPS))
    if index >= struct.unpack_from("<I", body, groups)[0]:
        sys.exit(f"the plan has no group {index}")
    kind = field(body, deref(body, groups + 4 + 4 * index), GROUP_KIND)
    if kind is None:
        sys.exit(f"group {index} has the default kind (absent); cannot set it in place")
    body[kind] = value


def scalar(body, table, index, kind, default=0):
    pos = field(body, table, index)
    return default if pos is None else struct.unpack_from(kind, body, pos)[0]


def set_version(body, major, minor):
    # Plan is the root table; format_major/minor are its fields 0 and 1.
    plan = deref(body, 0)
    for index, value in enumerate([major, minor]):
        pos = field(body, plan, index)
        if pos is None:
            sys.exit(f"field {index} is absent (default); cannot set it in place")
        struct.pack_into("<H", body, pos, value)


def old_checksums(body, plan_dir):
    plan = deref(body, 0)
    files = deref(body, field(body, plan, PLAN_WEIGHT_FILES))
    paths = []
    for i in range(struct.unpack_from("<I", body, files)[0]):
        name = deref(body, field(body, deref(body, files + 4 + 4 * i), WEIGHT_FILE_PATH))
        length = struct.unpack_from("<I", body, name)[0]
        paths.append(f"{plan_dir}/{body[name + 4:name + 4 + length].decode()}")
    tensors = deref(body, field(body, plan, PLAN_TENSORS))
    for i in range(struct.unpack_from("<I", body, tensors)[0]):
        tensor = deref(body, tensors + 4 + 4 * i)
        f = TENSOR_WEIGHT_FIELDS
        if scalar(body, tensor, f["storage"], "<B") != 0:
            continue  # not a weight
        offset, size = scalar(body, tensor, f["offset"], "<Q"), scalar(body, tensor, f["size"], "<Q")
        with open(paths[scalar(body, tensor, f["weight_file"], "<I")], "rb") as weights:
            weights.seek(offset)
            struct.pack_into("<Q", body, field(body, tensor, f["checksum"]),
                             checksum64(weights.read(size)))
    body[field(body, plan, PLAN_WEIGHT_CHECKSUM)] = 0
    set_version(body, 2, 9)


def drop_waits(body, n):
    insts = rank0_instructions(body)
    waiting = 0
    for i in range(struct.unpack_from("<I", body, insts)[0]):
        inst = deref(body, insts + 4 + 4 * i)
        pos = field(body, inst, INSTRUCTION_WAITS)
        if pos is None:
            continue
        waits = deref(body, pos)
        if struct.unpack_from("<I", body, waits)[0] == 0:
            continue
        if waiting == n:
            struct.pack_into("<I", body, waits, 0)  # an empty vector
            return
        waiting += 1
    sys.exit(f"the plan has {waiting} instructions with waits; cannot drop those of number {n}")


def main():
    d, cmd, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    plan_path = f"{d}/plan.moeplan"
    if cmd.startswith("weights-"):
        path = f"{d}/weights-0.bin"
        data = bytearray(open(path, "rb").read())
        if cmd == "weights-flip":
            data[int(args[0])] ^= 0xFF
        else:
            data = data[:int(args[0])]
        open(path, "wb").write(data)
        return
    data = bytearray(open(plan_path, "rb").read())
    body = data[:-16]
    if cmd == "flip":
        data[int(args[0])] ^= 0x01
    elif cmd == "truncate":
        data = data[:int(args[0])]
    elif cmd == "identifier":
        body[4:8] = args[0].encode()
        data = reseal(bytes(body))
    elif cmd == "drop-waits":
        drop_waits(body, int(args[0]))
        data = reseal(bytes(body))
    elif cmd == "set-replica":
        set_replica(body, int(args[0]), int(args[1]))
        data = reseal(bytes(body))
    elif cmd == "set-view":
        set_view(body, args[0], int(args[1]))
        data = reseal(bytes(body))
    elif cmd == "set-group-kind":
        set_group_kind(body, int(args[0]), int(args[1]))
        data = reseal(bytes(body))
    elif cmd == "set-layout":
        set_layout(body, int(args[0]))
        data = reseal(bytes(body))
    elif cmd == "set-experts":
        set_experts(body, args[0], int(args[1]))
        data = reseal(bytes(body))
    elif cmd == "version":
        set_version(body, int(args[0]), int(args[1]))
        data = reseal(bytes(body))
    elif cmd == "old-checksums":
        old_checksums(body, d)
        data = reseal(bytes(body))
    else:
        sys.exit(f"unknown command {cmd}")
    open(plan_path, "wb").write(data)


if __name__ == "__main__":
    main()
