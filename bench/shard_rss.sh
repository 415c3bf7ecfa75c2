#!/usr/bin/env bash
# Peak resident memory of `ctgrad train gpt` on token shards as the corpus grows: a generated corpus
# of random ids in shards of 1 GB (500M uint16 ids each) beside a real tokenizer, trained for the
# same steps at 1, 2, 4 and 8 GB. The shards are memory-mapped (MADV_RANDOM), so only the pages of
# the windows drawn become resident: the peak should not move with the corpus.
#   bash bench/shard_rss.sh BUILD_DIR [WORK_DIR (default /tmp/ctgrad-shard-rss)] [STEPS (default 200)]
set -euo pipefail
build=$(realpath "$1")
work=${2:-/tmp/ctgrad-shard-rss}
steps=${3:-200}
ctgrad=$build/apps/ctgrad
mkdir -p "$work" && cd "$work"
export CTGRAD_CACHE=off
# A tokenizer of 4096 ids, from a small real corpus (its shards give the folder's format).
if [ ! -f base/tokenize.json ]; then
  mkdir -p text && for i in $(seq 1 200); do seq "$i" 3 5000 | tr '\n' ' ' > "text/$i.txt"; done
  "$ctgrad" data tokenize --data text --out base --vocab 4096 --val-fraction 0.05 > /dev/null 2>&1
fi
/usr/bin/python3 - "$work" <<'EOF'
import json, os, struct, sys, shutil
import numpy as np
work = sys.argv[1]
base = os.path.join(work, "base")
manifest = json.load(open(os.path.join(base, "tokenize.json")))
val = open(os.path.join(base, "val_000000.bin"), "rb").read()
header = bytearray(open(os.path.join(base, "train_000000.bin"), "rb").read()[:256])
ids_per_shard = 500_000_000
struct.pack_into("<Q", header, 16, ids_per_shard)  # tokens
struct.pack_into("<Q", header, 24, 1)              # documents
rng = np.random.default_rng(1)
chunk = 50_000_000
os.makedirs(os.path.join(work, "gen"), exist_ok=True)
for k in range(8):
    path = os.path.join(work, "gen", "train_%06d.bin" % k)
    if os.path.exists(path) and os.path.getsize(path) == 256 + 2 * ids_per_shard:
        continue
    with open(path + ".part", "wb") as f:
        f.write(header)
        for _ in range(ids_per_shard // chunk):
            f.write(rng.integers(0, 4096, chunk, dtype=np.uint16).tobytes())
    os.replace(path + ".part", path)
for gb in (1, 2, 4, 8):
    d = os.path.join(work, "corpus%d" % gb)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for name in ("tokenizer.model", "tokenize.json", "val_000000.bin"):
        shutil.copy(os.path.join(base, name), d)
    for k in range(gb):
        os.symlink(os.path.join(work, "gen", "train_%06d.bin" % k), os.path.join(d, "train_%06d.bin" % k))
EOF
sync
echo "corpus   shards  peak RSS   training"
for gb in 1 2 4 8; do
  /usr/bin/time -f "%M" -o rss.txt "$ctgrad" train gpt --run "run$gb" --overwrite --set data="corpus$gb" --set vocab=4096 \
    --set steps="$steps" --set eval_every="$steps" --set eval_windows=8 --set sample_tokens=0 > "train$gb.log" 2>&1
  rate=$(grep -o '[0-9]* tok/s' "train$gb.log" | tail -1)
  printf "%2d GB    %6d  %6.0f MB   %s\n" "$gb" "$gb" "$(($(cat rss.txt) / 1024))" "$rate"
done
