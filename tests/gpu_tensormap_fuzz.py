"""ptxdsl's host tensor-map validator against the real driver (issue 7, item 2).

Random `TiledDesc`s, most of them a valid description with one rule broken on purpose, some
valid, some broken in several ways, go through `tensormap_desc.validate` (with the device's
compute capability) and through `cuTensorMapEncodeTiled`:

* ptxdsl accepts and the driver refuses: a bug (the accepted ones go through
  `TensorMap.from_desc`, the path users take). There must be none.
* ptxdsl refuses: every violation names a rule of `RULES` with a message.
* the driver accepts what ptxdsl refuses: tallied by the rules broken (printed; a rule the
  driver does not enforce must be justified by the documentation or relaxed).

Descriptions whose arrays are shorter than the rank (the `*_count` rules) are not sent to the
driver: it reads `rank` entries and would read past them.

Run: `python -m pytest -m gpu tests/gpu_tensormap_fuzz.py` (10,000 sets), or
`python tests/gpu_tensormap_fuzz.py 20000 [--seed S] [--json out.json]`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter

import attrs
import pytest

from ptxdsl.runtime.tensormap_desc import (
    MAX_BOX_BYTES,
    RULES,
    DataType,
    Interleave,
    L2Promotion,
    OobFill,
    Swizzle,
    TiledDesc,
    validate,
)

COUNT = 10_000
NOT_SENT = {"stride_count", "box_count", "element_stride_count"}
PACKED = [d for d in DataType if d.is_packed]
PLAIN = [d for d in DataType if not d.is_packed]


def _up(n: int, m: int) -> int:
    return -(-n // m) * m


def valid_desc(rng: random.Random, base: int) -> TiledDesc:
    """A description every rule accepts (on compute capability 9.0)."""
    dt = rng.choice(PLAIN)
    elem = dt.bits // 8
    rank = rng.randint(1, 5)
    interleave = Interleave.NONE
    if rank >= 3 and rng.random() < 0.25:
        interleave = rng.choice([Interleave.B16, Interleave.B32])
    if interleave is Interleave.B32:
        swizzle = Swizzle.B32
    else:
        swizzle = rng.choice([Swizzle.NONE, Swizzle.B32, Swizzle.B64, Swizzle.B128])
    span = swizzle.span_bytes if interleave is Interleave.NONE and swizzle.span_bytes else \
        256 * elem
    unit = max(16 // elem, 1)
    box0 = unit * rng.randint(1, max(min(256, span // elem) // unit, 1))
    dims = [rng.choice([rng.randint(1, 64), rng.randint(1, 4096), 2**32])] + [
        rng.randint(1, 300) for _ in range(rank - 1)]
    mult = 32 if interleave is Interleave.B32 else 16
    strides, row = [], _up(min(dims[0], 1 << 20) * elem, mult)
    for d in dims[1:]:
        strides.append(row)
        row = _up(row * d, mult)
        if row >= 1 << 39:
            row = mult
    boxes = [box0] + [rng.randint(1, 256) for _ in range(rank - 1)]
    es = [rng.choice([1, 1, 1, 2, 4, 8]) for _ in range(rank)]
    while _box_bytes(dt, boxes, es) > MAX_BOX_BYTES:   # fit an SM's shared memory
        i = max(range(1, rank), key=lambda j: boxes[j] // es[j])
        boxes[i] = max(1, boxes[i] // 2)
    oob = OobFill.NAN_REQUEST_ZERO_FMA if dt.is_float and rng.random() < 0.2 else OobFill.NONE
    align = 32 if interleave is Interleave.B32 else 16
    return TiledDesc(dt, base + align * rng.randint(0, 64), dims, strides, boxes, es,
                     interleave, swizzle, rng.choice(list(L2Promotion)), oob)


def _box_bytes(dt, boxes, es) -> int:
    n = [b // e for b, e in zip(boxes, es, strict=True)]
    prod = 1
    for x in n[1:]:
        prod *= x
    return dt.inner_bytes(n[0]) * prod


def _set(values, i, v):
    out = list(values)
    out[i] = v
    return out


def _elem(d: TiledDesc) -> int:
    return max(d.data_type.bits // 8, 1)


def _rank(r: random.Random, d: TiledDesc) -> TiledDesc:
    n = 6 if r.random() < .8 else 0
    return attrs.evolve(d, global_dim=[2] * n, global_strides=[16] * max(n - 1, 0),
                        box_dim=([16 // _elem(d)] + [2] * (n - 1)) if n else [],
                        element_strides=[1] * n)


def _outer(r: random.Random, d: TiledDesc) -> int:
    """An index other than 0 when there is one (dimension 0 has rules of its own)."""
    return r.randrange(1, d.rank) if d.rank > 1 else 0


# One mutation per rule of RULES that a compute-capability-9.0 device can see.
MUTATIONS = {
    "rank": _rank,
    "interleave_rank": lambda r, d: attrs.evolve(d, interleave=Interleave.B16)
    if d.rank < 3 else None,
    "address_align": lambda r, d: attrs.evolve(d, global_address=d.global_address + r.choice(
        [1, 4, 8, 16 if d.interleave is Interleave.B32 else 8])),
    "global_dim_range": lambda r, d: attrs.evolve(d, global_dim=_set(
        d.global_dim, r.randrange(d.rank), r.choice([0, 2**32 + 1, 2**40]))),
    "stride_count": lambda r, d: attrs.evolve(d, global_strides=list(d.global_strides)[:-1])
    if d.global_strides else None,
    "stride_multiple": lambda r, d: attrs.evolve(d, global_strides=_set(
        d.global_strides, r.randrange(d.rank - 1), d.global_strides[0] + r.choice([1, 8]))
    ) if d.global_strides else None,
    "stride_range": lambda r, d: attrs.evolve(d, global_strides=_set(
        d.global_strides, r.randrange(d.rank - 1), r.choice([2**40, 2**41 + 32])))
    if d.global_strides else None,
    "box_dim_range": lambda r, d: attrs.evolve(d, box_dim=_set(
        d.box_dim, _outer(r, d), r.choice([0, 257, 1024]))),
    "box_count": lambda r, d: attrs.evolve(d, box_dim=list(d.box_dim)[:-1]),
    "box_inner_bytes": lambda r, d: attrs.evolve(d, box_dim=_set(
        d.box_dim, 0, 16 // _elem(d) * r.randint(0, 3) + 1)) if _elem(d) < 16 else None,
    "element_stride_range": lambda r, d: attrs.evolve(d, element_strides=_set(
        d.element_strides, r.randrange(d.rank), r.choice([0, 9, 16]))),
    "element_stride_count": lambda r, d: attrs.evolve(
        d, element_strides=list(d.element_strides)[:-1]),
    "swizzle_span": lambda r, d: attrs.evolve(d, swizzle=Swizzle.B32, box_dim=_set(
        d.box_dim, 0, 48 // _elem(d))) if d.interleave is Interleave.NONE else None,
    "interleave32_swizzle": lambda r, d: attrs.evolve(d, swizzle=r.choice(
        [Swizzle.NONE, Swizzle.B64, Swizzle.B128])) if d.interleave is Interleave.B32 else None,
    "oob_fill_type": lambda r, d: attrs.evolve(d, oob_fill=OobFill.NAN_REQUEST_ZERO_FMA)
    if not d.data_type.is_float else None,
    "swizzle_atomicity_cc": lambda r, d: attrs.evolve(d, swizzle=r.choice(
        [Swizzle.B128_ATOM_32B, Swizzle.B128_ATOM_32B_FLIP_8B, Swizzle.B128_ATOM_64B]),
        box_dim=_set(d.box_dim, 0, 16 // _elem(d))) if d.interleave is Interleave.NONE
    else None,
    "box_bytes": lambda r, d: attrs.evolve(d, box_dim=[d.box_dim[0]] + [256] * (d.rank - 1),
                                           element_strides=[1] * d.rank)
    if d.rank >= 3 else None,
    "packed_cc": lambda r, d: attrs.evolve(d, data_type=r.choice(PACKED), box_dim=_set(
        d.box_dim, 0, 128), global_dim=_set(d.global_dim, 0, 256),
        global_address=_up(d.global_address, 32), swizzle=Swizzle.NONE,
        interleave=Interleave.NONE, oob_fill=OobFill.NONE),
}


def random_desc(rng: random.Random, base: int) -> tuple[TiledDesc, str]:
    """(description, how it was made): valid, one mutation, or several."""
    d = valid_desc(rng, base)
    roll = rng.random()
    if roll < 0.25:
        return d, "valid"
    names = rng.sample(sorted(MUTATIONS), 1 if roll < 0.85 else rng.randint(2, 3))
    for name in names:
        try:
            d2 = MUTATIONS[name](rng, d)
        except (ValueError, TypeError, IndexError):
            d2 = None
        d = d2 if d2 is not None else d
    return d, "+".join(names)


def driver_encode(desc: TiledDesc) -> str | None:
    """cuTensorMapEncodeTiled on `desc` as given (no ptxdsl check): None when the driver
    accepts, else the error name. Rank 1 passes one unused stride, as ptxdsl's encoder does
    (cuda.bindings turns an empty list into NULL, which the driver refuses)."""
    from cuda.bindings import driver as drv
    strides = list(desc.global_strides) or ([16] if desc.rank == 1 else [])
    try:
        res = drv.cuTensorMapEncodeTiled(
            drv.CUtensorMapDataType(int(desc.data_type)), desc.rank, desc.global_address,
            [drv.cuuint64_t(x) for x in desc.global_dim],
            [drv.cuuint64_t(x) for x in strides], [drv.cuuint32_t(x) for x in desc.box_dim],
            [drv.cuuint32_t(x) for x in desc.element_strides],
            drv.CUtensorMapInterleave(int(desc.interleave)),
            drv.CUtensorMapSwizzle(int(desc.swizzle)),
            drv.CUtensorMapL2promotion(int(desc.l2_promotion)),
            drv.CUtensorMapFloatOOBfill(int(desc.oob_fill)))
    except (ValueError, OverflowError, TypeError) as e:   # the binding refuses the values
        return f"binding:{type(e).__name__}"
    err = res[0]
    return None if int(err) == 0 else getattr(err, "name", str(err))


def row(desc: TiledDesc, rules, verdict) -> list:
    """One dump line: the description's fields, ptxdsl's rules, the driver's verdict."""
    return [int(desc.data_type), desc.global_address, list(desc.global_dim),
            list(desc.global_strides), list(desc.box_dim), list(desc.element_strides),
            int(desc.interleave), int(desc.swizzle), int(desc.l2_promotion),
            int(desc.oob_fill), rules, verdict]


