"""The query builder's issue-20 levers, pure: class bags, the cursor's line and its settings, aliases."""

from __future__ import annotations

from dataclasses import replace

from soma_lsp.knobs import line_settings
from soma_lsp.query import ALL_ON, Levers, build_query

MODEL = '''import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = RMSNorm(dim)
        self.wq = nn.Linear(dim, dim)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        h = self.norm(x)
        return self.drop(self.wq(h))


class RotaryEmbedding(nn.Module):
    rope_theta: float = 1_000_000.0

    def forward(self, freqs_cis):
        return freqs_cis
'''


def at(needle: str, *, scope="hover", levers: Levers = ALL_ON, source: str = MODEL, path="m.py"):
    line = next(i for i, text in enumerate(source.splitlines()) if needle in text)
    character = source.splitlines()[line].index(needle) + 1
    return build_query(source, path, position=(line, character), scope=scope, levers=levers)


def test_a_method_has_its_class_bag_with_the_class_name():
    built = at("return self.drop")
    assert built.scope.qualname == "Attention.forward"
    assert built.architecture == {"RMSNorm": 1.0, "Linear": 1.0, "Dropout": 1.0, "Attention": 1.0}
    off = at("return self.drop", levers=replace(ALL_ON, class_bag=False))
    assert off.architecture == {}  # forward builds nothing itself


def test_a_class_bag_holds_its_own_name_but_not_module_bases():
    built = at("class RotaryEmbedding", scope="lens")
    assert built.architecture == {"RotaryEmbedding": 1.0}
    assert at("class RotaryEmbedding", scope="lens", levers=replace(ALL_ON, class_bag=False)).architecture == {}


def test_the_cursor_line_gives_focus_terms_and_its_settings():
    built = at("rope_theta: float")
    assert built.hints.settings == (("rope_theta", "1000000.0", "1_000_000.0"),)
    assert built.hints.focus == ("rope", "theta")
    assert at("rope_theta: float", levers=replace(ALL_ON, knob=False)).hints.settings == ()
    assert at("rope_theta: float", levers=replace(ALL_ON, cursor=False)).hints.focus == ()


def test_a_lens_is_about_the_whole_definition_not_a_line():
    built = at("class RotaryEmbedding", scope="lens")
    assert built.hints.focus == ()
    assert at("class RotaryEmbedding", scope="hover").hints.focus == ("rotary", "embedding", "rotaryembedding", "module")


def test_in_body_tells_a_line_of_the_body_from_the_definitions_name_line():
    assert at("return self.drop", scope="find").hints.in_body  # a line of Attention.forward's body
    assert not at("class RotaryEmbedding", scope="find").hints.in_body  # its own name line
    assert not at("def forward(self, x)", scope="find").hints.in_body
    assert not at("class RotaryEmbedding", scope="lens").hints.in_body  # a lens has no line


def test_aliases_add_the_other_names_of_the_ideas_near_the_cursor_only():
    assert "rotary" in at("return freqs_cis").text  # the class name says it already
    source = ("def apply(freqs_cis, xq, eps):\n    y = layer_norm(xq, eps)\n"
              "    return xq * freqs_cis\n")
    on = at("return xq", source=source)  # the cursor's line names freqs_cis
    assert {"rope", "rotary"} <= set(on.text.split())
    assert on.hints.aliases and "freqs" in on.hints.aliases[0]
    assert "ln" not in on.text.split()  # layer_norm is in the scope, not near the cursor
    near_norm = at("y = layer_norm", source=source)
    assert "ln" in near_norm.text.split() and "rotary" not in near_norm.text.split()
    off = at("return xq", source=source, levers=replace(ALL_ON, aliases=False))
    assert "rope" not in off.text.split() and off.hints.aliases == ()


def test_a_phrase_with_a_one_letter_or_stop_word_term_fires_only_on_the_identifier_it_spells():
    from soma_lsp.query.vocabulary import expand

    fused, groups = expand(["attn", "linear"], ["c_attn", "Linear"])  # nanoGPT's fused QKV projection
    assert "qkv" in fused and groups
    assert expand(["attn", "linear"], ["q_attn", "Linear"]) == (["attn", "linear"], ())  # not any `attn`
    assert "tril" in expand(["causal"], ["is_causal"])[0]
    assert expand(["causal"], ["causal"]) == (["causal"], ())  # "is" alone is no evidence of `is_causal`


