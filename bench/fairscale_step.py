# bench/fairscale's FairScale side (issue 19): a training step of bench/gpt-867k.fsm's GPT under FairScale's
# `Pipe` (GPipe on `cpu` partitions) or `OSS` (ZeRO-1: sharded Adam) + DDP over gloo processes. FairScale is not
# packaged on these registries: FAIRSCALE_SRC must name a checkout of facebookresearch/fairscale's source (the
# directory holding the `fairscale` package; never committed here). Runs under Debian's python3-torch.
#
# The model is the GPT of test/interp/pytorch_reference.py (its `attention`; every parameter's name and shape
# from the fsm plan, passed in by bench/fairscale.ts) cut into an nn.Sequential of one module per fsm layer
# (wte and wpe, whose outputs are summed, form one module), and checked against pytorch_reference.gpt's loss
# before timing. Adam (lr 3e-3) and gradient clipping at 1.0, as bench/gpt-867k.fsm trains.
#
# Usage: FAIRSCALE_SRC=/tmp/fairscale /usr/bin/python3 bench/fairscale_step.py pipe|oss 'META'
#   META: {"config": {d, heads, n_layer}, "batch": [B, S], "params": [{"name", "shape"}], "lr": x,
#          "warmup": n, "steps": n, "threads": t,
#          pipe: "stages": [[fsm layer names of stage 0], ...], "chunks": m, "checkpoint": "except_last"
#          oss:  "ranks": r}
# prints {"fairscale": version, "torch": version, "mode", "threads", "medianMs", "bestMs", "stepsMs": [...],
# "cpuMedianMs": a step's CPU time over every process (rank 0's times the ranks for oss)}.
import json
import os
import socket
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "interp"))
from pytorch_reference import attention, gpt  # noqa: E402

SRC = os.environ.get("FAIRSCALE_SRC")
if not SRC:
    sys.exit("bench/fairscale_step.py: FAIRSCALE_SRC is not set: point it at a checkout of facebookresearch/fairscale (the directory holding the fairscale package)")
if not os.path.isdir(os.path.join(SRC, "fairscale")):
    sys.exit(f"bench/fairscale_step.py: FAIRSCALE_SRC={SRC} holds no fairscale package")
sys.path.insert(0, SRC)
import fairscale  # noqa: E402


class Layer(nn.Module):
    """The parameters of some fsm layers (by full fsm name; registered under '.'→'__')."""

    def __init__(self, params, init):
        super().__init__()
        self.names = [p["name"] for p in params]
        for p in params:
            self.register_parameter(p["name"].replace(".", "__"), nn.Parameter(init[p["name"]].clone()))

    def P(self):
        return {n: getattr(self, n.replace(".", "__")) for n in self.names}


class Embed(Layer):
    def forward(self, tokens):
        P = self.P()
        return F.embedding(tokens, P["wte.weight"]) + F.embedding(torch.arange(tokens.shape[1]), P["wpe.weight"])


class Block(Layer):
    def __init__(self, params, init, prefix, cfg):
        super().__init__(params, init)
        self.prefix, self.cfg = prefix, cfg

    def forward(self, h):
        # pytorch_reference.gpt's loop body for one layer.
        P, p, d = self.P(), self.prefix, self.cfg["d"]
        h = h + attention(F.layer_norm(h, (d,), P[p + ".ln_1.weight"], P[p + ".ln_1.bias"], 1e-5), P, p + ".attn", self.cfg, True)
        m = F.layer_norm(h, (d,), P[p + ".ln_2.weight"], P[p + ".ln_2.bias"], 1e-5)
        m = F.linear(F.gelu(F.linear(m, P[p + ".mlp.fc.weight"], P[p + ".mlp.fc.bias"])), P[p + ".mlp.proj.weight"], P[p + ".mlp.proj.bias"])
        return h + m


class LnF(Layer):
    def __init__(self, params, init, d):
        super().__init__(params, init)
        self.d = d

    def forward(self, h):
        P = self.P()
        return F.layer_norm(h, (self.d,), P["ln_f.weight"], P["ln_f.bias"], 1e-5)


class Head(Layer):
    def forward(self, h):
        return F.linear(h, self.P()["lm_head.weight"])


def build(meta, seed=0):
    """(nn.Sequential, the fsm layer names of each module, the initial weights by name)."""
    torch.manual_seed(seed)
    cfg = meta["config"]
    init = {p["name"]: 0.02 * torch.randn([int(x) for x in p["shape"]]) for p in meta["params"]}
    if "lm_head.weight" not in init:
        sys.exit("bench/fairscale_step.py: the model needs an untied lm_head (bench/gpt-867k.fsm)")
    of = lambda prefix: [p for p in meta["params"] if p["name"] == prefix or p["name"].startswith(prefix + ".")]  # noqa: E731
    modules = [Embed(of("wte") + of("wpe"), init)]
    layers = [["wte", "wpe"]]
    for i in range(cfg["n_layer"]):
        modules.append(Block(of(f"layers.{i}"), init, f"layers.{i}", cfg))
        layers.append([f"layers.{i}"])
    modules += [LnF(of("ln_f"), init, cfg["d"]), Head(of("lm_head"), init)]
    layers += [["ln_f"], ["lm_head"]]
    seq = nn.Sequential(*modules)
    n = sum(p.numel() for p in seq.parameters())
    expected = sum(int(torch.tensor([int(x) for x in p["shape"]]).prod()) for p in meta["params"])
    if n != expected:
        sys.exit(f"bench/fairscale_step.py: the Sequential has {n} parameters, the fsm plan {expected}")
    return seq, layers, init


