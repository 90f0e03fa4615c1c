"""What the Attention variants page shows: runs from ``mha_core.variants.page_runs`` in, Panels, tables and text out.

Three sections: the heads and the key/value heads they share (one variant at a time, its K and V drawn with their
shapes), the KV cache's bytes against the context length (this module and named models, by the formula, with this
module's caches measured), and decoding one token at a time (each call's query rows over the cached keys).
No streamlit and no model runs here.
"""

from __future__ import annotations

import plotly.graph_objects as go

from mha_core.variants.kv_memory import DTYPE_BYTES, PRESETS, VARIANTS, CacheConfig, context_lengths
from mha_core.variants.page_runs import NAMES, VariantsRun

from . import figures
from .figures.panel import Panel, shape_text
from .figures.style import head_colors

THIS_CONFIG = "this module"
CONFIG_CHOICES = (THIS_CONFIG, *PRESETS)


def intro_text() -> str:
    """The page's opening paragraph; its numbers are the presets' (DeepSeek's 576, Mistral's and Gemma's windows)."""
    deepseek, mistral, gemma = PRESETS["DeepSeek-V2"], PRESETS["Mistral 7B v0.1"], PRESETS["Gemma 3 27B (window)"]
    latent = deepseek.latent_dim - deepseek.rope_dim
    gemma_swa, _ = gemma.swa_layers()
    return (
        "Today's models build attention from Listing 3.5 with a few changes, each to shrink the **KV cache**: the "
        "keys and values a model keeps while it generates, so that each new token computes only its own. **GQA** "
        "lets groups of query heads share key/value heads (Llama 3, Qwen3, Gemma 3); **MQA** is its one-group end. "
        f"**MLA** (DeepSeek V2–V3) caches per token and layer one {latent}-wide latent and a {deepseek.rope_dim}-wide "
        f"RoPE key shared by every head: {latent} + {deepseek.rope_dim} = {deepseek.latent_dim} numbers; at "
        "inference DeepSeek folds the up-projections W_UK and W_UV into the query and output projections instead "
        "of rebuilding keys and values (this page's MLA, as the book's 05_mla, rebuilds them and has no RoPE key). "
        "**SWA** lets each token see only the last few: Mistral 7B v0.1 on every layer "
        f"(window {mistral.window:,}), Gemma 3 on {gemma.pattern[0]} of every {sum(gemma.pattern)} layers "
        f"(window {gemma.window:,}; {gemma_swa} of its {gemma.n_layers}). Named as in the book's bonus code, "
        "rasbt/LLMs-from-scratch ch04/03_kv-cache, 04_gqa, 05_mla and 06_swa."
    )


def human_bytes(n: float) -> str:
    """Bytes in decimal units, as the book's estimators print them (GB = 1000³ bytes)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:,.2f} {unit}"
    return f"{n:,.0f} B"


# --- 1. heads and the key/value heads they share ------------------------------------------------------------------


def group_of(run: VariantsRun, kind: str, head: int) -> int:
    """The key/value head query head ``head`` reads under ``kind`` (MLA and SWA: its own, rebuilt or windowed)."""
    kv_heads = run.results[kind].kv_heads
    return head // (run.spec.num_heads // kv_heads)


def _group_strip(groups: list[int], kv_heads: int, kind: str, presenter: bool) -> go.Figure:
    """A 1 × h strip, each query head's cell in its K/V head's colour and labelled with it."""
    h = len(groups)
    palette = head_colors(max(kv_heads, 2))
    scale = [[i / max(kv_heads - 1, 1), palette[i % len(palette)]] for i in range(kv_heads)] if kv_heads > 1 else None
    trace = {
        "type": "heatmap",
        "z": [groups],
        "x": [f"Q head {k}" for k in range(h)],
        "y": ["reads"],
        "text": [[f"K/V {g}" for g in groups]],
        "texttemplate": "%{text}",
        "textfont": {"size": figures.cell_font_size(presenter)},  # the page's body type
        "colorscale": scale or [[0, palette[0]], [1, palette[0]]],
        "showscale": False,
        "xgap": 3,
        "hovertemplate": "%{x} reads K/V head %{z}<extra></extra>",
    }
    layout = {"yaxis": {"showticklabels": False}}  # one unnamed row: the heads are named below it
    title = f"{kind}: {h} query heads read {kv_heads} key/value head{'s' * (kv_heads != 1)}"
    return figures.finish_figure({"data": [trace], "layout": layout}, title, presenter, plot_px=70, below_px=30)


def heads_panels(run: VariantsRun, kind: str, batch_index: int, presenter: bool) -> list[Panel]:
    """The group strip, every head's weights named by its K/V head, and the K and V the variant computes."""
    result = run.results[kind]
    trace = result.trace
    labels = list(run.labels)
    h = run.spec.num_heads
    weights = trace.numpy("attn_weights")[batch_index]  # (h, T, T)
    names = [f"head {k} · K/V {group_of(run, kind, k)}" for k in range(h)]
    panels = [
        Panel(
            "variants_groups",
            "Which key/value head each query head reads",
            _group_caption(run, kind),
            _group_strip([group_of(run, kind, k) for k in range(h)], result.kv_heads, kind, presenter),
        ),
        Panel(
            "variants_weights",
            "Attention weights, per query head",
            f"`attn_weights` · shape (b, h, T, T) = {shape_text(trace.info['attn_weights'].shape)} · rows: queries, "
            "columns: keys · heads that share a K/V head read the same keys, with their own queries.",
            figures.heads_heatmap(
                weights, labels, labels, title=f"{kind} weights", kind="weights", head_names=names, presenter=presenter
            ),
        ),
    ]
    return panels + _kv_panels(run, kind, batch_index, presenter)


