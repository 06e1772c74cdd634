#!/usr/bin/env python3
"""docsparse's CUDA attention kernels against PyTorch on the same GPU, same inputs.

For each length and batch (bf16, 12 heads, head_dim 64) it times, in one process:
  * dense SDPA (FlashAttention and cuDNN backends; the faster is the baseline),
  * FlexAttention given the block mask of our LSG plan (the same query-key pairs),
  * our block-sparse kernel on that LSG plan (and on the dense plan, for the
    kernel's own efficiency),
  * our edge kernel on random edge sets at 1%, 5% and 20% density (Bernoulli
    edges sampled with torch on the GPU, that sampling timed apart), and on
    edges drawn by our GPU fastRG sampler from SBM tables (sampling included).
Each figure is the median of CUDA-event timings after warm-up. It also checks
that our LSG output equals FlexAttention's and exact attention's within bf16
error, so a fast wrong kernel cannot pass. Prints a Markdown table (and JSON
with --json).

Needs a CUDA PyTorch (>= 2.5 for FlexAttention) and the library
build/bench/libdocsparse_cuda_attention.so (bench/CMakeLists.txt). Runs on the
GPU machine: scripts/device-test calls it.
"""
import argparse
import ctypes
import json
import math
import sys
import time

import torch
import torch.nn.functional as F

BF16 = 1
GLOBAL_TOKENS = 1
BLOCK = 128  # LSG block_size = sparse_block_size, as models/minilm-lsg
SPARSITY_FACTOR = 2  # derived (pooled) keys: one per SPARSITY_FACTOR tokens


def log(message):
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# The LSG-shaped plan: extended keys [global ; pooled keys ; tokens].


