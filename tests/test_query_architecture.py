"""Architecture bags: Python instantiations per framework, own modules, config files."""

import textwrap

from soma_lsp.query import Levers, architecture_bag, build_query


def bag(src, path="m.py"):
    return architecture_bag(textwrap.dedent(src), path)


def test_pytorch_aliases_and_own_modules():
    src = '''
        import torch
        import torch.nn as nn
        from torch.nn import LayerNorm as LN, Module

        class RMSNorm(nn.Module):
            pass

        class Scaled(RMSNorm):      # subclass of an own module: a module too
            pass

        class MyLinear(nn.Linear):  # subclass of a layer: a module too
            pass

        class Plain:
            pass

        class Block(Module):
            def __init__(self, d):
                super().__init__()
                self.a = nn.Linear(d, d)
                self.b = torch.nn.Linear(d, d)
                self.n = RMSNorm(d)
                self.s = Scaled(d)
                self.m = MyLinear(d, d)
                self.ln = LN(d)
                self.p = nn.Parameter(torch.ones(d))
                self.blocks = nn.ModuleList([nn.GELU() for _ in range(2)])
                self.plain = Plain()
                self.act = nn.functional.gelu(torch.zeros(d))
                nn.init.xavier_uniform_(self.a.weight)
    '''
    assert bag(src) == {"Linear": 2.0, "RMSNorm": 1.0, "Scaled": 1.0, "MyLinear": 1.0,
                        "LayerNorm": 1.0, "GELU": 1.0}


def test_comments_strings_definitions_do_not_count():
    src = '''
        import torch.nn as nn
        # nn.Conv2d(3, 3) in a comment
        s = "nn.Conv1d(3)"
        def helper():
            """nn.Linear(2, 2) in a docstring"""
        class Attention(nn.Module):
            pass
    '''
    assert bag(src) == {}


def test_flax():
    src = '''
        import flax.linen as nn
        class MLP(nn.Module):
            @nn.compact
            def __call__(self, x):
                x = nn.Dense(128)(x)
                x = nn.relu(x)
                x = nn.LayerNorm()(x)
                return nn.Dense(10)(x)
        class Net(nn.Module):
            def setup(self):
                self.mlp = MLP()
                self.conv = nn.Conv(32, (3, 3))
    '''
    assert bag(src) == {"Dense": 2.0, "LayerNorm": 1.0, "MLP": 1.0, "Conv": 1.0}


def test_haiku():
    src = '''
        import haiku as hk
        class Block(hk.Module):
            def __call__(self, x):
                return hk.Linear(4)(x)
        def f(x):
            mlp = hk.nets.MLP([300, 100, 10])
            att = hk.MultiHeadAttention(num_heads=8, key_size=64,
                                        w_init=hk.initializers.TruncatedNormal(1.0))
            return Block()(hk.LayerNorm(axis=-1, create_scale=True, create_offset=True)(x))
        net = hk.transform(f)
    '''
    assert bag(src) == {"Linear": 1.0, "MLP": 1.0, "MultiHeadAttention": 1.0, "Block": 1.0,
                        "LayerNorm": 1.0}


def test_equinox():
    src = '''
        import equinox as eqx
        import jax
        class Block(eqx.Module):
            lin: eqx.nn.Linear
            def __init__(self, key):
                self.lin = eqx.nn.Linear(3, 4, key=key)
                self.mlp = eqx.nn.MLP(2, 2, 8, 2, key=key)
        m = Block(jax.random.PRNGKey(0))
    '''
    assert bag(src) == {"Linear": 1.0, "MLP": 1.0, "Block": 1.0}


def test_keras():
    src = '''
        import tensorflow as tf
        from tensorflow import keras
        from tensorflow.keras import layers
        from keras.layers import Dense as D
        class Residual(layers.Layer):
            def __init__(self):
                super().__init__()
                self.c = layers.Conv2D(64, 3)
                self.bn = tf.keras.layers.BatchNormalization()
                self.d = keras.layers.Dropout(0.1)
                self.o = D(10)
        model = keras.Sequential([layers.Input((32, 32, 3)), Residual(),
                                  layers.GlobalAveragePooling2D()])
    '''
    assert bag(src) == {"Conv2D": 1.0, "BatchNormalization": 1.0, "Dropout": 1.0, "Dense": 1.0,
                        "Residual": 1.0, "GlobalAveragePooling2D": 1.0}


def test_conventional_aliases_without_imports():
    # a fragment (no imports visible): nn → torch.nn, hk → haiku, layers → keras.layers
    assert bag("a = nn.Linear(1, 2)\nb = hk.Linear(3)\nc = layers.Dense(4)\n") == {
        "Linear": 2.0, "Dense": 1.0}


def test_scope_bag_is_the_scopes():
    src = textwrap.dedent('''
        import torch.nn as nn
        class A(nn.Module):
            def __init__(self):
                self.l = nn.Linear(1, 1)
            def forward(self, x):
                return self.l(x)
        class B(nn.Module):
            def __init__(self):
                self.a = A()
                self.n = nn.LayerNorm(1)
        ''')
    line = src.split("\n").index("        self.a = A()")
    scope_only = Levers(class_bag=False)  # docs/spec.md §3.3 as such; the class-bag lever: test_query_levers
    q = build_query(src, "m.py", position=(line, 10), scope="hover", levers=scope_only)
    assert q.scope.qualname == "B.__init__"
    assert q.architecture == {"A": 1.0, "LayerNorm": 1.0}
    q2 = build_query(src, "m.py", position=(src.split("\n").index("        return self.l(x)"), 10),
                     scope="hover", levers=scope_only)
    assert q2.architecture == {}
    assert build_query(src, "m.py", position=(line, 10), scope="hover").architecture == {
        "A": 1.0, "LayerNorm": 1.0, "B": 1.0}  # with the lever: the class's bag and its own name
    assert build_query(src, "m.py", scope="file").architecture == {"Linear": 1.0, "A": 1.0,
                                                                   "LayerNorm": 1.0}


