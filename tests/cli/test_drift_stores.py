"""drift --stores: the files, their columns and keys, and the crossovers' shape on a short range (not timing).

bf16 positions collide from 257 on (256 < p < 512 round to even bf16 values): its rotation error is then a
whole angle step, far past half a quantum of any store, so its crossover is 257 under every store; the
accurate recipe (binary64 angles, f32 store) stays below half a quantum everywhere (no crossover)."""
import csv
import json
import os
import subprocess
import sys
import tempfile


def main():
    exe = sys.argv[1]
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "s")
        p = subprocess.run([exe, "drift", "--preset", "llama-3.1-8b", "--max-pos", "1024", "--heads", "2",
                            "--recipes", "builtin:accurate,builtin:bf16-positions", "--stores", "e4m3fn,q8_0",
                            "--out", out], capture_output=True, text=True, check=False)
        assert p.returncode == 0, p.stderr
        assert sorted(os.listdir(out)) == ["stores.csv", "stores.json", "stores.md"], os.listdir(out)
        rows = list(csv.DictReader(open(os.path.join(out, "stores.csv"))))
        assert list(rows[0]) == ["recipe", "store", "bin_lo", "bin_hi", "positions", "rot_rel_max", "store_rel_max",
                                 "rot_quanta_max", "code_diff_max", "codes_changed"], list(rows[0])
        j = json.load(open(os.path.join(out, "stores.json")))
        assert j["format"] == "ropecheck-drift-stores" and j["format_version"] == 1, j["format"]
        curves = {(c["recipe"], c["store"]): c for c in j["curves"]}
        assert list(curves) == [("accurate", "e4m3fn"), ("accurate", "q8_0"), ("bf16-positions", "e4m3fn"),
                                ("bf16-positions", "q8_0")], list(curves)
        nbins = len(j["sampling"]["bins"])
        assert len(rows) == 4 * nbins, (len(rows), nbins)
        for (recipe, store), c in curves.items():
            assert set(c["bins"][0]) == {"lo", "hi", "positions", "rot_rel_max", "store_rel_max", "rot_quanta_max",
                                         "code_diff_max", "codes_changed"}, c["bins"][0]
            assert len(c["bins"]) == nbins
            want = None if recipe == "accurate" else 257
            assert c["crossover"] == want, (recipe, store, c["crossover"])
            assert all(b["store_rel_max"] > 0 for b in c["bins"] if b["lo"] > 0), (recipe, store)
        assert "| bf16-positions | q8_0 | 257 |" in p.stdout, p.stdout
    print("drift --stores: files, columns, keys and crossovers as documented")


if __name__ == "__main__":
    main()
