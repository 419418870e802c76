#!/usr/bin/env python3
"""`golden --kv-cache` and `check --kv-cache` end to end, with the cache written independently of the C++.

The cache is built here from the golden set's files alone, by the engines' documented rules, not by
ropecheck's mapping code:
  - FlashInfer paged KV cache (docs, "Page Table Layout" / append_paged_kv_cache): request b holds pages
    kv_indices[kv_indptr[b]:kv_indptr[b+1]]; its KV length is (pages - 1) * page_size + kv_last_page_len[b];
    an appended token of request batch_indices[t] at position p (its index in the request's KV) goes to
    page kv_indices[kv_indptr[b] + p // page_size], entry p % page_size; NHD pages are [page_size, heads, D],
    HND pages [heads, page_size, D];
  - vLLM reshape_and_cache_flash: token t goes to block slot_mapping[t] // block_size, offset
    slot_mapping[t] % block_size of a [num_blocks, block_size, heads, D] cache.
Every other byte is the 0xFF sentinel. Asserted: the correct caches pass (exit 0) in NHD, HND and slot
form; one token written one slot further (past its page end) fails (exit 1) with an out-of-slot write and
a missing write in the report; a cache with its sentinel declared (0x00 bytes) passes.

Usage: test_kv_cache.py ROPECHECK   (pure Python, about a second)
"""
import array
import json
import os
import struct
import subprocess
import sys
import tempfile

DT = {"F32": "f", "I32": "i", "I64": "q"}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        arr = array.array(DT[t["dtype"]])
        arr.frombytes(raw[8 + n + a:8 + n + b])
        out[name] = (t["shape"], arr)
    return out


def write_safetensors(path, tensors):
    header, data = {}, b""
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def slots_of(kv, positions, page_size):
    """(page, entry) of each appended token, from the metadata the set gives the kernel."""
    # FlashInfer's get_batch_indices_positions(append_indptr, seq_lens, nnz): token j of request b is at
    # position seq_lens[b] - (append_indptr[b+1] - append_indptr[b]) + j.
    indptr_a, lens = kv["append_indptr"][1], kv["seq_lens"][1]
    for b in range(len(lens)):
        for j, t in enumerate(range(indptr_a[b], indptr_a[b + 1])):
            assert kv["batch_indices"][1][t] == b and positions[t] == lens[b] - (indptr_a[b + 1] - indptr_a[b]) + j
    if "slot_mapping" in kv:
        return [(s // page_size, s % page_size) for s in kv["slot_mapping"][1]]
    indptr, indices, last = kv["kv_indptr"][1], kv["kv_indices"][1], kv["kv_last_page_len"][1]
    batch = kv["batch_indices"][1]
    out = []
    for t, b in enumerate(batch):
        pages = indptr[b + 1] - indptr[b]
        kv_len = (pages - 1) * page_size + last[b]
        assert kv_len == kv["seq_lens"][1][b], (b, kv_len)
        p = positions[t]
        assert 0 <= p < kv_len, (t, p, kv_len)
        out.append((indices[indptr[b] + p // page_size], p % page_size))
    return out


def build_cache(set_dir, shift_token=None, sentinel=b"\xff\xff\xff\xff"):
    m = json.load(open(os.path.join(set_dir, "manifest.json")))
    c = m["kv_cache"]
    kv = read_safetensors(os.path.join(set_dir, c["file"]))
    positions = read_safetensors(os.path.join(set_dir, "inputs.safetensors"))
    pos = list(array.array("q", positions["positions"][1].tobytes()))
    (T, H, D), k_rot = read_safetensors(os.path.join(set_dir, "outputs_f32.safetensors"))["k_rot.f32"]
    v = kv["v"][1]
    P, S = c["pages"], c["page_size"]
    nhd = c["layout"] == "NHD"
    k_cache, v_cache = bytearray(sentinel * (P * S * H * D)), bytearray(sentinel * (P * S * H * D))
    for t, (page, entry) in enumerate(slots_of(kv, pos, S)):
        if t == shift_token:
            entry += 1  # one slot further: past the page end when entry was the last
        for h in range(H):
            for d in range(D):
                at = ((page * S + entry) * H + h) * D + d if nhd else ((page * H + h) * S + entry) * D + d
                k_cache[4 * at:4 * at + 4] = struct.pack("<f", k_rot[(t * H + h) * D + d])
                v_cache[4 * at:4 * at + 4] = struct.pack("<f", v[(t * H + h) * D + d])
    shape = [P, S, H, D] if nhd else [P, H, S, D]
    tensors = {"k_cache": ("F32", shape, bytes(k_cache)), "v_cache": ("F32", shape, bytes(v_cache))}
    if sentinel != b"\xff\xff\xff\xff":
        tensors["sentinel"] = ("F32", [1], sentinel)
    return tensors


def run(exe, *args):
    return subprocess.run([exe, *args], capture_output=True, text=True)


def main():
    exe = os.path.abspath(sys.argv[1])
    failures = []
    with tempfile.TemporaryDirectory(prefix="ropecheck-kv-") as work:
        for form, layout in (("paged", "NHD"), ("paged", "HND"), ("slots", "NHD")):
            batch = {"sequences": [{"cached": 0, "appended": 5}, {"cached": 6, "appended": 1}, {"cached": 2, "appended": 3}],
                     "cache": form, "layout": layout, "page_size": 4}
            bpath, sdir = os.path.join(work, f"{form}-{layout}.json"), os.path.join(work, f"set-{form}-{layout}")
            json.dump(batch, open(bpath, "w"))
            p = run(exe, "golden", "--preset", "llama-3.1-8b", "--kv-cache", bpath, "--heads", "2", "--dtypes", "f32",
                    "--out", sdir, "--quiet")
            if p.returncode != 0:
                failures.append(f"{form} {layout}: golden exit {p.returncode}: {p.stderr}")
                continue
            # token 4: sequence 0's index 4 is entry 0 of its second page; token 3 (entry 3) shifted runs past the end.
            for name, kwargs, rc in (("correct", {}, 0), ("declared sentinel", {"sentinel": b"\0\0\0\0"}, 0),
                                     ("past page end", {"shift_token": 3}, 1)):
                cpath, rpath = os.path.join(work, "cache.safetensors"), os.path.join(work, "r.json")
                write_safetensors(cpath, build_cache(sdir, **kwargs))
                if os.path.exists(rpath):
                    os.remove(rpath)
                p = run(exe, "check", "--golden", sdir, "--kv-cache", cpath, "--report", rpath)
                if p.returncode != rc:
                    failures.append(f"{form} {layout} {name}: exit {p.returncode}, expected {rc}\n{p.stdout}{p.stderr}")
                    continue
                r = json.load(open(rpath))["kv_cache"]
                if rc == 1 and (r["out_of_slot_writes"] != 1 or r["missing_writes"] != 1):
                    failures.append(f"{form} {layout} {name}: {r['out_of_slot_writes']} out-of-slot, {r['missing_writes']} missing")
                print(f"ok  {form} {layout} {name}: exit {rc}")
    for f in failures:
        print("FAIL " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