def run(count: int = COUNT, seed: int = 7, out=sys.stdout, dump: list | None = None) -> dict:
    """Fuzz `count` descriptions; return the tallies (also printed). With `dump`, append one
    `row` per description (verdict: None = the driver accepts, an error name, 'not sent')."""
    from ptxdsl.runtime import DeviceBuffer, DriverError, TensorMap, device_info, use_device
    use_device(0)
    cc = device_info(0).compute_capability
    rng = random.Random(seed)
    stats: Counter = Counter()
    false_accepts, unnamed = [], []
    driver_ok_by_rules: Counter = Counter()
    with DeviceBuffer(1 << 20) as buf:
        base = _up(buf.ptr, 256)
        for _ in range(count):
            desc, how = random_desc(rng, base)
            violations = validate(desc, cc)
            rules = sorted({v.rule for v in violations})
            if not violations:
                stats["ptxdsl accepts"] += 1
                verdict = None
                try:
                    TensorMap.from_desc(desc)
                    stats["both accept"] += 1
                except DriverError as e:
                    false_accepts.append((desc, e.name))
                    verdict = e.name
                if dump is not None:
                    dump.append(row(desc, [], verdict))
                continue
            stats["ptxdsl refuses"] += 1
            unnamed += [(desc, v) for v in violations if v.rule not in RULES or not v.message]
            if NOT_SENT & set(rules):
                stats["refused, not sent (array shorter than rank)"] += 1
                if dump is not None:
                    dump.append(row(desc, rules, "not sent"))
                continue
            verdict = driver_encode(desc)
            if dump is not None:
                dump.append(row(desc, rules, verdict))
            if verdict is None:
                driver_ok_by_rules["+".join(rules)] += 1
                stats["driver accepts what ptxdsl refuses"] += 1
            else:
                stats["both refuse"] += 1
    result = {"count": count, "seed": seed, "compute_capability": list(cc), **stats,
              "false_accepts": len(false_accepts), "refusals_without_rule": len(unnamed),
              "driver_accepts_refused_by_rule": dict(driver_ok_by_rules)}
    print(json.dumps(result, indent=1), file=out)
    for desc, name in false_accepts[:20]:
        print(f"FALSE ACCEPT ({name}): {desc}", file=out)
    for desc, v in unnamed[:20]:
        print(f"UNNAMED REFUSAL: {v} for {desc}", file=out)
    result["false_accept_examples"] = [repr(d) for d, _ in false_accepts[:20]]
    return result


