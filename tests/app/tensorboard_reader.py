#!/usr/bin/python3
"""Reads a run's TensorBoard event file with code that shares nothing with the writer
(lib/log/tensorboard_writer.cpp): its own CRC-32C, TFRecord parsing, and protobuf (Debian's
python3-protobuf) over TensorBoard's public Event/Summary schema (event.proto, summary.proto:
the fields a scalar uses), declared here with the descriptor API. Checks every record's CRCs,
the file version record, and every (tag, step, value) against the run's --metrics-file.
Exit 0 when all agree; otherwise prints each problem and exits 1."""
import argparse
import glob
import json
import math
import os
import re
import socket
import struct
import sys

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto


def schema():
    """Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
    Summary { repeated Value value = 1; }  Value { string tag = 1; float simple_value = 2; string node_name = 7; }"""
    fd = descriptor_pb2.FileDescriptorProto(name="tb_subset.proto", package="tbsubset", syntax="proto3")
    summary = fd.message_type.add(name="Summary")
    value = summary.nested_type.add(name="Value")
    value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL)
    value.field.add(name="node_name", number=7, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    summary.field.add(name="value", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                      type_name=".tbsubset.Summary.Value")
    event = fd.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    event.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".tbsubset.Summary")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("tbsubset.Event"))


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def records(path, problems):
    data = open(path, "rb").read()
    pos, n = 0, 0
    while pos < len(data):
        if pos + 12 > len(data):
            problems.append(f"record {n}: truncated header at byte {pos}")
            return
        (length,) = struct.unpack_from("<Q", data, pos)
        (len_crc,) = struct.unpack_from("<I", data, pos + 8)
        if masked(crc32c(data[pos:pos + 8])) != len_crc:
            problems.append(f"record {n}: length CRC {len_crc:#x} is not the masked CRC-32C of the length")
            return
        start = pos + 12
        if start + length + 4 > len(data):
            problems.append(f"record {n}: truncated payload")
            return
        payload = data[start:start + length]
        (data_crc,) = struct.unpack_from("<I", data, start + length)
        if masked(crc32c(payload)) != data_crc:
            problems.append(f"record {n}: data CRC {data_crc:#x} is not the masked CRC-32C of the payload")
        yield payload
        pos = start + length + 4
        n += 1


