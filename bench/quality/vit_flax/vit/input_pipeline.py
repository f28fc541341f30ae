"""tf.data input pipeline: decode, shard per host, batch per device for pmap."""

import jax
import tensorflow as tf
import tensorflow_datasets as tfds

MEAN_RGB = (0.485, 0.456, 0.406)
STDDEV_RGB = (0.229, 0.224, 0.225)


def normalize_image(image: tf.Tensor) -> tf.Tensor:
    image = tf.cast(image, tf.float32) / 255.0
    return (image - tf.constant(MEAN_RGB)) / tf.constant(STDDEV_RGB)


def center_crop(image: tf.Tensor, size: int, crop_fraction: float = 0.875) -> tf.Tensor:
    shape = tf.shape(image)
    side = tf.cast(tf.cast(tf.minimum(shape[0], shape[1]), tf.float32) * crop_fraction, tf.int32)
    image = tf.image.resize_with_crop_or_pad(image, side, side)
    return tf.image.resize(image, (size, size), method="bicubic")


def create_split(dataset: str, batch_size: int, train: bool, image_size: int = 224,
                 shuffle_buffer: int = 16 * 1024) -> tf.data.Dataset:
    split = tfds.split_for_jax_process("train" if train else "validation")
    ds = tfds.load(dataset, split=split, shuffle_files=train)

    def prepare(example):
        image = example["image"]
        if not train:
            image = center_crop(image, image_size)
        else:
            image = tf.image.resize(image, (image_size + 32, image_size + 32))
        return {"image": normalize_image(image), "label": example["label"]}

    if train:
        ds = ds.repeat().shuffle(shuffle_buffer, seed=0)
    ds = ds.map(prepare, num_parallel_calls=tf.data.AUTOTUNE)
    local_devices = jax.local_device_count()
    ds = ds.batch(batch_size // jax.process_count() // local_devices, drop_remainder=train)
    ds = ds.batch(local_devices, drop_remainder=train)
    return ds.prefetch(tf.data.AUTOTUNE)