def lsg_plan(length):
    """Query blocks of BLOCK tokens; per block the spans of the LSG pattern over
    the extended key sequence: the global token, the pooled keys of the
    sparse_block_size tokens' worth of context on each side beyond the local
    window, and the local window (the block and its two neighbours)."""
    pooled = length // SPARSITY_FACTOR
    pooled_base = GLOBAL_TOKENS
    token_base = GLOBAL_TOKENS + pooled
    k_len = token_base + length
    blocks = (length + BLOCK - 1) // BLOCK
    starts = [min(i * BLOCK, length) for i in range(blocks + 1)]
    spans = []
    offsets = [0]
    for i in range(blocks):
        row = [(0, GLOBAL_TOKENS)]
        # Pooled keys covering BLOCK * SPARSITY_FACTOR tokens before the local
        # window, then after it (clipped to the document).
        left_end = max(0, (i - 1) * BLOCK) // SPARSITY_FACTOR
        left_begin = max(0, left_end - BLOCK)
        right_begin = min(pooled, (i + 2) * BLOCK // SPARSITY_FACTOR)
        right_end = min(pooled, right_begin + BLOCK)
        local_begin = max(0, (i - 1) * BLOCK)
        local_end = min(length, (i + 2) * BLOCK)
        if left_end > left_begin:
            row.append((pooled_base + left_begin, left_end - left_begin))
        row.append((token_base + local_begin, local_end - local_begin))
        if right_end > right_begin:
            row.append((pooled_base + right_begin, right_end - right_begin))
        row.sort()
        spans.extend(row)
        offsets.append(len(spans))
    return starts, offsets, spans, k_len


def dense_plan(length):
    blocks = (length + BLOCK - 1) // BLOCK
    starts = [min(i * BLOCK, length) for i in range(blocks + 1)]
    return starts, list(range(blocks + 1)), [(0, length)] * blocks, length


def plan_pairs(starts, offsets, spans):
    """Query-key pairs the plan computes, per head."""
    total = 0
    for i in range(len(starts) - 1):
        keys = sum(length for _, length in spans[offsets[i]:offsets[i + 1]])
        total += keys * (starts[i + 1] - starts[i])
    return total


def plan_tensors(starts, offsets, spans, batch_heads, device):
    """Device arrays of the plan, repeated for every (item, head)."""
    blocks = len(starts) - 1
    per_row = torch.tensor(offsets, dtype=torch.int64)
    count = int(per_row[-1])
    all_offsets = (per_row[:-1].repeat(batch_heads) +
                   torch.arange(batch_heads).repeat_interleave(blocks) * count)
    all_offsets = torch.cat([all_offsets, torch.tensor([batch_heads * count])])
    span_array = torch.tensor(spans, dtype=torch.int32).repeat(batch_heads, 1)
    return (torch.tensor(starts, dtype=torch.int32, device=device),
            all_offsets.to(torch.int32).to(device), span_array.contiguous().to(device))


def flex_block_mask(starts, offsets, spans, q_len, k_len, device):
    """FlexAttention's BlockMask for the same pairs: per 128-query block the
    key blocks fully inside the spans (no mask_mod evaluated) and the partial
    ones (mask_mod looks the key up in the block's row of an allowed table)."""
    from torch.nn.attention.flex_attention import BlockMask

    blocks = len(starts) - 1
    kv_blocks = (k_len + BLOCK - 1) // BLOCK
    allowed = torch.zeros(blocks, kv_blocks * BLOCK, dtype=torch.bool)
    for i in range(blocks):
        for begin, length in spans[offsets[i]:offsets[i + 1]]:
            allowed[i, begin:begin + length] = True
    counts = allowed.view(blocks, kv_blocks, BLOCK).sum(-1)
    full = counts == BLOCK
    partial = (counts > 0) & ~full

    def to_indices(selected):
        num = selected.sum(-1).to(torch.int32)
        order = torch.argsort((~selected).to(torch.int8), dim=-1, stable=True).to(torch.int32)
        return num[None, None].to(device), order[None, None].contiguous().to(device)

    kv_num, kv_idx = to_indices(partial)
    full_num, full_idx = to_indices(full)
    table = allowed.to(device)

    def mask_mod(b, h, q_idx, kv_idx):
        return table[q_idx // BLOCK, kv_idx]

    return BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx,
                                    BLOCK_SIZE=BLOCK, mask_mod=mask_mod,
                                    seq_lengths=(q_len, k_len))


# --------------------------------------------------------------------------
# Timing.


def cuda_ms(fn, min_iters=5, budget_s=0.5):
    """Median milliseconds of fn over CUDA events, after warm-up."""
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    times = []
    start_wall = time.time()
    while len(times) < min_iters or (time.time() - start_wall < budget_s and len(times) < 50):
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def sdpa_ms(q, k, v):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    best = None
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION):
        try:
            with sdpa_kernel([backend]):
                ms = cuda_ms(lambda: F.scaled_dot_product_attention(q, k, v))
        except RuntimeError as error:
            log(f"  SDPA {backend.name} unavailable: {str(error).splitlines()[0]}")
            continue
        log(f"  SDPA {backend.name}: {ms:.3f} ms")
        if best is None or ms < best[0]:
            best = (ms, backend.name)
    return best


