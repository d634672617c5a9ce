"""tfm against torch.nn: multi-head attention forward+backward, a full encoder–decoder training step, and greedy
decoding of 128 tokens with and without the key/value cache.

Variants run interleaved (one repeat of each in turn) on the same inputs in one process, and the table reports
medians, so a machine that slows down mid-run slows every variant alike. Not a test: run `make bench`.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch
from torch import nn

import tfm


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def interleaved(variants: dict, repeats: int, device) -> dict[str, float]:
    for fn in variants.values():  # warm-up
        fn()
    times = {name: [] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            sync(device)
            start = time.perf_counter()
            fn()
            sync(device)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def bench_mha(device, repeats):
    B, T, d_model, h = 64, 32, 256, 4
    x = torch.randn(B, T, d_model, device=device)
    fast = tfm.MultiHeadAttention(d_model, h, fast=True).to(device)
    explicit = tfm.MultiHeadAttention(d_model, h, fast=False).to(device)
    reference = nn.MultiheadAttention(d_model, h, batch_first=True).to(device)
    explicit.load_state_dict(fast.state_dict())

    def run_tfm(module):
        return lambda: module(x)[0].sum().backward()

    def run_torch():
        reference(x, x, x, need_weights=False)[0].sum().backward()

    return interleaved({"torch.nn": run_torch, "tfm fast": run_tfm(fast), "tfm explicit": run_tfm(explicit)},
                       repeats, device)


class TorchSeq2Seq(nn.Module):
    """nn.Transformer with the same embeddings, positions and output layer as tfm.EncoderDecoder."""

    def __init__(self, c: tfm.TransformerConfig):
        super().__init__()
        self.pad_id = c.pad_id
        self.src_embed = tfm.TokenEmbedding(c.src_vocab, c.d_model, c.pad_id)
        self.tgt_embed = tfm.TokenEmbedding(c.tgt_vocab, c.d_model, c.pad_id)
        self.positions = tfm.SinusoidalPositionalEncoding(c.d_model, c.max_len, c.dropout)
        self.transformer = nn.Transformer(c.d_model, c.n_heads, c.n_encoder_layers, c.n_decoder_layers, c.d_ff,
                                          c.dropout, batch_first=True)
        self.generator = nn.Linear(c.d_model, c.tgt_vocab)

    def forward(self, src, tgt):
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device, dtype=torch.bool)
        out = self.transformer(self.positions(self.src_embed(src)), self.positions(self.tgt_embed(tgt)),
                               tgt_mask=causal, src_key_padding_mask=src == self.pad_id,
                               tgt_key_padding_mask=tgt == self.pad_id, memory_key_padding_mask=src == self.pad_id)
        return self.generator(out)


def bench_training_step(device, repeats):
    n_vocab, B, T = 1000, 64, 32
    config = dict(src_vocab=n_vocab, tgt_vocab=n_vocab, d_model=256, n_heads=4, n_encoder_layers=3,
                  n_decoder_layers=3, d_ff=1024, dropout=0.1, max_len=64, tie_output=False, final_norm=True)
    models = {"torch.nn": TorchSeq2Seq(tfm.TransformerConfig(**config)),
              "tfm fast": tfm.EncoderDecoder(tfm.TransformerConfig(**config)),
              "tfm explicit": tfm.EncoderDecoder(tfm.TransformerConfig(**config, fast=False))}
    counts = {name: tfm.count_parameters(m) for name, m in models.items()}
    assert len(set(counts.values())) == 1, f"parameter counts differ: {counts}"
    src = torch.randint(4, n_vocab, (B, T), device=device)
    tgt = torch.randint(4, n_vocab, (B, T + 1), device=device)
    src[: B // 2, T - 5 :] = 0  # some padding, as in real batches
    loss_fn = nn.CrossEntropyLoss(ignore_index=0)
    steps = {}
    for name, model in models.items():
        model.to(device).train()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

        def step(model=model, optimizer=optimizer):
            logits = model(src, tgt[:, :-1])
            loss = loss_fn(logits.flatten(0, 1), tgt[:, 1:].flatten())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

        steps[name] = step
    return interleaved(steps, repeats, device), counts["tfm fast"]


def bench_decoding(device, repeats):
    config = tfm.TransformerConfig(src_vocab=1000, tgt_vocab=1000, d_model=256, n_heads=4, n_encoder_layers=3,
                                   n_decoder_layers=3, d_ff=1024, dropout=0.0, max_len=256)
    model = tfm.EncoderDecoder(config).to(device).eval()
    src = torch.randint(4, 1000, (8, 32), device=device)
    never = -1  # no end-of-sequence: every run decodes all 128 tokens

    def decode(use_cache):
        return lambda: tfm.greedy_decode(model, src, 128, bos_id=1, eos_id=never, use_cache=use_cache)

    cached, uncached = decode(True)(), decode(False)()
    assert torch.equal(cached, uncached) and cached.shape == (8, 129)
    return interleaved({"without cache": decode(False), "with cache": decode(True)}, max(3, repeats // 3), device)


def machine(device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}"
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {torch.get_num_threads()} threads, torch {torch.__version__}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cpu, cuda or mps (default: tfm.get_device())")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    device = tfm.get_device(args.device)
    torch.manual_seed(0)
    mha = bench_mha(device, args.repeats)
    train, n_params = bench_training_step(device, args.repeats)
    decoding = bench_decoding(device, args.repeats)
    print(f"Machine: {machine(device)}; medians of {args.repeats} interleaved repeats.\n")
    print("| benchmark | variant | median | ratio |")
    print("| --- | --- | ---: | ---: |")
    for title, results, base in (("MHA forward+backward (B 64, T 32, d_model 256, 4 heads)", mha, "torch.nn"),
                                 (f"training step, 3+3 layers, d_model 256 ({n_params / 1e6:.1f}M parameters)", train,
                                  "torch.nn"),
                                 ("greedy decoding, 128 tokens, batch 8", decoding, "with cache")):
        for name, seconds in results.items():
            print(f"| {title} | {name} | {seconds * 1e3:.1f} ms | {seconds / results[base]:.2f}x |")


if __name__ == "__main__":
    main()