def test_an_alias_group_asks_for_its_specific_words_only():
    from soma_lsp.query.vocabulary import GENERIC, expand

    asked, groups = expand(["loss", "logsumexp"], ["z_loss", "logsumexp"])
    assert {"zloss", "softmax", "normaliser", "normalizer", "partition"} <= set(asked)
    assert not GENERIC.intersection(asked[2:]) and not GENERIC.intersection(groups[0])
    source = "def step(logits):\n    z_loss = torch.logsumexp(logits, -1).pow(2).mean()\n    return z_loss\n"
    built = at("z_loss = torch", source=source)
    assert "normaliser" in built.text.split() and "log" not in built.text.split()


def test_line_settings_read_code_and_config_assignments():
    assert line_settings("    rope_theta: float = 1_000_000.0")["rope_theta"].value == "1000000.0"
    assert line_settings("gae_lambda: 0.95")["gae_lambda"].value == "0.95"
    assert line_settings("    config.ema_decay = 0.9999")["ema_decay"].value == "0.9999"
    assert line_settings("  loss = smoothed(logits, eps=0.1)")["eps"].value == "0.1"
    assert line_settings('dtype: str = "bf16"')["dtype"].value == "bf16"
    assert line_settings("    theta: float = theta") == {}  # a name is no setting
    assert line_settings("x = nn.Linear(d, d)") == {}
    assert line_settings("if a == 3:") == {}


def test_a_bare_word_is_a_setting_in_a_config_file_not_in_code():
    assert line_settings("prediction: v", config=True)["prediction"].value == "v"
    assert line_settings("  beta_schedule: Cosine  # the ADM default", config=True)["beta_schedule"].value == "cosine"
    assert line_settings("prediction: v") == {}  # in code a bare word is a name
    assert line_settings("    theta: float = theta") == {}
    built = build_query("num_timesteps: 1000\nbeta_schedule: cosine\n", "conf/diffusion.yaml",
                        position=(1, 3), scope="find")
    assert built.hints.settings == (("beta_schedule", "cosine", "cosine"),) and built.hints.knob == "beta_schedule"


def test_find_in_a_config_file_asks_the_whole_file_with_the_cursors_line_in_focus():
    source = "beta_schedule: cosine\nprediction: v\ncond_drop_prob: 0.1\n"
    built = build_query(source, "conf/diffusion.yaml", position=(1, 3), scope="find")
    assert built.basis == "file" and "cond" in built.text.split()
    assert built.hints.focus == ("prediction",)  # (one-letter terms are no terms)
    assert build_query(source, "conf/diffusion.yaml", position=(1, 3), scope="find",
                       levers=replace(ALL_ON, cursor=False)).hints.focus == ()


def test_the_word_under_the_cursor_is_the_knob_it_points_at():
    source = "def guided(cond, uncond, guidance_scale=3.0):\n    return uncond + guidance_scale * (cond - uncond)\n"
    body = build_query(source, "sample.py", position=(1, 20), scope="find")
    assert body.hints.knob == "guidance_scale" and body.hints.settings == ()
    signature = build_query(source, "sample.py", position=(0, 30), scope="find")
    assert signature.hints.knob == "guidance_scale" and signature.hints.settings[0][0] == "guidance_scale"
    assert build_query(source, "sample.py", position=(1, 20), scope="find",
                       levers=replace(ALL_ON, knob=False)).hints.knob == ""


def test_every_alias_group_says_where_it_comes_from():
    from pathlib import Path

    from soma_lsp.query.vocabulary import ALIASES

    doc = (Path(__file__).resolve().parents[1] / "docs" / "vocabulary.md").read_text(encoding="utf-8")
    rows = [line.split("|")[1] for line in doc.splitlines() if line.startswith("| `")]
    listed = {name.strip().strip("`") for row in rows for name in row.split(",")}
    assert {group[0] for group in ALIASES} == listed