class Kernels:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        p, i, f = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
        self.lib.docsparse_block_sparse_attention.argtypes = [
            p, p, p, p, i, i, i, i, i, i, f, i, p, p, p, i, p]
        self.lib.docsparse_edge_attention.argtypes = [p, p, p, p, i, i, i, i, i, i, f, p, p]
        self.lib.docsparse_fill_edge_views.argtypes = [p, p, ctypes.c_int64, p, i, i]
        self.lib.docsparse_build_alias_table.argtypes = [p, i, p]
        self.lib.docsparse_sbm_sample.argtypes = [i, i, p, p, p, p, ctypes.c_uint64, p, p]
        self.lib.docsparse_sbm_free.argtypes = [p, p, p]

    def block_sparse(self, q, k, v, out, plan, blocks, max_rows):
        starts, offsets, spans = plan
        b, h, q_len, d = q.shape
        status = self.lib.docsparse_block_sparse_attention(
            q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), BF16, b, h, q_len,
            k.shape[2], d, 1.0 / math.sqrt(d), blocks, starts.data_ptr(), offsets.data_ptr(),
            spans.data_ptr(), max_rows, torch.cuda.current_stream().cuda_stream)
        if status != 0:
            raise RuntimeError(f"block-sparse kernel: cudaError {status}")

    def edge_views(self, row_offsets, keys, batch_heads, rows):
        size = self.lib.docsparse_edge_view_bytes()
        host = torch.empty(batch_heads * size, dtype=torch.uint8)
        self.lib.docsparse_fill_edge_views(host.data_ptr(), row_offsets.data_ptr(),
                                           row_offsets.stride(0), keys.data_ptr(),
                                           batch_heads, rows)
        return host.to(row_offsets.device)

    def sbm_tables(self, length, clusters, density, generator):
        """One head's fastRG tables on the GPU: random soft memberships
        (R = Q̂S and K̂ uniform), R scaled so that the mean edge probability
        1 - exp(-p_ij) is about `density`."""
        key_membership = torch.rand(length, clusters, generator=generator)
        rate_target = -math.log(1 - density)  # mean p_ij
        profile = torch.rand(length, clusters, generator=generator) * (
            rate_target * 4 / clusters)
        key_mass = key_membership.double().sum(0)
        row_rate = (profile.double() * key_mass).sum(1)
        entry = self.lib.docsparse_alias_entry_bytes()
        alias = torch.empty(clusters * length * entry, dtype=torch.uint8)
        for b in range(clusters):
            column = key_membership[:, b].contiguous()
            self.lib.docsparse_build_alias_table(column.data_ptr(), length,
                                                 alias.data_ptr() + b * length * entry)
        return [x.cuda() for x in (row_rate, profile.contiguous(), key_mass, alias)]

    def sbm_sample(self, tables, length, clusters, head_key):
        out = torch.zeros(4, dtype=torch.int64)
        row_rate, profile, key_mass, alias = tables
        status = self.lib.docsparse_sbm_sample(
            length, clusters, row_rate.data_ptr(), profile.data_ptr(), key_mass.data_ptr(),
            alias.data_ptr(), head_key, torch.cuda.current_stream().cuda_stream, out.data_ptr())
        if status != 0:
            raise RuntimeError(f"fastRG sampler: cudaError {status}")
        return [int(x) for x in out]

    def sbm_free(self, sample):
        self.lib.docsparse_sbm_free(sample[0], sample[1], torch.cuda.current_stream().cuda_stream)

    def edges(self, q, k, v, out, views):
        b, h, q_len, d = q.shape
        status = self.lib.docsparse_edge_attention(
            q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), BF16, b, h, q_len,
            k.shape[2], d, 1.0 / math.sqrt(d), views.data_ptr(),
            torch.cuda.current_stream().cuda_stream)
        if status != 0:
            raise RuntimeError(f"edge kernel: cudaError {status}")


def exact_rows(q, k, v, plan_lists, rows):
    """Exact fp32 attention for a few query rows of (item 0, head 0)."""
    starts, offsets, spans = plan_lists
    outs = []
    for row in rows:
        block = row // BLOCK
        keys = torch.cat([torch.arange(b, b + n) for b, n in spans[offsets[block]:offsets[block + 1]]])
        keys = keys.to(q.device)
        scores = (q[0, 0, row].float() @ k[0, 0, keys].float().T) / math.sqrt(q.shape[-1])
        outs.append(torch.softmax(scores, -1) @ v[0, 0, keys].float())
    return torch.stack(outs)