def test_non_python_code_has_no_bag():
    assert architecture_bag("fn main() { let l = Linear::new(); }", "a.rs") == {}
    assert architecture_bag("nn.Linear(3)", "notes.txt") == {}


# ---- config files ------------------------------------------------------------------------------

def test_yaml_model_spec():
    src = '''
        # training config
        model:
          name: transformer
          dim: 512
          n_layers: 8
          norm: rmsnorm
          attention:
            type: GQA
            heads: 8
          ffn: {type: SwiGLU, hidden: 2048}
        optimizer: {name: adamw, lr: 3e-4}
    '''
    assert bag(src, "c.yaml") == {"transformer": 1.0, "rmsnorm": 1.0, "GQA": 1.0, "SwiGLU": 1.0}


def test_yaml_bags_lists_and_nesting():
    assert bag("architecture:\n  RMSNorm: 2\n  SwiGLU: 1\n  torch.nn.Linear: 4\n", "c.yml") == {
        "RMSNorm": 2.0, "SwiGLU": 1.0, "torch.nn.Linear": 4.0}
    assert bag("arch: [conv, conv, pool, Linear]\nother:\n  deep:\n    model: resnet50\n",
               "c.yaml") == {"conv": 2.0, "pool": 1.0, "Linear": 1.0, "resnet50": 1.0}
    # an explicit bag under `model` wins over the model's hyperparameters
    src = "model:\n  d_model: 768\n  n_layers: 12\n  architecture:\n    RMSNorm: 25\n    Expert: 48\n"
    assert bag(src, "moe.yaml") == {"RMSNorm": 25.0, "Expert": 48.0}
    # paths, booleans and non-positive counts are no components
    assert bag("model: checkpoints/base.pt\narchitecture: {A: 0, B: true, C: -1}\n", "c.yaml") == {}
    assert bag("model: best.safetensors\narch: [my model, null, 3]\n", "c.yaml") == {}


def test_json_and_toml():
    assert bag('{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096}',
               "config.json") == {"LlamaForCausalLM": 1.0, "llama": 1.0}
    toml = '''
        [model]
        arch = "resnet"
        components = ["BatchNorm", "ReLU"]

        [model.head]
        type = "Linear"
    '''
    assert bag(toml, "p.toml") == {"resnet": 1.0, "BatchNorm": 1.0, "ReLU": 1.0, "Linear": 1.0}


def test_broken_configs_give_what_can_be_read():
    broken_yaml = "model:\n  arch: [RMSNorm, RoPE]\n  norm: layernorm\ntrainer:\n  lr: [3e-4\n  steps: 100\n"
    assert bag(broken_yaml, "b.yaml") == {"RMSNorm": 1.0, "RoPE": 1.0, "layernorm": 1.0}
    broken_json = '{"model": {"type": "GPT", "layers": ["Attention", "MLP"]}, "lr": [1, '
    assert bag(broken_json, "b.json") == {"GPT": 1.0, "Attention": 1.0, "MLP": 1.0}
    broken_toml = '[model]\narch = "resnet"\n[x\nfoo = '
    assert bag(broken_toml, "b.toml") == {"resnet": 1.0}
    for text, path in ((":\n  - [", "x.yaml"), ("", "x.json"), ("[[[", "x.toml"), ("{", "x.json"),
                       ("- !!python/object:os.system x", "x.yaml")):
        assert bag(text, path) == {}


def test_config_query_text_and_selection():
    src = "# baseline\nmodel:\n  name: transformer\n  norm: rmsnorm\noptimizer:\n  name: adamw\n"
    q = build_query(src, "c.yaml", scope="file")
    assert q.architecture == {"transformer": 1.0, "rmsnorm": 1.0}
    assert {"baseline", "model", "transformer", "rmsnorm", "adamw"} <= set(q.text.split())
    q2 = build_query(src, "c.yaml", selection=((1, 0), (3, 15)), scope="find")
    assert q2.basis == "selection"
    assert q2.architecture == {"transformer": 1.0, "rmsnorm": 1.0}
    assert "adamw" not in q2.text.split()


def test_fixture_workspace_transformer():
    import pathlib

    import pytest

    root = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "workspace"
    path = root / "model" / "transformer.py"
    if not path.exists():
        pytest.skip("fixture workspace not present")
    src = path.read_text()
    names = {d.qualname for d in __import__("soma_lsp.query", fromlist=["definitions"]).definitions(src, "model/transformer.py")}
    assert {"RMSNorm", "RotaryEmbedding", "Attention", "SwiGLU", "TransformerBlock", "Transformer",
            "Attention.forward"} <= names
    b = architecture_bag(src, "model/transformer.py")
    assert {"RMSNorm", "RotaryEmbedding", "Attention", "SwiGLU", "TransformerBlock", "Linear"} <= set(b)
