# PyTorch's step on the GPU check's GPT-2 124M (bench/gpu/check-gpt2.ts): the same architecture as
# samples/gpt2-124m.fsm (tied embedding, learned positions, pre-norm blocks, exact GELU, causal attention by
# scaled_dot_product_attention), AdamW(6e-4, betas (0.9, 0.95), eps 1e-8, weight decay 0.1, fused), gradient
# clipping at 1.0, bf16 autocast over fp32 weights, random tokens at batch B × S; eager and torch.compile.
# Prints {"torch", "device", "eager": {...}, "compile": {...}} with each mode's median step time, tokens/s,
# MFU (model FLOPs per step given by the caller over the bf16 peak) and peak allocated memory.
# Usage: python3 bench/gpu/pytorch_gpt2.py '{"batch": 8, "seq": 1024, "steps": 12, "flopsPerStep": F, "peakFlops": P, "modes": ["eager", "compile"]}'
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

cfg = json.loads(sys.argv[1])
B, S, STEPS = cfg["batch"], cfg["seq"], cfg["steps"]
V, CTX, D, H, L = 50257, 1024, 768, 12, 12
dev = torch.device("cuda")


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.ln_2 = nn.LayerNorm(D)
        self.fc = nn.Linear(D, 4 * D)
        self.fc_out = nn.Linear(4 * D, D)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(D, dim=-1)
        q, k, v = (t.view(b, s, H, D // H).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, D)
        x = x + self.proj(a)
        return x + self.fc_out(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, D)
        self.wpe = nn.Embedding(CTX, D)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(D)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens, targets):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, V).float(), targets.view(-1))


def run(mode):
    torch.manual_seed(0)
    model = GPT().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=True)
    step_model = torch.compile(model) if mode == "compile" else model
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(STEPS):
        tokens = torch.randint(0, V, (B, S), device=dev)
        targets = torch.randint(0, V, (B, S), device=dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_model(tokens, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    warm = sorted(times[2:])
    step = warm[len(warm) // 2]
    out = {"stepSeconds": step, "stepSecondsAll": times, "tokensPerSecond": B * S / step, "peakAllocatedBytes": torch.cuda.max_memory_allocated(), "loss": loss.item()}
    if cfg.get("flopsPerStep") and cfg.get("peakFlops"):
        out["mfu"] = cfg["flopsPerStep"] / step / cfg["peakFlops"]
    del model, opt, step_model
    torch.cuda.empty_cache()
    return out


result = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "batch": B, "seq": S}
if not torch.cuda.is_available():
    result["error"] = "PyTorch sees no CUDA device"
    print(json.dumps(result))
    sys.exit(1)
for mode in cfg.get("modes", ["eager", "compile"]):
    try:
        result[mode] = run(mode)
    except Exception as e:  # a failed mode is reported, the other still runs
        result[mode] = {"error": f"{type(e).__name__}: {e}"}
print(json.dumps(result))