def check_against_reference(meta, seq, init):
    """The Sequential's loss equals pytorch_reference.gpt's on the same weights and batch."""
    B, S = meta["batch"]
    vocab = init["wte.weight"].shape[0]
    g = torch.Generator().manual_seed(1)
    tokens, targets = torch.randint(0, vocab, (B, S), generator=g), torch.randint(0, vocab, (B, S), generator=g)
    with torch.no_grad():
        a = F.cross_entropy(seq(tokens).reshape(B * S, -1), targets.reshape(B * S)).item()
        b = F.cross_entropy(gpt(init, tokens, meta["config"]).reshape(B * S, -1), targets.reshape(B * S)).item()
    if abs(a - b) > 1e-5 * max(1.0, abs(b)):
        sys.exit(f"bench/fairscale_step.py: the Sequential's loss {a} differs from pytorch_reference.gpt's {b}")


def balance_of(meta, layers):
    """Modules per stage, from the fsm plan's stages (lists of fsm layer names)."""
    where = {name: s for s, names in enumerate(meta["stages"]) for name in names}
    stage_of = []
    for names in layers:
        stages = {where[n] for n in names}
        if len(stages) != 1:
            sys.exit(f"bench/fairscale_step.py: the plan splits module {names} across stages {sorted(stages)}")
        stage_of.append(stages.pop())
    if stage_of != sorted(stage_of):
        sys.exit(f"bench/fairscale_step.py: stages out of order: {stage_of}")
    return [stage_of.count(s) for s in range(len(meta["stages"]))]


def summary(meta, mode, times, cpu, processes, extra):
    warm = sorted(times[meta["warmup"]:])
    cpu_warm = sorted(cpu[meta["warmup"]:])
    return {
        "fairscale": fairscale.__version__,
        "torch": torch.__version__,
        "mode": mode,
        "threads": torch.get_num_threads(),
        "medianMs": round(warm[len(warm) // 2] * 1e3, 3),
        "bestMs": round(warm[0] * 1e3, 3),
        "stepsMs": [round(t * 1e3, 3) for t in times[meta["warmup"]:]],
        # CPU time (user + system) of a step in this process, times the processes (every rank does the same work).
        "cpuMedianMs": round(cpu_warm[len(cpu_warm) // 2] * 1e3 * processes, 3),
        **extra,
    }


def timed_steps(meta, model, opt, clip, rows, seq, vocab):
    """Warm-up and timed training steps on random tokens (rows × seq): wall and CPU seconds per step, the last loss."""
    times, cpu = [], []
    for _ in range(meta["warmup"] + meta["steps"]):
        tokens, targets = torch.randint(0, vocab, (rows, seq)), torch.randint(0, vocab, (rows, seq))
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(tokens).reshape(rows * seq, -1), targets.reshape(rows * seq))
        loss.backward()
        clip()
        opt.step()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return times, cpu, loss


def pipe(meta):
    from fairscale.nn import Pipe

    torch.set_num_threads(meta["threads"])
    seq, layers, init = build(meta)
    check_against_reference(meta, seq, init)
    balance = balance_of(meta, layers)
    model = Pipe(seq, balance=balance, devices=["cpu"] * len(balance), chunks=meta["chunks"], checkpoint=meta["checkpoint"])
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=meta["lr"])
    B, S = meta["batch"]
    vocab = init["wte.weight"].shape[0]
    times, cpu, loss = timed_steps(meta, model, opt, lambda: torch.nn.utils.clip_grad_norm_(params, 1.0), B, S, vocab)
    print(json.dumps(summary(meta, "pipe", times, cpu, 1, {"balance": balance, "chunks": meta["chunks"], "checkpoint": meta["checkpoint"], "loss": round(loss.item(), 5)})))


def oss_rank(meta, rank, port):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from fairscale.optim import OSS

    torch.set_num_threads(meta["threads"])
    world = meta["ranks"]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    seq, _, init = build(meta)  # every rank starts from the same weights
    if rank == 0:
        check_against_reference(meta, seq, init)
    model = DDP(seq)
    opt = OSS(model.parameters(), optim=torch.optim.Adam, lr=meta["lr"])
    B, S = meta["batch"]
    b = B // world
    vocab = init["wte.weight"].shape[0]
    torch.manual_seed(100 + rank)
    dist.barrier()
    times, cpu, loss = timed_steps(meta, model, opt, lambda: opt.clip_grad_norm(1.0), b, S, vocab)
    if rank == 0:
        print(json.dumps(summary(meta, "oss", times, cpu, world, {"ranks": world, "microBatch": b, "loss": round(loss.item(), 5)})))
    dist.destroy_process_group()


def oss(meta):
    """Starts meta.ranks processes of this script (one gloo rank each) and passes on rank 0's line."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OMP_NUM_THREADS": str(meta["threads"])}
    procs = [
        subprocess.Popen([sys.executable, os.path.abspath(__file__), "oss-rank", json.dumps(meta), str(r), str(port)], env=env, stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL)
        for r in range(meta["ranks"])
    ]
    out = procs[0].communicate()[0].decode()
    codes = [p.wait() for p in procs]
    if any(codes):
        sys.exit(f"bench/fairscale_step.py: oss ranks exited {codes}")
    sys.stdout.write(out)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("pipe", "oss", "oss-rank"):
        sys.exit("usage: FAIRSCALE_SRC=DIR /usr/bin/python3 bench/fairscale_step.py pipe|oss 'META'")
    meta = json.loads(sys.argv[2])
    if sys.argv[1] == "pipe":
        pipe(meta)
        # Pipe's worker threads are daemons blocked in torch: a normal interpreter exit can abort ("terminate
        # called without an active exception") after the figures are out.
        sys.stdout.flush()
        os._exit(0)
    elif sys.argv[1] == "oss":
        oss(meta)
    else:
        oss_rank(meta, int(sys.argv[3]), int(sys.argv[4]))