@pytest.mark.gpu
def test_validator_agrees_with_the_driver():
    r = run(COUNT)
    assert r["false_accepts"] == 0, r["false_accept_examples"]
    assert r["refusals_without_rule"] == 0
    assert r["ptxdsl accepts"] > COUNT // 10 and r["ptxdsl refuses"] > COUNT // 2


def probe(out=sys.stdout) -> list:
    """Single-factor probes around a valid map (FLOAT16 3-D unless stated): the driver's
    verdict on each, to tell which property a refusal hangs on."""
    from ptxdsl.runtime import DeviceBuffer, use_device
    use_device(0)
    results = []
    with DeviceBuffer(1 << 20) as buf:
        a = _up(buf.ptr, 256)

        def d(dt="FLOAT16", dims=(4096, 256, 256), box=(64, 8, 8), es=None, strides=None,
              il=0, sw=0, addr=a):
            e = max(DataType.coerce(dt, "dt").bits // 8, 1)
            if strides is None:
                strides, row_ = [], _up(min(dims[0], 1 << 24) * e, 32 if il == 2 else 16)
                for n in dims[1:]:
                    strides.append(row_)
                    row_ = _up(row_ * n, 16)
            return TiledDesc(dt, addr, dims, strides, box, es or [1] * len(dims), il, sw)

        cases = {f"box 64x{k}x{k} fp16 ({64 * 2 * k * k} B)": d(box=(64, k, k))
                 for k in (8, 16, 32, 45, 64, 91, 128, 181, 256)}
        cases |= {f"2d u8 box 256x{k} ({256 * k} B)": d("UINT8", (4096, 4096), (256, k))
                  for k in (64, 128, 256)}
        cases |= {f"5d fp16 box {k}^5": d(dims=(64,) * 5, box=(k,) * 5) for k in (8, 16, 32)}
        cases |= {
            "box1,2 > dim1,2 (small)": d(dims=(1024, 8, 8), box=(64, 16, 16)),
            "box0 > dim0": d(dims=(32, 64, 64), box=(64, 8, 8)),
            "dim0 2^32, stride covers": d("UINT8", (2**32, 4), (64, 4), strides=[2**32]),
            "dim0 2^32, stride 4 MiB": d("UINT8", (2**32, 4), (64, 4), strides=[1 << 22]),
            "dim0 2^32-1, stride 4 MiB": d("UINT8", (2**32 - 1, 4), (64, 4), strides=[1 << 22]),
            "dim1 2^32": d("UINT8", (64, 2**32), (64, 4), strides=[64]),
            "stride0 < dim0 bytes": d("FLOAT32", (64, 32), (16, 8), strides=[64]),
            "stride0 = 0": d("FLOAT32", (64, 32), (16, 8), strides=[0]),
            "es > box": d(box=(64, 2, 2), es=(1, 8, 8)),
            "es 2 on dim0": d(box=(64, 8, 8), es=(2, 1, 1)),
            "swizzle none box0 1024 B": d("FLOAT64", (4096, 64, 64), (128, 2, 2)),
            "swizzle none box0 2048 B": d("FLOAT64", (4096, 64, 64), (256, 2, 2)),
        }
        for il, unit in ((1, 16), (2, 32)):
            for nbytes in (8, 16, 32, 64, 128):
                cases[f"interleave {unit}B, box0 {nbytes} B"] = d(
                    dims=(64, 32, 32), box=(nbytes // 2, 8, 8), il=il, sw=1 if il == 2 else 0)
        for label, desc in cases.items():
            verdict = driver_encode(desc)
            rules = [v.rule for v in validate(desc, (9, 0))]
            results.append((label, verdict, rules))
            print(f"PROBE {label:40s} driver={verdict or 'OK':34s} ptxdsl={rules or 'OK'}",
                  file=out)
    return results


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("count", type=int, nargs="?", default=COUNT)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", default=None, help="also write the tallies here")
    ap.add_argument("--dump", default=None, help="write every case (gzip JSON lines) here")
    ap.add_argument("--probe", action="store_true", help="run the single-factor probes too")
    args = ap.parse_args()
    if args.probe:
        probe()
    rows: list | None = [] if args.dump else None
    res = run(args.count, args.seed, dump=rows)
    if args.dump:
        import gzip
        with gzip.open(args.dump, "wt") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    sys.exit(1 if res["false_accepts"] or res["refusals_without_rule"] else 0)