def same_float(got, want):
    """got: a float32 from the file; want: the metrics file's %.9g double. The writer rounds the
    run's double to float32 (half an ulp); %.9g is within 5e-9 relative of it, so the float32
    of `want` is at most one float32 ulp from `got`."""
    w = np.float32(want)
    return abs(np.float32(got) - w) <= np.spacing(abs(w))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--world-size", type=int, required=True)
    ap.add_argument("--tensorboard-log-interval", type=int, default=1)
    ap.add_argument("--log-interval", type=int, default=1)
    ap.add_argument("--ppl", action="store_true")
    ap.add_argument("--memory", action="store_true")
    ap.add_argument("--world-size-tag", action="store_true")
    ap.add_argument("--timers", action="store_true")
    # With --timing-log-level: the phases expected as "<name>-time" at each log interval.
    ap.add_argument("--timer-tags", default="")
    # With --log-throughput: Megatron's "throughput" (TFLOP/s per GPU) beside iteration-time.
    ap.add_argument("--throughput", action="store_true")
    ap.add_argument("--no-loss-scale", action="store_true")
    ap.add_argument("--no-learning-rate", action="store_true")
    a = ap.parse_args()
    problems = []

    files = glob.glob(os.path.join(a.dir, "*"))
    if len(files) != 1:
        print(f"FAIL: expected one event file in {a.dir}, found {files}")
        return 1
    name = os.path.basename(files[0])
    if not re.fullmatch(r"events\.out\.tfevents\.\d{10}\." + re.escape(socket.gethostname()) + r"\.\d+\.\d+", name):
        problems.append(f"file name {name} is not events.out.tfevents.<seconds>.<host>.<pid>.<n>")

    Event = schema()
    got = {}
    for i, payload in enumerate(records(files[0], problems)):
        ev = Event()
        ev.ParseFromString(payload)
        if ev.SerializeToString() != payload:
            problems.append(f"record {i}: fields outside TensorBoard's schema or not canonically encoded")
        if i == 0:
            if ev.file_version != "brain.Event:2" or ev.wall_time <= 0 or ev.HasField("summary"):
                problems.append(f"record 0 is not Event{{wall_time, file_version 'brain.Event:2'}}: {ev}")
            continue
        if ev.wall_time <= 0 or len(ev.summary.value) != 1:
            problems.append(f"record {i}: not one scalar with a wall time: {ev}")
            continue
        v = ev.summary.value[0]
        got.setdefault((v.tag, ev.step), []).append(v.simple_value)

    # (tag, step) -> values in the order written. A step can repeat a tag only where the metrics
    # file repeats the record: the evaluation at the last iteration, when --eval-interval divides
    # it, and the end-of-training one (Megatron writes both).
    want = {}

    def put(key, value):
        want.setdefault(key, []).append(value)

    def both(tag, value, step, samples):
        put((tag, step), value)
        put((tag + " vs samples", samples), value)

    lines = [json.loads(l) for l in open(a.metrics) if l.strip()]
    for m in lines:
        it = m["iteration"]
        samples = it * a.batch_size
        if "split" in m:
            tag = "lm loss test" if m["split"] == "test" else "lm loss validation"
            if "set" in m:
                tag += " " + m["set"]
            both(tag, m["lm_loss"], it, samples)
            if a.ppl:
                both(tag + " ppl", math.exp(min(20.0, m["lm_loss"])), it, samples)
            continue
        if it % a.log_interval == 0 and a.timers:
            put(("iteration-time", it), None)  # timed on the writing rank: present and positive
            if a.throughput:
                put(("throughput", it), None)  # from that time: present and positive
            for t in filter(None, a.timer_tags.split(",")):
                put((t + "-time", it), None)  # the maximum over ranks: present and positive
        if it % a.tensorboard_log_interval:
            continue
        if not a.no_learning_rate:
            both("learning-rate", m["lr"], it, samples)
        both("batch-size", a.batch_size, it, samples)
        if not m["skipped"]:
            both("lm loss", m["lm_loss"], it, samples)
            if m["grad_norm"] is not None:
                both("grad-norm", m["grad_norm"], it, samples)
        if "num_zeros" in m:  # --log-num-zeros-in-grad: applied steps only
            both("num-zeros", m["num_zeros"], it, samples)
        if "params_norm" in m:  # --log-params-norm: after every step, skipped or not
            both("params-norm", m["params_norm"], it, samples)
        if not a.no_loss_scale:
            both("loss-scale", m["loss_scale"], it, samples)
        if a.world_size_tag:
            both("world-size", a.world_size, it, samples)
        if a.memory:
            for t in ("mem-allocated-bytes", "mem-max-allocated-bytes", "mem-resident-bytes"):
                put((t, it), None)  # this rank's own memory: present and positive

    for key in sorted(set(want) - set(got)):
        problems.append(f"missing: tag '{key[0]}' at step {key[1]}")
    for key in sorted(set(got) - set(want)):
        problems.append(f"unexpected: tag '{key[0]}' at step {key[1]} = {got[key]}")
    for key in sorted(set(got) & set(want)):
        if len(got[key]) != len(want[key]):
            problems.append(f"tag '{key[0]}' at step {key[1]}: {len(got[key])} values, the metrics file has {len(want[key])}")
            continue
        for g, w in zip(got[key], want[key]):
            check(key, g, w, problems)

    for p in problems:
        print("FAIL:", p)
    if not problems:
        print(f"tensorboard_reader: {sum(map(len, got.values()))} scalars in {name} agree with {a.metrics}")
    return 1 if problems else 0


def check(key, g, w, problems):
    if w is None:
        if not (g > 0 and math.isfinite(g)):
            problems.append(f"tag '{key[0]}' at step {key[1]} = {g}, expected a positive number")
    elif not same_float(g, w):
        problems.append(f"tag '{key[0]}' at step {key[1]} = {g!r}, metrics file has {w!r}")


if __name__ == "__main__":
    sys.exit(main())
