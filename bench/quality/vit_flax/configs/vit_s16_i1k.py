"""ViT-S/16 on ImageNet-1k from scratch, DeiT-style recipe (300 epochs, heavy augmentation)."""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    config.dataset = "imagenet2012"
    config.num_classes = 1000
    config.image_size = 224
    config.batch_size = 1024

    config.patch_size = 16
    config.hidden_size = 384
    config.num_layers = 12
    config.num_heads = 6
    config.mlp_dim = 1536
    config.pool_type = "gap"
    config.droppath_rate = 0.1

    config.learning_rate = 1e-3
    config.warmup_steps = 10_000
    config.total_steps = 375_000
    config.weight_decay = 0.05
    config.grad_clip_norm = 1.0
    config.ema_decay = 0.9999

    config.label_smoothing = 0.1
    config.mixup_alpha = 0.8
    config.cutmix_alpha = 1.0
    config.cutmix_prob = 0.5
    config.randaug_layers = 2
    config.randaug_magnitude = 9
    return config
