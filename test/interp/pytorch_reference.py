# Independent reference for test/interp/pytorch-parity.test.ts: rebuilds a GPT (samples/gpt-tiny.fsm) or a
# Llama-style model (LlamaBlock of samples/lib/transformer.fsm) in PyTorch from raw weights, computes the
# loss of one batch and every parameter's gradient, and writes them back as raw little-endian float32.
#
# Usage: /usr/bin/python3 pytorch_reference.py DIR
#   DIR/meta.json: {"arch": "gpt" | "llama", "config": {...}, "batch": [B, S], "params": [{"name", "shape"}]}
#   DIR/param.<name>.bin, DIR/tokens.bin, DIR/targets.bin (int32) → DIR/grad.<name>.bin, DIR/result.json
import json
import math
import os
import sys

import torch
import torch.nn.functional as F


def load(path, dtype, shape):
    with open(path, "rb") as f:
        data = f.read()
    return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape).clone()


def attention(x, P, prefix, cfg, bias):
    """Fused attention as the fsm kernel defines it: packed [q heads | k heads | v heads] projection,
    grouped-query via repeat_interleave (HF repeat_kv), HF Llama rotate_half rotary embeddings."""
    B, S, d = x.shape
    H, K = cfg["heads"], cfg.get("kv_heads", cfg["heads"])
    hd = d // H
    qkv = F.linear(x, P[prefix + ".qkv.weight"], P[prefix + ".qkv.bias"] if bias else None)
    q, k, v = qkv.split([H * hd, K * hd, K * hd], dim=-1)
    q = q.view(B, S, H, hd).transpose(1, 2)
    k = k.view(B, S, K, hd).transpose(1, 2)
    v = v.view(B, S, K, hd).transpose(1, 2)
    if cfg.get("rope", False):
        inv_freq = 1.0 / (10000 ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        freqs = torch.outer(torch.arange(S, dtype=torch.float64), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)

        def rotate_half(t):
            return torch.cat((-t[..., hd // 2:], t[..., : hd // 2]), dim=-1)

        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
    k = k.repeat_interleave(H // K, dim=1)
    v = v.repeat_interleave(H // K, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
    mask = torch.triu(torch.ones(S, S, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(mask, float("-inf"))
    y = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, S, d)
    return F.linear(y, P[prefix + ".proj.weight"], P[prefix + ".proj.bias"] if bias else None)


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def gpt(P, tokens, cfg):
    S = tokens.shape[1]
    d, eps = cfg["d"], 1e-5
    h = F.embedding(tokens, P["wte.weight"]) + F.embedding(torch.arange(S), P["wpe.weight"])
    for i in range(cfg["n_layer"]):
        p = f"layers.{i}"
        h = h + attention(F.layer_norm(h, (d,), P[p + ".ln_1.weight"], P[p + ".ln_1.bias"], eps), P, p + ".attn", cfg, True)
        m = F.layer_norm(h, (d,), P[p + ".ln_2.weight"], P[p + ".ln_2.bias"], eps)
        m = F.linear(F.gelu(F.linear(m, P[p + ".mlp.fc.weight"], P[p + ".mlp.fc.bias"])), P[p + ".mlp.proj.weight"], P[p + ".mlp.proj.bias"])
        h = h + m
    h = F.layer_norm(h, (d,), P["ln_f.weight"], P["ln_f.bias"], eps)
    # lm_head tied to wte unless the model has its own (bench/gpt-867k.fsm's untied head).
    return F.linear(h, P["lm_head.weight"] if "lm_head.weight" in P else P["wte.weight"])


def llama(P, tokens, cfg):
    eps = cfg["eps"]
    h = F.embedding(tokens, P["tok_embeddings.weight"])
    for i in range(cfg["n_layer"]):
        p = f"layers.{i}"
        h = h + attention(rms_norm(h, P[p + ".attention_norm.weight"], eps), P, p + ".attn", cfg, False)
        x = rms_norm(h, P[p + ".ffn_norm.weight"], eps)
        f = F.linear(F.silu(F.linear(x, P[p + ".ffn.gate.weight"])) * F.linear(x, P[p + ".ffn.up.weight"]), P[p + ".ffn.down.weight"])
        h = h + f
    return F.linear(rms_norm(h, P["norm.weight"], eps), P["output.weight"])


def main(directory):
    meta = json.load(open(os.path.join(directory, "meta.json")))
    B, S = meta["batch"]
    P = {}
    for p in meta["params"]:
        P[p["name"]] = load(os.path.join(directory, f"param.{p['name']}.bin"), torch.float32, p["shape"]).requires_grad_(True)
    tokens = load(os.path.join(directory, "tokens.bin"), torch.int32, [B, S]).long()
    targets = load(os.path.join(directory, "targets.bin"), torch.int32, [B, S]).long()
    logits = (gpt if meta["arch"] == "gpt" else llama)(P, tokens, meta["config"])
    loss = F.cross_entropy(logits.reshape(B * S, -1), targets.reshape(B * S))
    loss.backward()
    for name, t in P.items():
        g = t.grad if t.grad is not None else torch.zeros_like(t)
        with open(os.path.join(directory, f"grad.{name}.bin"), "wb") as f:
            f.write(g.detach().contiguous().numpy().astype("<f4").tobytes())
    json.dump({"loss": loss.item(), "torch": torch.__version__}, open(os.path.join(directory, "result.json"), "w"))


if __name__ == "__main__":
    main(sys.argv[1])
