"""The explorer's settings: defaults, ranges, URL parsing and reconciliation. No streamlit.

The URL is the state: every setting lives in the query string under its own name. Values
read from a URL are untrusted, so each one is parsed strictly, clamped or replaced, and
explained in a notice. Notices quote user text only through ``quote``, which cannot render
as HTML or markdown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace

from explorer.glue.memory import budget
from explorer.glue.state import strict
from explorer.glue.state.strict import INT_PATTERN, LONG_INT_PATTERN
from explorer.glue.state.trained_link import format_trained_spec, parse_trained_spec
from mha_core import devices
from mha_core.attention.inputs import BOOK_TEXT, tokenize
from mha_core.attention.positions import POSITION_KINDS
from mha_core.runs.forward import INPUT_KINDS, InputSpec, ModuleSpec
from mha_core.runs.profiling import attention_cells
from mha_core.toy.tasks import TASKS

# The one strict parser lives in strict.py (widget_guard parses widget values with it too); pages read it here.
quote, parse_int, parse_choice, parse_float = strict.quote, strict.parse_int, strict.parse_choice, strict.parse_float
MAX_HEADS = 16
MAX_HEAD_DIM = 64
MAX_D_IN = 1024
MAX_TOKENS = 1024
MAX_CONTEXT = 2048
MAX_BATCH = 8
MAX_DROPOUT = 0.9
MAX_SEED = 2**31 - 1
MAX_TEXT_CHARS = 2000
# What the Trained heads page offers; a ?trained= link is clamped to it, so a link costs no more than the page.
TRAIN_HEAD_CHOICES = (1, 2, 4, 8)  # divisors of TRAIN_D_MODEL
TRAIN_D_MODEL = 32
TRAIN_MIN_STEPS, TRAIN_MAX_STEPS = 10, 2000
# b·h·T² attention cells per kind of matrix: 16 heads × 1024² tokens with batch 1 fits, bigger does not.
MAX_ATTENTION_CELLS = attention_cells(1, MAX_HEADS, MAX_TOKENS)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything that determines what the explorer computes. Defaults are the book's example."""

    num_heads: int = 2
    d_in: int = 3
    d_out: int = 2
    num_tokens: int = 6
    context_length: int = 6
    batch_size: int = 2
    dropout: float = 0.0
    train: bool = False  # dropout is active only in train mode
    qkv_bias: bool = False
    seed: int = 123
    input: str = "book"  # book | random | text
    text: str = BOOK_TEXT
    device: str = "cpu"
    dtype: str = "float32"
    trained: str = ""  # a trained layer (a trained_link spec) instead of seeded random weights
    model: str = ""  # a real GPT's layer instead: "own" (the shipped model) or "gpt2"; "" for none
    layer: int = 0  # which block of that model (read from a URL only together with ?model=)
    positions: str = "none"  # the position knob (POSITION_KINDS): drawn beside the module, which stays Listing 3.5
    rope_base: int = 10_000  # RoPE's θ base, one of ROPE_BASES

    @property
    def head_dim(self) -> int:
        return self.d_out // self.num_heads

    def module_spec(self) -> ModuleSpec:
        return self._spec(ModuleSpec)

    def input_spec(self) -> InputSpec:
        return self._spec(InputSpec, kind=self.input)

    def position_knob(self) -> dict[str, object]:
        """The position knob's settings: they change what the Positions views draw, never the module's output."""
        return {"positions": self.positions, "rope_base": self.rope_base}

    def _spec(self, spec_class, **renamed):
        """A spec whose every field is this setting of the same name (or given in ``renamed``): listed once."""
        own = {f.name: getattr(self, f.name) for f in fields(spec_class) if f.name not in renamed}
        return spec_class(**own, **renamed)

    def is_book_example(self) -> bool:
        """True when the output must equal the book's printed numbers (any batch size or device)."""
        book = replace(
            DEFAULTS, device=self.device, dtype=self.dtype, batch_size=self.batch_size, **self.position_knob()
        )
        return replace(self, train=False) == book and self.dtype in ("float32", "float64")


DEFAULTS = Settings()
FIELD_NAMES = tuple(f.name for f in fields(Settings))

