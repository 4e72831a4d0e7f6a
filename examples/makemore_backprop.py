"""Seed 003's exercise: a character-level MLP with BatchNorm, backpropagated by hand.

The forward pass is written step by step, as in the seed (embedding, linear, BatchNorm with
Bessel-corrected variance, tanh, linear, cross-entropy spelled out through max, exp, sum,
reciprocal, log), on a small built-in list of names, through simplegrad. simplegrad gives the
gradient of the loss with respect to every intermediate; the seed's hand-derived backward is
computed in plain numpy; a table shows the largest absolute difference for each, and all must
be at most 1e-10.

Run: python examples/makemore_backprop.py [--quick]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from rich.console import Console
from rich.table import Table

import simplegrad as sg

NAMES_TEXT = """emma olivia ava isabella sophia charlotte mia amelia harper evelyn abigail emily
elizabeth mila ella avery sofia camila aria scarlett victoria madison luna grace chloe penelope
layla riley zoey nora lily eleanor hannah lillian addison aubrey ellie stella natalie zoe leah
hazel violet aurora savannah audrey brooklyn bella claire skylar liam noah william james oliver
benjamin elijah lucas mason logan alexander ethan jacob michael daniel henry jackson sebastian
aiden matthew samuel david joseph carter owen wyatt john jack luke jayden dylan grayson levi
isaac gabriel julian mateo anthony jaxon lincoln joshua christopher andrew theodore caleb
ryan asher nathan thomas leo isaiah charles josiah hudson christian hunter connor eli"""
NAMES = NAMES_TEXT.split()


def dataset(block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (previous block_size characters, next character) pair of the names; '.' = 0."""
    chars = sorted(set("".join(NAMES)))
    stoi = {c: i + 1 for i, c in enumerate(chars)}
    xs, ys = [], []
    for name in NAMES:
        context = [0] * block_size
        for ch in name + ".":
            ix = stoi.get(ch, 0)
            xs.append(context)
            ys.append(ix)
            context = context[1:] + [ix]
    return np.array(xs), np.array(ys)


