#!/usr/bin/env bash
# Hostile input, round 3: `ctgrad data ende` (the EN-DE corpus builder), `translate` and `eval` of a
# translation model, and the Llama's mixture keys. No network: the builder reads catalogues made
# here from its cache, and apt-get is a stand-in that answers as the real one does offline (or
# hangs, for Ctrl-C). Each check is a regression test of one defect found by a hostile probe.
set -u
source "$(dirname "$0")/checks.sh"  # check, expect_text, no_text, no_file
ctgrad=$(realpath "$1")
work=$(mktemp -d)
trap 'pkill -KILL -f "$work" 2>/dev/null; pkill -KILL -f "sleep 600.25" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
export CTGRAD_CACHE="$work/cache"

# Catalogues as Debian's packages ship them, in the builder's cache: alpha's in ISO-8859-1, beta's in
# UTF-8 (the same German text), so the corpus can be built offline.
make_cache() {  # folder: an EN-DE data folder whose gettext source needs no download
  mkdir -p "$1"
  printf 'alpha\nbeta\n' > "$1/gettext-packages"
  /usr/bin/python3 - "$1" <<'EOF'
import os, struct, sys
def write_mo(path, msgs, charset):
    msgs = sorted([(b"", f"Content-Type: text/plain; charset={charset}\n".encode())] + msgs)
    n = len(msgs); ids_at = 28; strs_at = ids_at + 8 * n; data_at = strs_at + 8 * n
    head, body = bytearray(struct.pack("<7I", 0x950412de, 0, n, ids_at, strs_at, 0, 0)), bytearray()
    tables = [bytearray(), bytearray()]
    for side in (0, 1):
        for m in msgs:
            s = m[side]
            tables[side] += struct.pack("<2I", len(s), data_at + len(body))
            body += s + b"\0"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "wb").write(bytes(head + tables[0] + tables[1] + body))
msgs = [(f"Invalid argument number {i}.".encode(), f"Ungültiges Argument Nummer {i}.") for i in range(40)]
msgs += [(f"The street of house {i} is closed.".encode(), f"Die Straße von Haus {i} ist gesperrt.") for i in range(40)]
for package, charset in (("alpha", "ISO-8859-1"), ("beta", "UTF-8")):
    root = os.path.join(sys.argv[1], "catalogues", package)
    write_mo(os.path.join(root, f"usr/share/locale/de/LC_MESSAGES/{package}.mo"),
             [(en.replace(b".", f" of {package}.".encode()), de.replace(".", f" von {package}.").encode(charset)) for en, de in msgs], charset)
    open(os.path.join(root, ".ctgrad-complete"), "w").write(f"{package}_1_all.deb\n")
EOF
}
# apt-get as it answers without a mirror (what Debian's apt-get 2.6 prints then), and one that hangs.
mkdir offline hanging
cat > offline/apt-get <<'EOF'
#!/bin/sh
case "$1" in
  update) echo "W: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  Temporary failure resolving 'deb.debian.org'" >&2
          echo "W: Some index files failed to download. They have been ignored, or old ones used instead." >&2; exit 0 ;;
  *) echo "E: Failed to fetch http://deb.debian.org/debian/pool/main/x/x.deb  Temporary failure resolving 'deb.debian.org'" >&2; exit 100 ;;
esac
EOF
printf '#!/bin/sh\nexec sleep 600.25\n' > hanging/apt-get
chmod +x offline/apt-get hanging/apt-get

# 0. Catalogues in their declared charsets: the corpus is UTF-8, the Latin-1 one converted.
make_cache d0
check "a corpus from catalogues in ISO-8859-1 and UTF-8" 0 "$ctgrad" data ende --sources gettext --dir d0
expect_text "counts the units that could not be converted" "encoding"
check "the corpus is valid UTF-8" 0 /usr/bin/python3 -c "
import sys
for f in ('train', 'validation', 'test'): open('d0/corpus/' + f + '.tsv', encoding='utf-8', errors='strict').read()"
check "the Latin-1 catalogue's German comes out right" 0 grep -q "Ungültiges Argument Nummer 3 von alpha." d0/corpus/train.tsv
check "and the UTF-8 one's" 0 grep -q "Die Straße von Haus 5 ist gesperrt von beta." d0/corpus/train.tsv

