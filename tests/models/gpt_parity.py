"""GPT parity with PyTorch (as llm.c's test_gpt2): the weights ctgrad saved are loaded into the
PyTorch reference model (bench/reference/gpt.py); on the same batch, in fp32:
  loss within 1e-4 relative, every parameter gradient within 1e-4 relative (max |diff| over the
  tensor / max |reference| over the tensor), logits within 1e-5 (max |diff|).
usage: /usr/bin/python3 gpt_parity.py <gpt_parity_writer> <out.safetensors>"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "reference"))
import torch  # noqa: E402
from gpt import Gpt, read_safetensors  # noqa: E402

subprocess.run([sys.argv[1], sys.argv[2]], check=True)
t, meta = read_safetensors(sys.argv[2])
cfg = json.loads(meta["config"])
torch.manual_seed(0)
model = Gpt(cfg["vocab"], cfg["n_layer"], cfg["n_head"], cfg["d_model"], cfg["context"])
state = {k: torch.from_numpy(v) for k, v in t.items() if not k.startswith(("grad.", "out.", "in."))}
missing = set(model.state_dict()) ^ set(state)
if missing:
    sys.exit(f"parameter names differ between ctgrad and the reference: {sorted(missing)}")
model.load_state_dict(state)
ids = torch.from_numpy(t["in.ids"]).long()
targets = torch.from_numpy(t["in.targets"]).long()
logits, loss = model(ids, targets)
loss.backward()

fails, report = 0, []
def check(what, got, want, tol, relative):
    global fails
    diff = (torch.as_tensor(got).double() - want.detach().double()).abs().max().item()
    scale = want.detach().double().abs().max().item() if relative else 1.0
    err = diff / max(scale, 1e-30)
    ok = err <= tol
    fails += not ok
    report.append(f"{'ok  ' if ok else 'FAIL'} {what}: {'relative' if relative else 'absolute'} error {err:.2e} (tolerance {tol:g})")

check("loss", t["out.loss"][0], loss, 1e-4, True)
check("logits", t["out.logits"], logits, 1e-5, False)
for name, p in model.named_parameters():
    check(f"grad {name}", t["grad." + name], p.grad, 1e-4, True)
print("\n".join(report))
print(f"loss ctgrad {t['out.loss'][0]:.6f} torch {loss.item():.6f}; logits max |x| {logits.abs().max().item():.2f}")
n = len(report)
print(f"{n - fails} passed, {fails} failed")
sys.exit(1 if fails else 0)