def test_a_speech_name_asks_for_the_words_of_its_paper():
    source = "def conv_module(self, x):\n    x = F.glu(self.pointwise_conv1(x), dim=1)\n    return self.depthwise(x)\n"
    on_glu = build_query(source, "conformer.py", position=(1, 12), scope="find")
    assert {"gated", "unit"} <= set(on_glu.text.split())  # `F.glu`: the gated linear unit
    assert "gated" not in build_query(source, "conformer.py", position=(2, 17), scope="find").text.split()


def test_a_class_name_line_holds_the_settings_its_constructor_takes():
    source = ("class LogMel(nn.Module):\n"
              "    def __init__(self, sample_rate, n_fft: int = 512,\n"
              "                 hop_length=160, dither=1e-5) -> None:  # (a return annotation)\n"
              "        super().__init__()\n"
              "        self.window = torch.hann_window(n_fft)\n"
              "\n"
              "    def forward(self, x, eps=1e-6):\n"
              "        return self.window * x\n")
    on_name = build_query(source, "f.py", position=(0, 8), scope="find")
    assert {"hop", "length", "dither", "fft"} <= set(on_name.hints.focus)
    assert "sample" not in on_name.hints.focus and "eps" not in on_name.hints.focus  # no default / not its constructor
    in_body = build_query(source, "f.py", position=(4, 12), scope="find")
    assert "dither" not in in_body.hints.focus
    assert build_query(source, "f.py", position=(0, 8), scope="find",
                       levers=replace(ALL_ON, cursor=False)).hints.focus == ()


def test_on_a_functions_own_name_its_defaults_are_no_knob_asked():
    source = "def postprocess(outputs, sizes, focal_loss=False, top_k=100):\n    return outputs\n"
    on_name = build_query(source, "p.py", position=(0, 6), scope="find")
    assert on_name.hints.settings == ()  # the function is asked, not its defaults
    sampler = "def ddim_sample_loop(model, sample_steps=50, eta=0.0):\n    return model\n"
    assert build_query(sampler, "s.py", position=(0, 6), scope="find").hints.settings == (
        ("sample_steps", "50.0", "50"),)  # … but for one its name shares a word with
    on_default = build_query(source, "p.py", position=(0, 36), scope="find")
    assert on_default.hints.knob == "focal_loss" and ("focal_loss", "false", "False") in on_default.hints.settings


def test_a_line_opening_a_bracket_holds_the_statement_up_to_its_close():
    source = ("def main(args, model):\n"
              "    param_dicts = [\n"
              "        {\"params\": model.head},\n"
              "        {\"params\": model.backbone, \"lr\": args.lr_backbone},\n"
              "    ]\n"
              "    optimizer = AdamW(param_dicts, weight_decay=args.weight_decay)\n")
    built = build_query(source, "main.py", position=(1, 6), scope="find")
    assert {"dicts", "head", "backbone", "lr"} <= set(built.hints.focus)
    assert "optimizer" not in built.hints.focus and "weight" not in built.hints.focus  # the statement ends at `]`
    closed = build_query(source, "main.py", position=(5, 6), scope="find")
    assert "backbone" not in closed.hints.focus  # a closed line is itself
    assert build_query(source, "main.py", position=(1, 6), scope="find",
                       levers=replace(ALL_ON, cursor=False)).hints.focus == ()


def test_a_line_reading_a_config_setting_asks_for_it():
    source = ("def train(args, cfg):\n"
              "    now = step % args.policy_frequency == 0 and cfg[\"clip_eps\"] > args.lr\n"
              "    opt = Adam(lr=1e-3, eps=args.eps) if args.lr else None\n")
    built = build_query(source, "t.py", position=(1, 4), scope="find")
    assert built.hints.reads == ("policy_frequency", "clip_eps", "lr")
    on_read = build_query(source, "t.py", position=(1, 30), scope="find")  # on `policy_frequency`: the word asks it
    assert on_read.hints.knob == "policy_frequency" and on_read.hints.reads == ("clip_eps", "lr")
    assert build_query(source, "t.py", position=(2, 4), scope="find").hints.reads == ("eps",)  # `lr=1e-3` is set here
    assert build_query(source, "t.py", position=(1, 4), scope="find",
                       levers=replace(ALL_ON, knob=False)).hints.reads == ()