def sample_edges(heads, length, density, generator):
    """Bernoulli(density) edges per (head, query), as CSR on the GPU: row
    offsets [heads, length + 1] into one keys array."""
    keys, counts = [], []
    for _ in range(heads):
        mask = torch.rand(length, length, device="cuda", generator=generator) < density
        counts.append(mask.sum(-1))
        keys.append(mask.nonzero()[:, 1].to(torch.int32))
    counts = torch.stack(counts)
    flat = torch.cat([torch.zeros(1, dtype=torch.int64, device="cuda"),
                      counts.flatten().cumsum(0)])
    per_head = length
    row_offsets = torch.stack([flat[h * per_head:h * per_head + length + 1] for h in range(heads)])
    return row_offsets.contiguous(), torch.cat(keys), int(flat[-1])


# --------------------------------------------------------------------------


def run_case(kernels, length, batch, heads, head_dim, flex, densities, with_dense, results):
    device = "cuda"
    torch.manual_seed(length + batch)
    log(f"== {length} tokens, batch {batch}, {heads} heads, d={head_dim}")
    q = torch.randn(batch, heads, length, head_dim, device=device, dtype=torch.bfloat16)
    starts, offsets, spans, k_len = lsg_plan(length)
    k = torch.randn(batch, heads, k_len, head_dim, device=device, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    k_tok, v_tok = k[:, :, k_len - length:], v[:, :, k_len - length:]

    dense_pairs = length * length
    sdpa = sdpa_ms(q, k_tok.contiguous(), v_tok.contiguous())
    row = {"tokens": length, "batch": batch, "heads": heads, "head_dim": head_dim,
           "sdpa_ms": sdpa[0], "sdpa_backend": sdpa[1],
           "sdpa_tflops": 4 * head_dim * dense_pairs * batch * heads / sdpa[0] / 1e9}

    # Our kernel, dense plan (the kernel's own efficiency against SDPA).
    kd, vd = k_tok.contiguous(), v_tok.contiguous()
    if with_dense:
        d_plan = dense_plan(length)
        d_tensors = plan_tensors(*d_plan[:3], batch * heads, device)
        out = torch.empty_like(q)
        ms = cuda_ms(lambda: kernels.block_sparse(q, kd, vd, out, d_tensors, len(d_plan[0]) - 1,
                                                  BLOCK))
        ref = F.scaled_dot_product_attention(q, kd, vd)
        row["ours_dense_ms"] = ms
        row["ours_dense_max_err_vs_sdpa"] = (out.float() - ref.float()).abs().max().item()
        log(f"  ours dense: {ms:.3f} ms (max |ours - SDPA| "
            f"{row['ours_dense_max_err_vs_sdpa']:.4f})")

    # LSG plan: ours and FlexAttention on the same pairs.
    lsg_tensors = plan_tensors(starts, offsets, spans, batch * heads, device)
    pairs = plan_pairs(starts, offsets, spans)
    out = torch.empty_like(q)
    ms = cuda_ms(lambda: kernels.block_sparse(q, k, v, out, lsg_tensors, len(starts) - 1, BLOCK))
    row.update(lsg_ms=ms, lsg_density=pairs / dense_pairs,
               lsg_tflops=4 * head_dim * pairs * batch * heads / ms / 1e9,
               lsg_speedup_vs_sdpa=sdpa[0] / ms)
    exact = exact_rows(q, k, v, (starts, offsets, spans), [0, length // 2 + 3, length - 1])
    got = out[0, 0, [0, length // 2 + 3, length - 1]].float()
    row["lsg_max_err_vs_exact"] = (got - exact).abs().max().item()
    log(f"  ours LSG: {ms:.3f} ms, density {row['lsg_density']:.4f}, "
        f"{sdpa[0] / ms:.1f}x SDPA, max err vs exact {row['lsg_max_err_vs_exact']:.4f}")
    if flex is not None:
        try:
            t0 = time.time()
            mask = flex_block_mask(starts, offsets, spans, length, k_len, device)
            flex_out = flex(q, k, v, block_mask=mask)  # compiles
            log(f"  FlexAttention mask and compile: {time.time() - t0:.1f} s")
            fms = cuda_ms(lambda: flex(q, k, v, block_mask=mask))
            row.update(flex_ms=fms, lsg_speedup_vs_flex=fms / ms,
                       lsg_max_diff_vs_flex=(flex_out.float() - out.float()).abs().max().item())
            log(f"  FlexAttention (same mask): {fms:.3f} ms; ours/flex speed {fms / ms:.2f}x, "
                f"max |ours - flex| {row['lsg_max_diff_vs_flex']:.4f}")
        except Exception as error:  # keep the other figures of the run
            log(f"  FlexAttention failed: {type(error).__name__}: {str(error)[:300]}")

    # SBM-like edges (one item, up to 16k tokens: the sampler draws a dense
    # Bernoulli matrix per head).
    if batch == 1 and length <= 16384:
        generator = torch.Generator(device="cuda")
        generator.manual_seed(7)
        for density in densities:
            torch.cuda.synchronize()
            t0 = time.time()
            row_offsets, keys, edges = sample_edges(heads, length, density, generator)
            torch.cuda.synchronize()
            sample_ms = (time.time() - t0) * 1e3
            views = kernels.edge_views(row_offsets, keys, heads, length)
            out = torch.empty_like(q)
            ms = cuda_ms(lambda: kernels.edges(q, kd, vd, out, views))
            tag = f"sbm{int(round(density * 100))}"
            row.update({f"{tag}_ms": ms, f"{tag}_sample_ms": sample_ms,
                        f"{tag}_tflops": 4 * head_dim * edges / ms / 1e9,
                        f"{tag}_speedup_vs_sdpa": sdpa[0] / ms})
            log(f"  ours edges {density:.0%}: {ms:.3f} ms ({edges} edges; torch sampling "
                f"{sample_ms:.1f} ms), {sdpa[0] / ms:.2f}x SDPA")
            del row_offsets, keys, views
        # Our GPU fastRG sampler on SBM tables (8 clusters), then the edge kernel.
        try:
            clusters = 8
            generator = torch.Generator().manual_seed(11)
            for density in densities:
                tables = [kernels.sbm_tables(length, clusters, density, generator)
                          for _ in range(heads)]
                sample_times, samples = [], None
                for attempt in range(3):
                    if samples is not None:
                        for sample in samples:
                            kernels.sbm_free(sample)
                    torch.cuda.synchronize()
                    t0 = time.time()
                    samples = [kernels.sbm_sample(tables[h], length, clusters, 1000 * attempt + h)
                               for h in range(heads)]
                    torch.cuda.synchronize()
                    sample_times.append((time.time() - t0) * 1e3)
                sample_ms = sorted(sample_times)[1]
                size = kernels.lib.docsparse_edge_view_bytes()
                host = torch.empty(heads * size, dtype=torch.uint8)
                for h, sample in enumerate(samples):
                    kernels.lib.docsparse_fill_edge_views(host.data_ptr() + h * size, sample[0], 0,
                                                          sample[1], 1, length)
                views = host.cuda()
                edges = sum(sample[2] for sample in samples)
                out = torch.empty_like(q)
                ms = cuda_ms(lambda: kernels.edges(q, kd, vd, out, views))
                tag = f"fastrg{int(round(density * 100))}"
                row.update({f"{tag}_ms": ms, f"{tag}_sample_ms": sample_ms,
                            f"{tag}_density": edges / (heads * length * length),
                            f"{tag}_speedup_vs_sdpa": sdpa[0] / (ms + sample_ms)})
                log(f"  fastRG {density:.0%}: sampling {sample_ms:.2f} ms (12 heads), edge kernel "
                    f"{ms:.3f} ms, density {edges / (heads * length * length):.4f}; with sampling "
                    f"{sdpa[0] / (ms + sample_ms):.3f}x SDPA")
                for sample in samples:
                    kernels.sbm_free(sample)
        except Exception as error:  # keep the figures measured so far
            log(f"  fastRG failed: {type(error).__name__}: {str(error)[:300]}")
    results.append(row)


def density_table(results, densities, prefix, header, cells):
    """A Markdown table of the per-density figures stored under prefix<percent>_*."""
    rows = [(r, f"{prefix}{int(round(d * 100))}", d) for r in results for d in densities
            if f"{prefix}{int(round(d * 100))}_ms" in r]
    if not rows:
        return
    print("\n| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r, tag, density in rows:
        print("| " + " | ".join([str(r["tokens"])] + cells(r, tag, density)) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", default="build/bench/libdocsparse_cuda_attention.so")
    parser.add_argument("--cases", default="4096x1,4096x8,16384x1,16384x4,65536x1",
                        help="LENGTHxBATCH, comma-separated")
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--densities", default="0.01,0.05,0.2")
    parser.add_argument("--no-flex", action="store_true")
    parser.add_argument("--no-dense", action="store_true",
                        help="skip our kernel on the dense plan (e.g. to profile the LSG one)")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()

    kernels = Kernels(args.lib)
    props = torch.cuda.get_device_properties(0)
    log(f"device: {props.name}, {props.multi_processor_count} SMs; torch {torch.__version__}")
    flex = None
    if not args.no_flex:
        from torch.nn.attention.flex_attention import flex_attention
        flex = torch.compile(flex_attention, dynamic=False)
    densities = [float(x) for x in args.densities.split(",") if x]
    results = []
    for case in args.cases.split(","):
        length, batch = (int(x) for x in case.split("x"))
        try:
            run_case(kernels, length, batch, args.heads, args.head_dim, flex, densities,
                     not args.no_dense, results)
        except Exception as error:  # report it, keep the other cases
            log(f"  case {case} failed: {type(error).__name__}: {str(error)[:500]}")
        torch.cuda.empty_cache()

    peak = 989.0  # H100/H200 SXM dense bf16 tensor TFLOP/s (spec)
    print(f"device: {props.name}; torch {torch.__version__}; bf16, {args.heads} heads, "
          f"d={args.head_dim}; % of peak against {peak:.0f} TFLOP/s\n")
    print("| tokens x batch | SDPA ms (backend) | ours dense ms | LSG density | ours LSG ms "
          "(TFLOP/s, % peak) | Flex same mask ms | ours vs Flex | ours vs SDPA |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        flex_cells = (f"{r['flex_ms']:.3f} | {r['lsg_speedup_vs_flex']:.2f}x"
                      if "flex_ms" in r else "– | –")
        print(f"| {r['tokens']} x {r['batch']} | {r['sdpa_ms']:.3f} ({r['sdpa_backend']}) | "
              f"{r.get('ours_dense_ms', float('nan')):.3f} | {r['lsg_density']:.4f} | {r['lsg_ms']:.3f} "
              f"({r['lsg_tflops']:.0f}, {100 * r['lsg_tflops'] / peak:.0f}%) | {flex_cells} | "
              f"{r['lsg_speedup_vs_sdpa']:.1f}x |")
    density_table(results, densities, "sbm",
                  ["tokens", "edges density", "ours edge ms (TFLOP/s)", "torch sampling ms",
                   "vs SDPA, kernel only"],
                  lambda r, t, density: [f"{density:.0%}", f"{r[t + '_ms']:.3f} "
                                         f"({r[t + '_tflops']:.1f})",
                                         f"{r[t + '_sample_ms']:.1f}",
                                         f"{r[t + '_speedup_vs_sdpa']:.2f}x"])
    density_table(results, densities, "fastrg",
                  ["tokens", "target density", "realised", "our fastRG sampling ms (12 heads)",
                   "our edge kernel ms", "vs SDPA, sampling included"],
                  lambda r, t, density: [f"{density:.0%}", f"{r[t + '_density']:.4f}",
                                         f"{r[t + '_sample_ms']:.2f}", f"{r[t + '_ms']:.3f}",
                                         f"{r[t + '_speedup_vs_sdpa']:.3f}x"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": props.name, "torch": torch.__version__, "results": results}, f,
                      indent=1)


if __name__ == "__main__":
    main()
