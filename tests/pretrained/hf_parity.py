"""Writes every case of bench/reference/hf_models.py into a temporary folder and runs
hf_parity_check on each: ctgrad's logits within 1e-5 (relative to the largest logit) of the
reference's, the same 64 greedy tokens (BERT: the same top token at every position, and the
next-sentence logits), and an export that loads back to the same bits.
  hf_parity.py REFERENCE_DIR HF_PARITY_CHECK"""
import subprocess
import sys
import tempfile

sys.path.insert(0, sys.argv[1])
import hf_models  # noqa: E402

failed = []
with tempfile.TemporaryDirectory() as tmp:
    for case in hf_models.CASES:
        margin = hf_models.write_case(case, f"{tmp}/{case}")
        r = subprocess.run([sys.argv[2], f"{tmp}/{case}", f"{tmp}/{case}-export"], capture_output=True, text=True)
        print(r.stdout + r.stderr, end="")
        if margin == margin:  # not NaN: a generative model's greedy run
            print(f"  (the reference's smallest top-2 gap along the greedy run: {margin:.4f})")
        if r.returncode != 0:
            failed.append(case)
print("failed: " + ", ".join(failed) if failed else f"all {len(hf_models.CASES)} cases agree")
sys.exit(1 if failed else 0)