def test_a_setting_read_by_its_key_from_any_mapping_is_a_read_setting():
    source = ("def do_train(cfg):\n"
              "    o = cfg[\"optim\"]\n"
              "    lr = o[\"base_lr\"] * math.sqrt(cfg[\"train\"][\"batch_size_per_gpu\"] / 1024)\n"
              "    last = 0.0 if it < o['freeze_last_layer_epochs'] else lr\n")
    assert build_query(source, "t.py", position=(2, 4), scope="find").hints.reads == ("base_lr", "batch_size_per_gpu")
    assert build_query(source, "t.py", position=(3, 4), scope="find").hints.reads == ("freeze_last_layer_epochs",)
    assert build_query(source, "t.py", position=(0, 6), scope="find").hints.body_reads == (
        "optim", "base_lr", "batch_size_per_gpu", "freeze_last_layer_epochs")  # on the name line: what the body reads


def test_a_line_asks_for_the_settings_of_the_condition_it_runs_under():
    source = ("def main(args, env):\n"
              "    for step in range(args.total_steps):\n"
              "        if step < args.learning_starts:\n"
              "            # random actions first\n"
              "            action = env.action_space.sample()\n"
              "        else:\n"
              "            action = policy(obs)\n"
              "        elsewhere = 1\n")
    reads = [build_query(source, "m.py", position=(row, 14), scope="find").hints.reads for row in (4, 6, 7)]
    assert reads == [("learning_starts",), ("learning_starts",), ("total_steps",)]  # `else:` runs under its `if`
    assert build_query(source, "conf.yaml", position=(4, 14), scope="find").hints.reads == ()  # (no blocks in YAML)


def test_a_line_asks_for_the_settings_its_class_copied_into_the_attributes_it_reads():
    source = ("class SparseMoeBlock(nn.Module):\n"
              "    def __init__(self, config):\n"
              "        self.top_k = config.num_experts_per_tok\n"
              "        self.scale = config.hidden_size ** -0.5\n"
              "        # self.jitter = config.router_jitter_noise\n"
              "        self.gate = nn.Linear(config.hidden_size, config.num_local_experts)\n"
              "\n"
              "    def forward(self, x):\n"
              "        weights, experts = torch.topk(self.gate(x), self.top_k, dim=-1)\n"
              "        return x * self.scale + self.jitter\n"
              "\n"
              "def route(self, x):\n"
              "    return torch.topk(x, self.top_k)\n")
    assert build_query(source, "moe.py", position=(8, 8), scope="find").hints.reads == ("num_experts_per_tok",)
    # a value made from a setting, an attribute set in a comment, a function outside any class: no setting
    assert build_query(source, "moe.py", position=(9, 8), scope="find").hints.reads == ()
    assert build_query(source, "moe.py", position=(12, 8), scope="find").hints.reads == ()
    assert build_query(source, "moe.py", position=(8, 8), scope="find",
                       levers=replace(ALL_ON, knob=False)).hints.reads == ()


def test_torchs_checkpoint_argument_names_activation_recomputation():
    """`checkpoint(layer, …, use_reentrant=False)`: the notes say "recompute" (try 140); `checkpoint`
    alone is no evidence — it saves a model as often as it recomputes activations."""
    from soma_lsp.query.vocabulary import expand

    asked, groups = expand(["checkpoint", "layer", "use", "reentrant"])
    assert {"recompute", "recomputation", "remat"} <= set(asked) and len(groups) == 1
    assert expand(["save", "checkpoint"]) == (["save", "checkpoint"], ())