def main(argv: list[str] | None = None) -> int:
    """Forward in simplegrad, backward by hand in numpy, compared intermediate by intermediate."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller batch, for the tests")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(2147483647)
    block_size, vocab_size, n_embd, n_hidden = 3, 27, 10, 64
    n = 16 if args.quick else 32
    X, Y = dataset(block_size)
    batch = rng.choice(len(Y), size=n, replace=False)
    Xb, Yb = X[batch], Y[batch]

    # parameters initialised as the seed does (non-standard on purpose: no zeros hide a bug)
    op = sg.Ops()
    C = op.var(rng.standard_normal((vocab_size, n_embd)), name="C")
    W1 = op.var(rng.standard_normal((n_embd * block_size, n_hidden)) * (5 / 3)
                / (n_embd * block_size) ** 0.5, name="W1")
    b1 = op.var(rng.standard_normal(n_hidden) * 0.1, name="b1")
    W2 = op.var(rng.standard_normal((n_hidden, vocab_size)) * 0.1, name="W2")
    b2 = op.var(rng.standard_normal(vocab_size) * 0.1, name="b2")
    bngain = op.var(rng.standard_normal((1, n_hidden)) * 0.1 + 1.0, name="bngain")
    bnbias = op.var(rng.standard_normal((1, n_hidden)) * 0.1, name="bnbias")

    # the forward pass, chunked as in the seed
    emb = C[Xb]
    embcat = emb.reshape(n, n_embd * block_size)
    hprebn = embcat @ W1 + b1
    bnmeani = 1 / n * hprebn.sum(0, keepdims=True)
    bndiff = hprebn - bnmeani
    bndiff2 = bndiff ** 2
    bnvar = 1 / (n - 1) * bndiff2.sum(0, keepdims=True)        # Bessel's correction
    bnvar_inv = (bnvar + 1e-5) ** -0.5
    bnraw = bndiff * bnvar_inv
    hpreact = bngain * bnraw + bnbias
    h = hpreact.tanh()
    logits = h @ W2 + b2
    logit_maxes = logits.max(1, keepdims=True)
    norm_logits = logits - logit_maxes
    counts = norm_logits.exp()
    counts_sum = counts.sum(1, keepdims=True)
    counts_sum_inv = counts_sum ** -1
    probs = counts * counts_sum_inv
    logprobs = probs.log()
    loss = -logprobs[np.arange(n), Yb].mean()

    names = ["logprobs", "probs", "counts_sum_inv", "counts_sum", "counts", "norm_logits",
             "logit_maxes", "logits", "h", "W2", "b2", "hpreact", "bngain", "bnbias", "bnraw",
             "bnvar_inv", "bnvar", "bndiff2", "bndiff", "hprebn", "bnmeani", "embcat", "W1",
             "b1", "emb", "C"]
    local = locals()
    auto = dict(zip(names, op.grad(loss, [local[k] for k in names], create_graph=False)))

    # the seed's hand-derived backward, in plain numpy
    v = {k: local[k].value for k in names}
    d: dict[str, np.ndarray] = {}
    d["logprobs"] = np.zeros_like(v["logprobs"])
    d["logprobs"][np.arange(n), Yb] = -1.0 / n
    d["probs"] = (1.0 / v["probs"]) * d["logprobs"]
    d["counts_sum_inv"] = (v["counts"] * d["probs"]).sum(1, keepdims=True)
    dcounts = v["counts_sum_inv"] * d["probs"]
    d["counts_sum"] = -v["counts_sum"] ** -2 * d["counts_sum_inv"]
    d["counts"] = dcounts + np.ones_like(v["counts"]) * d["counts_sum"]
    d["norm_logits"] = v["counts"] * d["counts"]
    d["logit_maxes"] = (-d["norm_logits"]).sum(1, keepdims=True)
    onehot = np.eye(vocab_size)[v["logits"].argmax(1)]
    d["logits"] = d["norm_logits"] + onehot * d["logit_maxes"]
    d["h"] = d["logits"] @ v["W2"].T
    d["W2"] = v["h"].T @ d["logits"]
    d["b2"] = d["logits"].sum(0)
    d["hpreact"] = (1.0 - v["h"] ** 2) * d["h"]
    d["bngain"] = (v["bnraw"] * d["hpreact"]).sum(0, keepdims=True)
    d["bnraw"] = v["bngain"] * d["hpreact"]
    d["bnbias"] = d["hpreact"].sum(0, keepdims=True)
    dbndiff = v["bnvar_inv"] * d["bnraw"]
    d["bnvar_inv"] = (v["bndiff"] * d["bnraw"]).sum(0, keepdims=True)
    d["bnvar"] = -0.5 * (v["bnvar"] + 1e-5) ** -1.5 * d["bnvar_inv"]
    d["bndiff2"] = 1.0 / (n - 1) * np.ones_like(v["bndiff2"]) * d["bnvar"]
    d["bndiff"] = dbndiff + 2 * v["bndiff"] * d["bndiff2"]
    d["bnmeani"] = (-d["bndiff"]).sum(0, keepdims=True)
    d["hprebn"] = d["bndiff"] + 1.0 / n * np.ones_like(v["hprebn"]) * d["bnmeani"]
    d["embcat"] = d["hprebn"] @ v["W1"].T
    d["W1"] = v["embcat"].T @ d["hprebn"]
    d["b1"] = d["hprebn"].sum(0)
    d["emb"] = d["embcat"].reshape(v["emb"].shape)
    d["C"] = np.zeros_like(v["C"])
    for k in range(Xb.shape[0]):
        for j in range(Xb.shape[1]):
            d["C"][Xb[k, j]] += d["emb"][k, j]

    table = Table(title=f"hand-derived backward vs simplegrad (batch {n}, "
                        f"loss {loss.item():.4f})")
    table.add_column("intermediate")
    table.add_column("shape", justify="right")
    table.add_column("max |hand - simplegrad|", justify="right")
    table.add_column("ok", justify="center")
    worst = 0.0
    for k in names:
        err = float(np.max(np.abs(d[k] - auto[k].value)))
        worst = max(worst, err)
        table.add_row(k, str(v[k].shape), f"{err:.2e}", "yes" if err <= 1e-10 else "NO")
    Console(width=100, markup=False).print(table)      # (no [...] taken for markup)
    print(f"largest difference: {worst:.2e} (required: at most 1e-10)")
    if not worst <= 1e-10:
        print("FAILED: a hand-derived gradient disagrees with simplegrad", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
