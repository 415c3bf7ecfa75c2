"""ctgrad's BLEU against independent implementations: the 13a tokenisation against Python's `re`
running sacreBLEU's own regular expressions (copied from sacrebleu/tokenizers/tokenizer_13a.py and
tokenizer_re.py), and the corpus score against NLTK's corpus_bleu (Debian python3-nltk) on the same
tokens. usage: /usr/bin/python3 bleu_oracle.py <ctgrad-bleu> <de-en pairs file>"""
import re
import subprocess
import sys
import tempfile

from nltk.translate.bleu_score import SmoothingFunction, corpus_bleu

bleu_tool, pairs_file = sys.argv[1], sys.argv[2]
RULES = [
    (re.compile(r'([\{-\~\[-\` -\&\(-\+\:-\@\/])'), r' \1 '),
    (re.compile(r'([^0-9])([\.,])'), r'\1 \2 '),
    (re.compile(r'([\.,])([^0-9])'), r' \1 \2'),
    (re.compile(r'([0-9])(-)'), r'\1 \2 '),
]


def tok13a(line):
    line = line.replace('<skipped>', '').replace('-\n', '').replace('\n', ' ')
    if '&' in line:
        line = line.replace('&quot;', '"').replace('&amp;', '&').replace('&lt;', '<').replace('&gt;', '>')
    line = f' {line} '
    for r, s in RULES:
        line = r.sub(s, line)
    return ' '.join(line.split())


# Real sentences of both languages (the Ding dictionary's), and hard cases.
sentences = []
with open(pairs_file, encoding="utf-8") as f:
    for i, line in enumerate(f):
        if i % 40 == 0 and "::" in line:
            de, en = line.rstrip("\n").split("::", 1)
            sentences += [de.strip(), en.strip()]
sentences += ["It costs $3.50, i.e. 3,000.5 (approx.)!", "1990-2000 - a decade.", 'He said: "No &amp; yes" &lt;b&gt;',
              "e-mail: a/b@c.de; {x} [y] ~z~ `q` ^_^", "Dr. Smith's 2nd-hand car...", "  spaced   out  ", "",
              "non\u00a0breaking\u2009thin\u3000ideographic\u2028line spaces", "tabs\tand\x1cseparators"]
with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt") as f:
    f.write("\n".join(sentences) + "\n")
    f.flush()
    with open(f.name, encoding="utf-8") as src:
        got = subprocess.run([bleu_tool, "--tokenize"], stdin=src, capture_output=True, check=True, text=True).stdout.split("\n")
bad = [(s, g, tok13a(s)) for s, g in zip(sentences, got) if g != tok13a(s)]
print(f"13a tokenisation: {len(sentences) - len(bad)} of {len(sentences)} lines as sacreBLEU's regexes")
for s, g, w in bad[:5]:
    print(f"  {s!r}\n    ctgrad {g!r}\n    re     {w!r}")

# Corpus BLEU: hypotheses are the references with words dropped, swapped and replaced.
refs = [s for s in sentences if len(s.split()) >= 4][:300]
hyps = []
for i, r in enumerate(refs):
    w = r.split()
    if i % 3 == 0:
        w = w[:-1]
    if i % 4 == 1:
        w[0], w[1] = w[1], w[0]
    if i % 5 == 2:
        w[len(w) // 2] = "xyz"
    hyps.append(" ".join(w))
with tempfile.NamedTemporaryFile("w", encoding="utf-8") as h, tempfile.NamedTemporaryFile("w", encoding="utf-8") as r:
    h.write("\n".join(hyps) + "\n"), r.write("\n".join(refs) + "\n")
    h.flush(), r.flush()
    line = subprocess.run([bleu_tool, h.name, r.name], capture_output=True, check=True, text=True).stdout.strip()
ours = float(line.split()[2])
nltk_score = 100 * corpus_bleu([[tok13a(r).split()] for r in refs], [tok13a(h).split() for h in hyps])
print(f"ctgrad: {line}\nnltk corpus_bleu on 13a tokens: {nltk_score:.4f}")
# Zero 3- and 4-gram matches: sacreBLEU's "exp" smoothing is NLTK's method3 (NIST geometric).
short_refs = ["a b c d e", "f g h i"]
short_hyps = ["a b x d e", "f y h z"]
with tempfile.NamedTemporaryFile("w", encoding="utf-8") as h, tempfile.NamedTemporaryFile("w", encoding="utf-8") as r:
    h.write("\n".join(short_hyps) + "\n"), r.write("\n".join(short_refs) + "\n")
    h.flush(), r.flush()
    line2 = subprocess.run([bleu_tool, h.name, r.name], capture_output=True, check=True, text=True).stdout.strip()
smoothed = 100 * corpus_bleu([[r.split()] for r in short_refs], [h.split() for h in short_hyps],
                             smoothing_function=SmoothingFunction().method3)
print(f"ctgrad: {line2}\nnltk corpus_bleu, method3 smoothing: {smoothed:.4f}")
ok = not bad and abs(ours - nltk_score) < 0.01 and abs(float(line2.split()[2]) - smoothed) < 0.01
print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
sys.exit(0 if ok else 1)