# 1. Ctrl-C stops the builder and its children, exit 130, no corpus written.
for how in process group; do
  rm -rf d1 && mkdir d1
  if [ "$how" = process ]; then
    PATH="$work/hanging:$PATH" "$ctgrad" data ende --sources ddtp --dir d1 > int.txt 2>&1 &
    pid=$!
  else
    PATH="$work/hanging:$PATH" setsid "$ctgrad" data ende --sources ddtp --dir d1 > int.txt 2>&1 &
    pid=$!
  fi
  for _ in $(seq 1 1200); do pgrep -f "sleep 600.25" > /dev/null && break; sleep 0.05; done
  check "apt-get runs ($how)" 0 pgrep -f "sleep 600.25"
  t0=$(date +%s%N)
  if [ "$how" = process ]; then kill -INT "$pid"; else kill -INT -- "-$pid"; fi
  wait "$pid"
  rc=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  # The stand-in would hang 600 s: ended well before that (any load), the signal ended it.
  check "Ctrl-C to the $how: exit 130 (in $ms ms), not after apt-get's 600 s" 0 test "$rc" -eq 130 -a "$ms" -lt 120000
  check "apt-get is stopped too ($how)" 1 pgrep -f "sleep 600.25"
  no_file "no corpus written ($how)" d1/corpus/train.tsv
done

# 2. Nothing to be had: exit 1, and the corpus there is kept.
make_cache d2 && rm -rf d2/catalogues && mkdir -p d2/corpus && echo "my corpus" > d2/corpus/train.tsv
check "offline, no package can be had" 1 env PATH="$work/offline:$PATH" "$ctgrad" data ende --sources gettext --dir d2
expect_text "says so, with apt's reason" "none of the 2 packages could be had (apt-get download: E: Failed to fetch"
no_text "no claim of packages unpacked" "2/2 packages downloaded and unpacked"
check "the corpus there is kept" 0 grep -qx "my corpus" d2/corpus/train.tsv
make_cache d2b && mkdir -p d2b/corpus && seq 1 1000 > d2b/corpus/train.tsv
check "a smaller corpus than the one in the cache's corpus folder" 1 "$ctgrad" data ende --sources gettext --dir d2b
expect_text "keeps it" "holds a corpus of 1000 training pairs"
check "it is kept" 0 test "$(wc -l < d2b/corpus/train.tsv)" -eq 1000
check "with --overwrite" 0 "$ctgrad" data ende --sources gettext --dir d2b --overwrite
check "it is replaced" 0 grep -q "Nummer" d2b/corpus/train.tsv

# 3. A user's files in --out are kept without --overwrite.
mkdir mine && echo "my notes" > mine/counts.tsv
check "--out holding a user's counts.tsv" 2 "$ctgrad" data ende --sources gettext --dir d0 --out mine
expect_text "asks for --overwrite" "already holds counts.tsv: add --overwrite"
check "the user's file is kept" 0 grep -qx "my notes" mine/counts.tsv
check "with --overwrite" 0 "$ctgrad" data ende --sources gettext --dir d0 --out mine --overwrite
check "the corpus is there" 0 test -s mine/train.tsv

# 4. Folders that cannot be: exit 2 up front, naming the option.
echo x > afile
check "--dir ''" 2 "$ctgrad" data ende --dir ''
expect_text "names it" "--dir is empty"
check "--dir a file" 2 "$ctgrad" data ende --dir afile
expect_text "names it" "--dir afile is not a folder (a file)"
check "--out a file" 2 "$ctgrad" data ende --dir d0 --out afile
expect_text "names it" "--out afile is not a folder"
check "--out /dev/null" 2 "$ctgrad" data ende --dir d0 --out /dev/null
expect_text "names it" "--out /dev/null is not a folder (a device, FIFO or socket)"
check "--out under a file" 2 "$ctgrad" data ende --dir d0 --out afile/corpus
expect_text "names it" "--out afile/corpus: cannot make the folder"
no_text "no raw filesystem error" "filesystem error"

# 5. Offline: apt's own reason is shown.
mkdir d5
check "ddtp offline" 1 env PATH="$work/offline:$PATH" "$ctgrad" data ende --sources ddtp --dir d5
expect_text "shows apt's failure" "Temporary failure resolving 'deb.debian.org'"
rm -f d5/gettext-packages
check "gettext offline" 1 env PATH="$work/offline:$PATH" "$ctgrad" data ende --sources gettext --dir d5
expect_text "shows apt's failure" "gave no Contents index"
expect_text "and why" "Temporary failure resolving"

