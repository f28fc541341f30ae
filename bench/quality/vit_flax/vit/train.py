"""Training step and state for the ViT: optax AdamW, warmup + cosine, EMA of the weights, pmap."""

import functools
from typing import Any

import flax
import jax
import jax.numpy as jnp
import optax
from flax.training import train_state

from . import augment
from .model import VisionTransformer


class TrainState(train_state.TrainState):
    ema_params: Any = None
    dropout_rng: Any = None


def cross_entropy_loss(logits: jnp.ndarray, labels: jnp.ndarray, num_classes: int,
                       eps: float = 0.1) -> jnp.ndarray:
    """Soft-target cross entropy; hard labels are spread by `eps` over all classes first."""
    one_hot = jax.nn.one_hot(labels, num_classes) if labels.ndim == 1 else labels
    targets = one_hot * (1.0 - eps) + eps / num_classes
    return -jnp.sum(targets * jax.nn.log_softmax(logits), axis=-1).mean()


def make_schedule(config) -> optax.Schedule:
    return optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=config.learning_rate, warmup_steps=config.warmup_steps,
        decay_steps=config.total_steps, end_value=config.learning_rate * 1e-2)


def make_optimizer(config) -> optax.GradientTransformation:
    """Global-norm clipping, then AdamW; no decay on biases, norms and position embeddings."""
    def decay_mask(params):
        flat = flax.traverse_util.flatten_dict(params)
        return flax.traverse_util.unflatten_dict(
            {k: (k[-1] == "kernel" and "pos_embedding" not in k) for k in flat})
    return optax.chain(
        optax.clip_by_global_norm(config.grad_clip_norm),
        optax.adamw(make_schedule(config), b1=0.9, b2=0.999, weight_decay=config.weight_decay,
                    mask=decay_mask))


def create_train_state(rng, config) -> TrainState:
    model = VisionTransformer(num_classes=config.num_classes, patch_size=config.patch_size,
                              hidden_size=config.hidden_size, num_layers=config.num_layers,
                              num_heads=config.num_heads, mlp_dim=config.mlp_dim,
                              pool_type=config.pool_type, droppath_rate=config.droppath_rate)
    params_rng, dropout_rng = jax.random.split(rng)
    dummy = jnp.ones((1, config.image_size, config.image_size, 3), jnp.float32)
    params = model.init({"params": params_rng}, dummy, train=False)["params"]
    return TrainState.create(apply_fn=model.apply, params=params, tx=make_optimizer(config),
                             ema_params=params, dropout_rng=dropout_rng)


def augment_batch(rng, images, labels, config):
    crop_rng, ra_rng, mix_rng, switch_rng = jax.random.split(rng, 4)
    images = jax.vmap(lambda r, im: augment.random_resized_crop(r, im, config.image_size))(
        jax.random.split(crop_rng, images.shape[0]), images)
    images = jax.vmap(lambda r, im: augment.rand_augment(r, im, config.randaug_layers, config.randaug_magnitude))(
        jax.random.split(ra_rng, images.shape[0]), images)
    labels = jax.nn.one_hot(labels, config.num_classes)
    use_cutmix = jax.random.bernoulli(switch_rng, config.cutmix_prob)
    return jax.lax.cond(use_cutmix,
                        lambda: augment.cutmix(mix_rng, images, labels, config.cutmix_alpha),
                        lambda: augment.mixup(mix_rng, images, labels, config.mixup_alpha))


@functools.partial(jax.pmap, axis_name="batch", static_broadcasted_argnums=(3,))
def train_step(state: TrainState, images, labels, config):
    rng, aug_rng, drop_rng = jax.random.split(state.dropout_rng, 3)
    images, targets = augment_batch(aug_rng, images, labels, config)

    def loss_fn(params):
        logits = state.apply_fn({"params": params}, images, train=True, rngs={"droppath": drop_rng,
                                                                              "dropout": drop_rng})
        return cross_entropy_loss(logits, targets, config.num_classes, eps=config.label_smoothing), logits

    (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    grads = jax.lax.pmean(grads, axis_name="batch")
    state = state.apply_gradients(grads=grads)
    ema = jax.tree_util.tree_map(lambda e, p: config.ema_decay * e + (1 - config.ema_decay) * p,
                                 state.ema_params, state.params)
    state = state.replace(ema_params=ema, dropout_rng=rng)
    metrics = {"loss": jax.lax.pmean(loss, "batch"),
               "grad_norm": optax.global_norm(grads),
               "accuracy": jax.lax.pmean(jnp.mean(jnp.argmax(logits, -1) == jnp.argmax(targets, -1)), "batch")}
    return state, metrics


@functools.partial(jax.pmap, axis_name="batch")
def eval_step(state: TrainState, images, labels):
    logits = state.apply_fn({"params": state.ema_params}, images, train=False)
    return {"top1": jax.lax.pmean(jnp.mean(jnp.argmax(logits, -1) == labels), "batch")}
