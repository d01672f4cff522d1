#!/usr/bin/env bash
# The five seed studies in full (issue 39): `wanperf reproduce SEED` one seed at a time into a
# scratch archive, each seed's wall time, findings and checks as a markdown table for
# docs/reproduce.md ("Measured"). MODE=--quick runs the reduced grids. Needs root (or
# unprivileged user namespaces). Reports go to $OUT (default /tmp/wanperf-reproduce).
#
#   bench/reproduce.sh              # about 57 minutes
#   MODE=--quick bench/reproduce.sh # about 8 minutes
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p wanperf
W=target/release/wanperf
OUT=${OUT:-/tmp/wanperf-reproduce}
MODE=${MODE:-}
rm -rf "$OUT" && mkdir -p "$OUT"
echo "| seed | mode | time | findings held | checks held | failed | not checkable | full run only |"
echo "|---|---|---|---|---|---|---|---|"
status=0
for seed in 000 001 002 003 004; do
  t0=$(date +%s.%N)
  set +e
  $W reproduce "$seed" $MODE --json --db "$OUT/archive.sqlite" -o "$OUT" > "$OUT/$seed.ndjson" 2> "$OUT/$seed.err"
  rc=$?
  set -e
  t1=$(date +%s.%N)
  [ $rc -eq 0 ] || status=1
  python3 - "$OUT/$seed.ndjson" "$seed" "${MODE:-full}" "$t0" "$t1" <<'PY'
import json, sys
path, seed, mode, t0, t1 = sys.argv[1:]
rec = next((json.loads(l) for l in open(path) if '"event":"seed"' in l.replace(' ', '')), None)
secs = float(t1) - float(t0)
if rec is None:
    print(f"| {seed} | {mode} | {secs/60:.1f} min | (no result: see {path.replace('.ndjson', '.err')}) | | | | |")
else:
    c = rec["counts"]
    print(f"| {seed} | {mode.lstrip('-')} | {secs/60:.1f} min | {c['passed']} of {c['passed']+c['failed']} | "
          f"{c['checks_held']} of {c['checks']} | {c['failed']} | {c['unchecked']} | {c['full_run_only']} |")
    for f in rec["findings"]:
        if f["status"] in ("fail", "not_run"):
            for _, v in f["checks"]:
                if not v["pass"]:
                    print(f"<!-- {f['id']} FAILED: {v['text']} [{v['cells']}] measured {v['measured']} bound {v['bound']} -->")
PY
done
echo "reports: $OUT/seed00N.html" >&2
exit $status