def heads_look(run: VariantsRun, kind: str) -> str:
    """What to look at in the heads section (markdown): how many K/V heads each variant keeps here, and where that
    shows (the strip's colours, the K and V panels, the table's cache column)."""
    spec = run.spec
    h, d = spec.num_heads, spec.head_dim
    kv = {k: run.results[k].kv_heads for k in ("MHA", "GQA", "MQA")}
    floats = {k: 2 * n * d for k, n in kv.items()}
    same = " (here GQA is MQA: raise num_heads to tell them apart)" if kv["GQA"] in (1, h) else ""
    return (
        f"**What to look at:** {h} query heads of head_dim {d} read {kv['MHA']} key/value heads under MHA, "
        f"{kv['GQA']} under GQA and 1 under MQA{same}. Switch the variant: the strip's colours show which query "
        f"heads share a K/V head, the K and V panels keep one head per K/V head, and each token's cache falls from "
        f"{floats['MHA']} to {floats['GQA']} to {floats['MQA']} numbers (the table's cache column). Showing {kind}."
    )


def _group_caption(run: VariantsRun, kind: str) -> str:
    spec = run.spec
    if kind in ("GQA", "MQA"):
        size = spec.num_heads // run.results[kind].kv_heads
        return (
            f"num_heads = {spec.num_heads}, num_kv_groups = {run.results[kind].kv_heads}: each K/V head serves "
            f"{size} query head{'s' * (size != 1)} in a row (`repeat_interleave`)."
        )
    if kind == "MLA":
        return f"Each head has its own keys and values, rebuilt from one {spec.latent_dim}-wide latent per token."
    if kind == "SWA":
        return f"Each head has its own keys and values; every query sees only the last {spec.window} of them."
    return "Listing 3.5: every head has its own keys and values."


def _kv_panels(run: VariantsRun, kind: str, batch_index: int, presenter: bool) -> list[Panel]:
    """K and V as the variant computes them (before any repeat): (T, g·d) with one band per K/V head."""
    trace = run.results[kind].trace
    labels = list(run.labels)
    kv_heads = run.results[kind].kv_heads
    panels = []
    if kind == "MLA":
        latent = trace.numpy("latent")[batch_index]  # (T, r)
        panels.append(
            Panel(
                "variants_latent",
                "The latent: all the cache keeps per token",
                f"`latent` = W_DKV(x) · shape (b, T, r) = {shape_text(trace.info['latent'].shape)} · keys and values "
                "below are W_UK(latent) and W_UV(latent).",
                figures.matrix_heatmap(
                    latent, labels, None, title="latent", presenter=presenter, col_title="latent dim"
                ),
            )
        )
    for step, what in (("keys", "K"), ("values", "V")):
        matrix = trace.numpy(step)[batch_index]  # (T, g·d)
        panels.append(
            Panel(
                f"variants_{step}",
                f"{what}: {kv_heads} key/value head{'s' * (kv_heads != 1)} of {run.spec.head_dim} dims",
                f"`{step}` · shape (b, T, g·head_dim) = {shape_text(trace.info[step].shape)} · one band per K/V "
                f"head; Q has {run.spec.num_heads} heads: (b, T, {run.spec.d_out}).",
                figures.matrix_heatmap(
                    matrix,
                    labels,
                    None,
                    title=what,
                    column_groups=kv_heads,
                    group_names=[f"K/V {g}" for g in range(kv_heads)],
                    presenter=presenter,
                ),
            )
        )
    return panels