# inclusive ranges of the integer settings (d_out is checked through head_dim)
INT_RANGES: dict[str, tuple[int, int]] = {
    "num_heads": (1, MAX_HEADS),
    "d_in": (1, MAX_D_IN),
    "d_out": (1, MAX_HEADS * MAX_HEAD_DIM),
    "num_tokens": (1, MAX_TOKENS),
    "context_length": (1, MAX_CONTEXT),
    "batch_size": (1, MAX_BATCH),
    "seed": (0, MAX_SEED),
    "layer": (0, 47),  # the model's own layer count clamps it further (real_fit)
}
REAL_MODELS = ("own", "gpt2")
ROPE_BASES = (100, 1_000, 10_000, 100_000, 1_000_000)  # RoPE's θ base: 10,000 is RoFormer's, 500,000 Llama 3's
KNOWN_DEVICES = ("cpu", "cuda", "mps")
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _parse_int(name: str, raw: str, notices: list[str]) -> int | None:
    low, high = INT_RANGES[name]
    value, notice = parse_int(name, raw, getattr(DEFAULTS, name), low, high)
    if notice is not None:
        notices.append(notice)
    number = INT_PATTERN.fullmatch(str(raw).strip()) or LONG_INT_PATTERN.fullmatch(str(raw).strip())
    return value if number else None  # None: keep the base settings' value


def _parse_float(name: str, raw: str, low: float, high: float, notices: list[str]) -> float | None:
    value, notice = parse_float(name, raw, getattr(DEFAULTS, name), low, high)
    if notice is not None:
        notices.append(notice)
    bad = notice is not None and "is outside" not in notice
    return None if bad else value  # None: keep the base settings' value


def _parse_bool(name: str, raw: str, notices: list[str]) -> bool | None:
    word = raw.strip().lower()
    if word in _TRUE | _FALSE:
        return word in _TRUE
    notices.append(f"{name}={quote(raw)} is not true/false; using {getattr(DEFAULTS, name)}.")
    return None


def _parse_choice(name: str, raw: str, choices: tuple[str, ...] | list[str], notices: list[str]) -> str | None:
    value, notice = parse_choice(name, raw, getattr(DEFAULTS, name), choices)
    if notice is not None:
        notices.append(notice)
        return None
    return value


def parse_query(params: Mapping[str, object], base: Settings = DEFAULTS) -> tuple[Settings, list[str]]:
    """Settings from query parameters (str or list of str values), over ``base``, with notices.

    Unknown keys are ignored (pages keep their own keys in the same query string). A key
    given several times uses its last value. Then ``reconcile`` makes the whole consistent.
    """
    notices: list[str] = []
    values: dict[str, object] = {}
    for name in FIELD_NAMES:
        if name not in params:
            continue
        raw = params[name]
        if isinstance(raw, (list, tuple)):
            raw = raw[-1] if raw else ""
        raw = str(raw)
        if name in INT_RANGES:
            parsed = _parse_int(name, raw, notices)
        elif name == "dropout":
            parsed = _parse_float(name, raw, 0.0, MAX_DROPOUT, notices)
        elif name in ("train", "qkv_bias"):
            parsed = _parse_bool(name, raw, notices)
        elif name == "input":
            parsed = _parse_choice(name, raw, INPUT_KINDS, notices)
        elif name == "device":
            parsed = _parse_choice(name, raw, KNOWN_DEVICES, notices)  # absent ones fall back in reconcile
        elif name == "dtype":
            parsed = _parse_choice(name, raw, list(devices.DTYPES), notices)
        elif name == "positions":
            parsed = _parse_choice(name, raw, POSITION_KINDS, notices)
        elif name == "rope_base":  # a choice written as a number: 1e4, 10000.0 and -1 are not among them
            parsed = _parse_choice(name, raw, [str(base) for base in ROPE_BASES], notices)
            parsed = None if parsed is None else int(parsed)
        elif name == "model":  # a link that names a model wants one: anything unknown gets the shipped model
            parsed, problem = parse_choice(name, raw, "own", REAL_MODELS)
            notices += [problem] if problem else []
        else:  # text, trained: free text, bounded in reconcile
            parsed = raw
        if parsed is not None:
            values[name] = parsed
    if "trained" in values and "model" not in values:  # a link names one source of real weights: the other goes
        values.update(model="", layer=0)
    elif "model" in values and "trained" not in values:
        values["trained"] = ""
    settings, more = reconcile(replace(base, **values))
    return settings, notices + more


def settings_params(params: Mapping[str, object]) -> dict[str, object]:
    """The query's settings: its keys that are fields, ``layer`` only beside ``model`` (alone, it is the Trained
    heads page's own ``?layer=``)."""
    found = {key: value for key, value in params.items() if key in FIELD_NAMES}
    if not found.get("model"):
        found.pop("layer", None)
    return found