# 6. The folder's lock is not followed through a link.
mkdir d6 && ln -s "$work/outside_lock" d6/.lock
check "a dangling link as the lock" 2 "$ctgrad" data ende --sources gettext --dir d6
expect_text "names it" "is a symbolic link, not ctgrad's lock file"
no_file "nothing made where it points" outside_lock

# 7-10. translate and eval of a translation model.
check "a tiny translation run" 0 "$ctgrad" train transformer --run trt --set steps=1 --set batch=2 --set eval_every=1 --set eval_sentences=2 \
  --set train_fraction=0.01 --set vocab=4000 --threads 1
check "eval --attention-png ''" 2 "$ctgrad" eval transformer --run trt --set eval_sentences=1 --attention-png '' --threads 1
expect_text "refuses it" "--attention-png is empty"
check "eval --sentence without --attention-png" 2 "$ctgrad" eval transformer --run trt --set eval_sentences=1 --sentence "The house." --threads 1
expect_text "refuses it" "--sentence is the heatmaps' sentence: it needs --attention-png"
echo "The house is small." > one.txt
check "translate --text and --input" 2 "$ctgrad" translate transformer --run trt --text "I love you." --input one.txt --threads 1
expect_text "refuses the pair" "--text and --input both say what to translate"
seq 1 200 | sed 's/.*/The house number & is small./' > many.txt
check "translate | head -1: a normal end" 0 bash -o pipefail -c "'$ctgrad' translate transformer --run trt --beam 1 --batch 4 --input many.txt --threads 1 2> head_err.txt | head -1"
check "nothing said after the reader left" 1 grep -q "translated" head_err.txt
check "translate into a full disk" 1 bash -c "'$ctgrad' translate transformer --run trt --beam 1 --batch 4 --input many.txt --threads 1 > /dev/full"
expect_text "says why" "cannot write standard output: No space left on device"
no_text "at once, not after translating everything" "translated 200 lines"
printf 'The \033[31mhouse\033[0m is small.\n' > esc.txt
check "translate a line with an escape sequence" 0 bash -c "'$ctgrad' translate transformer --run trt --beam 1 --input esc.txt --threads 1 > esc_out.txt"
expect_text "names the control character" "the control character '\\x1b' is not text: left out of the translation"
check "no raw ESC reaches standard output" 1 grep -q $'\033' esc_out.txt
printf 'The house\000 is small.\n' > nul.txt
check "translate a line with a NUL" 0 bash -c "'$ctgrad' translate transformer --run trt --beam 1 --input nul.txt --threads 1 > nul_out.txt"
expect_text "says it is left out" "the control character '\\x00' is not text: left out of the translation"
no_text "not that it is copied" "copied as it is"

# A fresh probe of translate: an option given twice, a --text of several lines, a line of hundreds of sentences.
check "translate --text twice" 2 "$ctgrad" translate transformer --run trt --text a --text b --threads 1
expect_text "refuses it" "--text is given twice"
check "eval --threads twice" 2 "$ctgrad" eval transformer --run trt --threads 1 --threads 2
check "a --text of two lines" 0 bash -c "'$ctgrad' translate transformer --run trt --beam 1 --threads 1 --text \$'The house.\nThe garden.' > two.txt && test \$(wc -l < two.txt) -eq 2"
python3 -c "print('The house is small. ' * 300)" > long_line.txt
check "a line of 300 sentences, searched 32 at a time" 0 "$ctgrad" translate transformer --run trt --beam 1 --threads 1 --input long_line.txt
expect_text "says it is cut" "translated sentence by sentence (300)"

# 11. A mixture's top-k without experts is a contradiction, refused.
check "llama moe_top_k=1 with moe_experts=0" 2 "$ctgrad" train llama --run moe0 --set moe_experts=0 --set moe_top_k=1 --set size=tiny --set steps=1
expect_text "names both keys" "moe_top_k=1 chooses among experts, and moe_experts=0 is a dense model"
no_file "nothing written" moe0/run.json
check "ablate llama --grid moe_top_k=1,2" 2 "$ctgrad" ablate llama --grid moe_top_k=1,2 --seeds 1 --set size=tiny --set steps=1 --run s_moe
expect_text "refuses it" "moe_top_k=1 chooses among experts"

no_file "nothing ran anywhere" PWNED
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