def test_a_functions_name_line_asks_for_the_settings_its_body_reads():
    source = ("def make_lora_config(args):\n"
              "    return LoraConfig(r=args.lora_r, lora_dropout=args.lora_dropout,\n"
              "                      target_modules=cfg['target_modules'])\n"
              "\n"
              "class Block:\n"
              "    def __init__(self, config):\n"
              "        self.top_k = config.num_experts_per_tok\n")
    on_name = build_query(source, "lora.py", position=(0, 6), scope="find")
    assert on_name.hints.body_reads == ("lora_r", "lora_dropout", "target_modules") and on_name.hints.reads == ()
    assert build_query(source, "lora.py", position=(1, 8), scope="find").hints.body_reads == ()  # in the body: its line
    assert build_query(source, "lora.py", position=(4, 7), scope="find").hints.body_reads == ()  # a class's name
    assert build_query(source, "lora.py", position=(0, 6), scope="lens").hints.body_reads == ()
    assert build_query(source, "lora.py", position=(0, 6), scope="find",
                       levers=replace(ALL_ON, knob=False)).hints.body_reads == ()


def test_a_packing_masks_segment_ids_name_the_block_diagonal_mask():
    """`segment_ids[:, None, :, None] == segment_ids[:, None, None, :]`: the notes say "block-diagonal",
    "document mask" (try 145); `segment` alone (a segmentation model's) fires nothing."""
    from soma_lsp.query.vocabulary import expand

    asked, groups = expand(["allowed", "segment", "ids"], ["allowed", "segment_ids"])
    assert {"block", "diagonal", "document", "seqlens"} <= set(asked) and len(groups) == 1
    assert expand(["segment", "logits"]) == (["segment", "logits"], ())


def test_on_a_definitions_name_line_its_description_joins_the_line():
    source = ('# the stochastic-depth helper\n'
              'def drop_path(x, drop_prob: float = 0.0, training: bool = False):\n'
              '    """Skip the residual branch per sample, rescaled by the keep probability."""\n'
              '    # bernoulli mask\n'
              '    keep = 1 - drop_prob\n'
              '    return x * keep  # a guard\n')
    name_line = at("def drop_path", source=source)
    assert {"drop", "path", "prob", "training"} <= set(name_line.hints.focus)  # the signature's terms
    assert {"skip", "residual", "branch", "rescaled", "keep", "probability", "bernoulli", "stochastic",
            "depth", "helper"} <= set(name_line.hints.focus)  # docstring, the comment before the code, above
    assert "guard" not in name_line.hints.focus  # a comment among the code is of its own line
    body_line = at("keep = 1", source=source)
    assert body_line.hints.focus == ("keep", "drop", "prob")  # a line of the body is that line alone
    assert "skip" not in at("def drop_path", source=source, scope="lens").hints.focus  # a lens has no line
    assert at("def drop_path", source=source, levers=replace(ALL_ON, cursor=False)).hints.focus == ()
    undocumented = at("def forward(self, x)")  # nothing said: the signature alone
    assert undocumented.hints.focus == ("forward",)


def test_on_name_is_the_definitions_own_name_on_its_name_line():
    """Lever `named` stays off on a definition's own name: the whole definition is asked there."""
    source = "def drop_path(x, drop_prob=0.0):\n    keep = 1 - drop_prob\n    return x * keep\n"
    assert at("drop_path", source=source).hints.on_name
    assert not at("drop_prob=", source=source).hints.on_name  # a default on the name line: that setting
    assert not at("keep = 1", source=source).hints.on_name


def test_a_definition_asked_from_a_position_knows_its_files_other_definitions():
    built = at("return self.drop", scope="find")  # Attention.forward, in a file of seven definitions
    others = built.hints.others
    assert len(others) == 6 and all(isinstance(words, frozenset) for words in others)
    assert frozenset(built.text.split()) not in others  # not its own
    assert any({"rotary", "embedding", "freqs", "cis"} <= words for words in others)  # RotaryEmbedding.forward's
    assert at("class RotaryEmbedding", scope="lens").hints.others == ()  # a lens has no position to tell
    assert at("return self.drop", scope="hover").hints.others == ()  # a hover is latency-bound
    assert at("return self.drop", scope="find", levers=replace(ALL_ON, hubs=False)).hints.others == ()
    two = "def a(x):\n    return x\n\n\ndef b(y):\n    return y\n"
    assert at("return x", source=two, scope="find").hints.others == ()  # too few definitions to tell a file from a scope