def variants_table(run: VariantsRun) -> list[dict]:
    """Per variant: parameters, K/V heads, numbers cached per token, and the cache at T tokens, formula and measured."""
    config = run.spec.cache_config()
    tokens = len(run.labels)
    rows = []
    for kind in VARIANTS:
        result = run.results[kind]
        formula = config.bytes_of(kind, tokens, batch=run.batch_size)
        measured = dict(result.measured)[tokens]
        rows.append(
            {
                "variant": f"{kind} ({NAMES[kind]})",
                "parameters": result.parameters,
                "K/V heads": result.kv_heads,
                "cached per token": _per_token(config, kind),
                f"cache at T={tokens} (formula)": formula,
                "measured": measured,
                "same": formula == measured,
            }
        )
    return rows


def _per_token(config: CacheConfig, kind: str) -> str:
    """What ``kind`` caches per token and layer under ``config``, as its bytes count it."""
    if kind == "MLA":
        if config.rope_dim:
            latent = config.latent_dim - config.rope_dim
            return f"{config.latent_dim} (latent {latent} + shared RoPE key {config.rope_dim})"
        return f"{config.latent_dim} (latent)"
    text = f"2 × {config.kv_heads_of(kind)} × {config.head_dim}"
    if kind != "SWA":
        return text
    swa_layers, full_layers = config.swa_layers()
    if not full_layers:
        return f"{text}, last {config.window} tokens"
    return f"{text}, last {config.window} tokens on {swa_layers} layers, every token on {full_layers}"


# --- 2. the KV cache's bytes against the context length ------------------------------------------------------------


def config_for(choice: str, run: VariantsRun) -> CacheConfig:
    """The chosen named model's config, or this module's shape as one layer."""
    return run.spec.cache_config() if choice == THIS_CONFIG else PRESETS[choice]


def bytes_series(config: CacheConfig, xs: list[int], batch: int) -> dict[str, list[float]]:
    """Each variant's cache at each length by the formula; the model's own variant marked."""
    return {
        f"{kind}{' (its own)' if kind == config.own and config.name in PRESETS else ''}": [
            float(config.bytes_of(kind, t, batch=batch)) for t in xs
        ]
        for kind in VARIANTS
    }


def bytes_figure(choice: str, run: VariantsRun, presenter: bool) -> Panel:
    """KV-cache bytes against tokens on log axes for the five variants; this module's measured caches over them."""
    config = config_for(choice, run)
    here = choice == THIS_CONFIG
    batch = run.batch_size if here else 1
    measured = {kind: dict(result.measured) for kind, result in run.results.items()} if here else {}
    xs = sorted(set(context_lengths(config.context_length)) | {t for m in measured.values() for t in m})
    series = bytes_series(config, xs, batch)
    for kind, found in measured.items():
        series[f"{kind} measured"] = [float(found[t]) if t in found else None for t in xs]
    figure = figures.line_chart(
        xs,
        series,
        title=f"KV cache of {config.name}: bytes against tokens",
        x_title="tokens in the cache (context length)",
        y_title="cache size (kB, MB, GB: 1000ⁿ bytes)",
        log_x=True,
        log_y=True,
        presenter=presenter,
    )
    _byte_ticks(figure)
    caption = (
        f"batch {batch} × tokens × {config.n_layers} layer{'s' * (config.n_layers != 1)} × numbers per token and "
        f"layer × {DTYPE_BYTES[config.dtype]} bytes ({config.dtype}). Log axes: every variant but SWA is a straight "
        f"line of slope 1; {swa_shape(config)}"
        + (" Rings: this process's modules, their caches measured after a prefill of that many tokens." if here else "")
    )
    return Panel("variants_bytes", "KV-cache bytes against the context length", caption, figure)


def swa_shape(config: CacheConfig) -> str:
    """How SWA's line runs: flat after the window when every layer has one; bent, then slope 1 again, when some
    layers keep every token (Gemma 3's 5:1)."""
    swa_layers, full_layers = config.swa_layers()
    if not full_layers:
        return f"SWA flattens once the window ({config.window:,} tokens) is full: every layer keeps only its window."
    return (
        f"SWA bends once the window ({config.window:,} tokens) is full but keeps slope 1: its {full_layers} full "
        f"layer{'s' * (full_layers != 1)} of {config.n_layers} keep every token."
    )