WIDTH_MODES = ("per_head", "fixed")  # ?width=: per_head: d_out = num_heads × head_dim; fixed: d_out stays, split


def head_choices(d_out: int) -> list[int]:
    """num_heads that split a fixed d_out evenly within the ranges (head_dim = d_out // num_heads ≤ MAX_HEAD_DIM)."""
    return [h for h in range(1, MAX_HEADS + 1) if d_out % h == 0 and d_out // h <= MAX_HEAD_DIM]


def parameter_count(settings: Settings) -> int:
    """Parameters of Listing 3.5's module: W_query, W_key, W_value (d_in → d_out, biases with qkv_bias) and
    out_proj (d_out → d_out with bias). num_heads does not appear: heads split d_out, they add no weights."""
    qkv = 3 * (settings.d_in * settings.d_out + (settings.d_out if settings.qkv_bias else 0))
    return qkv + settings.d_out * settings.d_out + settings.d_out


def nearest_multiple(value: int, step: int) -> int:
    """The multiple of step nearest to value, at least step."""
    return max(step, round(value / step) * step)


def _split_notice(s: Settings, fixed: int) -> str:
    """Which value changed and why, naming what the visitor set (not "d_out=2 …" when only num_heads was set)."""
    why = "each head takes d_out / num_heads features, so d_out must be a multiple of num_heads"
    if s.d_out == Settings().d_out and s.num_heads != Settings().num_heads:  # only num_heads was set
        return f"You set num_heads={s.num_heads}; the default d_out={s.d_out} cannot be split into {s.num_heads} heads ({why}). Using d_out={fixed} (head_dim {fixed // s.num_heads})."  # noqa: E501
    return f"d_out={s.d_out} is not divisible by num_heads={s.num_heads}; using d_out={fixed} ({why})."


def reconcile(settings: Settings) -> tuple[Settings, list[str]]:
    """Make conflicting settings consistent, with a one-line notice for each change."""
    notices: list[str] = []
    s = settings
    if len(s.text) > MAX_TEXT_CHARS:
        notices.append(f"The sentence is {len(s.text)} characters long; keeping the first {MAX_TEXT_CHARS}.")
        s = replace(s, text=s.text[:MAX_TEXT_CHARS])
    s = _fit_model(s, notices)
    if s.model:
        return s, notices
    if s.trained:
        s = _fit_trained(s, notices)
    if s.d_out % s.num_heads:
        fixed = min(nearest_multiple(s.d_out, s.num_heads), s.num_heads * MAX_HEAD_DIM)
        notices.append(_split_notice(s, fixed))
        s = replace(s, d_out=fixed)
    if s.head_dim > MAX_HEAD_DIM:
        fixed = s.num_heads * MAX_HEAD_DIM
        notices.append(f"head_dim={s.head_dim} is above {MAX_HEAD_DIM}; using d_out={fixed}.")
        s = replace(s, d_out=fixed)
    if s.input == "text" and not tokenize(s.text):
        notices.append("The sentence has no words; using the book's sentence.")
        s = replace(s, text=BOOK_TEXT)
    if s.input == "book" and s.d_in != 3:
        notices.append(
            f"The book's embeddings are 3-dimensional; with d_in={s.d_in} its six words are embedded "
            "from their text instead."
        )
        s = replace(s, input="text", text=BOOK_TEXT)
    available = {"book": 6, "text": len(tokenize(s.text)), "random": s.num_tokens}[s.input]
    if s.num_tokens > available:
        notices.append(
            f"The input has {available} tokens; tokens {available}–{s.num_tokens - 1} are seeded random embeddings."
        )
    elif s.input == "text" and s.num_tokens < available:
        notices.append(f"The sentence has {available} tokens; showing the first {s.num_tokens}.")
    if s.context_length < s.num_tokens:
        notices.append(
            f"context_length={s.context_length} is below num_tokens={s.num_tokens}; raised to {s.num_tokens}."
        )
        s = replace(s, context_length=s.num_tokens)
    if s.device not in devices.available_devices():
        notices.append(f"Device {quote(s.device)} is not available here; using cpu.")
        s = replace(s, device="cpu")
    if s.dtype not in devices.available_dtypes(s.device):
        notices.append(f"dtype {s.dtype} is not offered on {s.device}; using float32.")
        s = replace(s, dtype="float32")
    if attention_cells(s.batch_size, s.num_heads, s.num_tokens) > MAX_ATTENTION_CELLS:
        fitting = max(1, MAX_ATTENTION_CELLS // attention_cells(1, s.num_heads, s.num_tokens))
        notices.append(
            f"batch_size={s.batch_size} × {s.num_heads} heads × {s.num_tokens}² tokens is over the "
            f"memory budget of {MAX_ATTENTION_CELLS:,} attention cells; using batch_size={fitting}."
        )
        s = replace(s, batch_size=fitting)
    fitted = budget.fitted("explorer", s)  # the one budget in bytes: dtype, train mode and dropout count
    if fitted != s:
        notices.append(budget.fit_notice("explorer", s, fitted))
        s = replace(fitted, context_length=max(fitted.num_tokens, min(s.context_length, MAX_CONTEXT)))
    return s, notices


def _fit_model(s: Settings, notices: list[str]) -> Settings:
    """A real GPT's layer (``?model=``): its shape and tokenizer are loaded only when a link asks for one."""
    if not s.model:
        return replace(s, layer=0)
    from explorer.glue.state.real_fit import fit_real  # loads real_models and the models: only when a link names one

    return fit_real(s, notices)


def clamp_trained(config, layer: int):
    """(config, layer, notices): a trained config moved inside what the Trained heads page offers.

    The page trains d_model = TRAIN_D_MODEL with TRAIN_HEAD_CHOICES heads, TRAIN_MIN_STEPS–TRAIN_MAX_STEPS steps,
    and the task's own vocabulary, length, batch and learning rate. A link asking for more (a 64-token,
    256-batch, 2000-step run takes most of an hour) gets the nearest run the page could have made.
    """
    defaults = TASKS[config.task].defaults
    heads = max(h for h in TRAIN_HEAD_CHOICES if h <= config.num_heads) if config.num_heads >= 1 else 1
    wanted = {
        "num_heads": heads,
        "d_model": TRAIN_D_MODEL,
        "vocab_size": defaults.vocab_size,
        "seq_len": defaults.seq_len,
        "batch_size": defaults.batch_size,
        "lr": defaults.lr,
        "steps": min(max(config.steps, TRAIN_MIN_STEPS), TRAIN_MAX_STEPS),
    }
    changed = {name: value for name, value in wanted.items() if getattr(config, name) != value}
    if not changed:
        return config, layer, []
    what = ", ".join(f"{name} {getattr(config, name):g} → {value:g}" for name, value in changed.items())
    notice = f"The trained model in this link is not one the Trained heads page trains; using {what}."
    return replace(config, **changed), layer, [notice]


def _fit_trained(s: Settings, notices: list[str]) -> Settings:
    """Settings that define the module follow the trained model; a bad spec falls back to random weights."""
    try:
        config, layer = parse_trained_spec(s.trained)
    except ValueError as error:
        notices.append(
            f"trained={quote(s.trained)} is not a trained model ({quote(error, 120)}); showing seeded random weights."
        )
        return replace(s, trained="")
    config, layer, clamped = clamp_trained(config, layer)
    notices += clamped
    fixed = dict(
        num_heads=config.num_heads,
        d_in=config.d_model,
        d_out=config.d_model,
        num_tokens=config.seq_len,
        context_length=config.seq_len,
        batch_size=1,
        dropout=0.0,
        train=False,
        qkv_bias=False,
        device="cpu",
        dtype="float32",
        input="random",
        trained=format_trained_spec(config, layer),
    )
    changed = [name for name, value in fixed.items() if getattr(s, name) != value and name != "trained"]
    if changed and not (changed == ["input"] and s.input != "random"):
        notices.append(
            f"Showing layer {layer} of a model trained on {config.task}: "
            f"{', '.join(n for n in changed if n != 'input')} follow the trained model."
        )
    return replace(s, **fixed)


def to_query(settings: Settings) -> dict[str, str]:
    """Every setting as a query-string value; ``parse_query(to_query(s))`` gives back s."""
    query = {}
    for name, value in asdict(settings).items():
        if name in ("trained", "model") and not value or name == "layer" and not settings.model:
            continue  # absent means seeded random weights; keep ordinary links short
        if name in ("positions", "rope_base") and value == getattr(DEFAULTS, name):
            continue  # absent means Listing 3.5 as printed: a link from before the knob reads the same
        if isinstance(value, bool):
            query[name] = "true" if value else "false"
        else:
            query[name] = str(value)
    return query
