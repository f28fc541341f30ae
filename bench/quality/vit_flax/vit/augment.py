"""Batch augmentations in jax.numpy: random resized crop, flips, mixup/cutmix, RandAugment-lite."""

import jax
import jax.numpy as jnp


def random_resized_crop(rng, image: jnp.ndarray, size: int, area_range=(0.08, 1.0),
                        aspect_range=(3 / 4, 4 / 3)) -> jnp.ndarray:
    """Inception-style crop: sample area and aspect ratio, crop, resize back to `size`."""
    h, w = image.shape[:2]
    area_rng, aspect_rng, y_rng, x_rng = jax.random.split(rng, 4)
    area = jax.random.uniform(area_rng, minval=area_range[0], maxval=area_range[1]) * h * w
    log_ratio = jax.random.uniform(aspect_rng, minval=jnp.log(aspect_range[0]), maxval=jnp.log(aspect_range[1]))
    ratio = jnp.exp(log_ratio)
    ch = jnp.clip(jnp.sqrt(area / ratio), 1, h).astype(jnp.int32)
    cw = jnp.clip(jnp.sqrt(area * ratio), 1, w).astype(jnp.int32)
    y0 = jax.random.randint(y_rng, (), 0, h - ch + 1)
    x0 = jax.random.randint(x_rng, (), 0, w - cw + 1)
    crop = jax.lax.dynamic_slice(image, (y0, x0, 0), (ch, cw, image.shape[2]))
    return jax.image.resize(crop, (size, size, image.shape[2]), method="bilinear")


def random_flip(rng, image: jnp.ndarray) -> jnp.ndarray:
    return jnp.where(jax.random.bernoulli(rng), image[:, ::-1], image)


def mixup(rng, images: jnp.ndarray, labels: jnp.ndarray, alpha: float = 0.8):
    """Convex combination of each example with a shuffled partner; labels mix the same way."""
    lam_rng, perm_rng = jax.random.split(rng)
    lam = jax.random.beta(lam_rng, alpha, alpha)
    perm = jax.random.permutation(perm_rng, images.shape[0])
    images = lam * images + (1 - lam) * images[perm]
    labels = lam * labels + (1 - lam) * labels[perm]
    return images, labels


def cutmix(rng, images: jnp.ndarray, labels: jnp.ndarray, alpha: float = 1.0):
    """Paste a random box from a shuffled partner; labels weighted by the pasted area."""
    lam_rng, perm_rng, y_rng, x_rng = jax.random.split(rng, 4)
    n, h, w, _ = images.shape
    lam = jax.random.beta(lam_rng, alpha, alpha)
    cut_h, cut_w = (h * jnp.sqrt(1 - lam)).astype(jnp.int32), (w * jnp.sqrt(1 - lam)).astype(jnp.int32)
    cy, cx = jax.random.randint(y_rng, (), 0, h), jax.random.randint(x_rng, (), 0, w)
    ys, xs = jnp.arange(h)[:, None], jnp.arange(w)[None, :]
    box = (jnp.abs(ys - cy) < cut_h // 2) & (jnp.abs(xs - cx) < cut_w // 2)
    perm = jax.random.permutation(perm_rng, n)
    images = jnp.where(box[None, :, :, None], images[perm], images)
    area = box.mean()
    labels = (1 - area) * labels + area * labels[perm]
    return images, labels


def color_jitter(rng, image: jnp.ndarray, strength: float = 0.4) -> jnp.ndarray:
    b_rng, c_rng = jax.random.split(rng)
    brightness = jax.random.uniform(b_rng, minval=1 - strength, maxval=1 + strength)
    contrast = jax.random.uniform(c_rng, minval=1 - strength, maxval=1 + strength)
    mean = image.mean()
    return jnp.clip((image * brightness - mean) * contrast + mean, 0.0, 1.0)


def rand_augment(rng, image: jnp.ndarray, num_layers: int = 2, magnitude: int = 9) -> jnp.ndarray:
    """A reduced RandAugment: `num_layers` ops drawn from {jitter, flip, solarize, posterize}."""
    m = magnitude / 30.0
    for op_rng in jax.random.split(rng, num_layers):
        choice_rng, apply_rng = jax.random.split(op_rng)
        op = jax.random.randint(choice_rng, (), 0, 4)
        image = jax.lax.switch(op, [
            lambda im: color_jitter(apply_rng, im, strength=m),
            lambda im: random_flip(apply_rng, im),
            lambda im: jnp.where(im > 1 - m, 1 - im, im),
            lambda im: jnp.floor(im * (8 - 4 * m)) / (8 - 4 * m),
        ], image)
    return image