def byte_tick(value: float) -> str:
    """A log axis tick in decimal units: 1 kB, 20 MB, 1.5 GB (never 1e+10)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{value / size:g} {unit}"
    return f"{value:g} B"


def _byte_ticks(figure) -> None:
    """The bytes axis labelled in B, kB, MB, GB, and the hover in the same units."""
    axis = figure.layout.yaxis
    if axis.tickvals is not None:
        axis.ticktext = [byte_tick(v) for v in axis.tickvals]
    for trace in figure.data:
        trace.customdata = [human_bytes(y) if y is not None else "" for y in trace.y]
        trace.hovertemplate = trace.hovertemplate.replace("%{y:.4g}", "%{customdata}")


def bytes_look(config: CacheConfig) -> str:
    """What to look at in the cache chart (markdown): the lines' order and distances, from the config's own numbers."""
    per_token = {kind: config.bytes_of(kind, 1) for kind in ("MHA", "GQA", "MQA", "MLA")}
    ratio = {kind: per_token["MHA"] / per_token[kind] for kind in ("GQA", "MQA", "MLA")}
    apart = {k: f"{r:.3g}× lower" if r >= 1 else f"{1 / r:.3g}× higher" for k, r in ratio.items()}
    return (
        "**What to look at:** each line is one variant's cache as the context grows, from MHA's. GQA's "
        f"lies {apart['GQA']} ({config.n_kv_heads} K/V heads for {config.n_heads}), MQA's {apart['MQA']} (one), "
        f"MLA's {apart['MLA']} (a {config.latent_dim}-wide latent); SWA's follows MHA's until its window of "
        f"{config.window} tokens is full, then stays flat."
    )


def _itemsize(config: CacheConfig) -> int:
    return {"float32": 4, "bfloat16": 2, "float16": 2}.get(config.dtype, 1)


def bytes_table(choice: str, run: VariantsRun) -> list[dict]:
    """Each variant's cache at the config's full context, and its share of MHA's."""
    config = config_for(choice, run)
    batch = run.batch_size if choice == THIS_CONFIG else 1
    tokens = config.context_length
    mha = config.bytes_of("MHA", tokens, batch=batch)
    return [
        {
            "variant": f"{kind} ({NAMES[kind]})" + _whose(kind, config, choice),
            "cached per token and layer": _per_token(config, kind),
            f"bytes at {tokens:,} tokens": human_bytes(config.bytes_of(kind, tokens, batch=batch)),
            "of MHA's": f"{config.bytes_of(kind, tokens, batch=batch) / mha:.1%}",
        }
        for kind in VARIANTS
    ]


def _whose(kind: str, config: CacheConfig, choice: str) -> str:
    """A named model's own variant, or a what-if: what it would cache built that way."""
    if choice == THIS_CONFIG:
        return ""
    return " · its own" if kind == config.own else " · what-if"


def _knob(config: CacheConfig, field: str, text: str) -> str:
    return f"{text} (what-if)" if field in config.what_if else text


def preset_text(choice: str, run: VariantsRun) -> str:
    """Where the chosen config's numbers come from (markdown)."""
    if choice == THIS_CONFIG:
        spec = run.spec
        return (
            f"This module: d_out = {spec.d_out}, {spec.num_heads} heads of {spec.head_dim}, num_kv_groups = "
            f"{spec.num_kv_groups}, latent {spec.latent_dim}, window {spec.window}, one layer, float32, batch "
            f"{run.batch_size}, up to its context_length {spec.context_length}."
        )
    config = PRESETS[choice]
    pattern = f" on {config.pattern[0]} of every {sum(config.pattern)} layers" if config.pattern != (1, 0) else ""
    knobs = ", ".join(
        (
            _knob(config, "n_kv_heads", f"{config.n_kv_heads} K/V heads"),
            _knob(config, "latent_dim", f"latent {config.latent_dim}"),
            _knob(config, "window", f"window {config.window}{pattern}"),
        )
    )
    what_if = " What-ifs are not the model's: the page sizes the other variants with them." if config.what_if else ""
    return (
        f"**{config.name}**: {config.n_layers} layers, {config.n_heads} query heads of {config.head_dim}, {knobs}, "
        f"{config.dtype}; its own variant: {config.own}.{what_if} Source: {config.source}"
    )


BOOK_FIGURES = (
    "The formula is the book's (rasbt/LLMs-from-scratch, ch04/04_gqa, 05_mla, 06_swa): its GQA estimator prints "
    "MHA 17.18 GB and GQA 4.29 GB for emb_dim 4096, 32 heads, 32 layers, 32,768 tokens, bfloat16, with 8 K/V heads "
    "(its `n_kv_groups 4` counts query heads per K/V head, where its `GroupedQueryAttention(num_kv_groups=...)` counts "
    "K/V heads); this project's tests reproduce those figures."
)
