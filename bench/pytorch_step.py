# bench/run's and bench/cpu-kernels' PyTorch side: the GPT of samples/gpt-tiny.fsm or bench/gpt-867k.fsm (the
# model code of test/interp/pytorch_reference.py; an untied lm_head when the params name one), trained with
# torch.optim.Adam and clipping on random tokens for a number of steps at a given thread count; prints
# {"torch": version, "threads": n, "stepMs": median, "stepsMs": [...], "cpuStepsMs": [...]} as JSON (cpuStepsMs:
# each step's process CPU time, user + system, which a shared machine's other load disturbs less than wall time).
# Usage: /usr/bin/python3 bench/pytorch_step.py '{"config": {...}, "batch": [B, S], "params": [{"name", "shape"}], "steps": N, "threads": T, "lr": x}'
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "interp"))
from pytorch_reference import gpt  # noqa: E402

meta = json.loads(sys.argv[1])
torch.set_num_threads(meta["threads"])
torch.manual_seed(0)
B, S = meta["batch"]
P = {p["name"]: (0.02 * torch.randn(p["shape"])).requires_grad_(True) for p in meta["params"]}
opt = torch.optim.Adam(P.values(), lr=meta["lr"])
vocab = P["wte.weight"].shape[0]
times = []
cpu = []
for _ in range(meta["steps"]):
    tokens = torch.randint(0, vocab, (B, S))
    targets = torch.randint(0, vocab, (B, S))
    t0, c0 = time.perf_counter(), time.process_time()
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(gpt(P, tokens, meta["config"]).reshape(B * S, -1), targets.reshape(B * S))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(P.values(), 1.0)
    opt.step()
    times.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
warm = sorted(times[2:])
print(json.dumps({"torch": torch.__version__, "threads": meta["threads"], "stepMs": round(warm[len(warm) // 2] * 1e3, 3), "stepsMs": [round(t * 1e3, 3) for t in times[2:]], "cpuStepsMs": [round(t * 1e3, 3) for t in cpu[2:]]}))
