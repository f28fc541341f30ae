"""A name -> constructor registry, as timm's create_model reads it."""

from .convnext import convnext_small, convnext_tiny
from .resnet import resnet50, resnet50d

_MODELS = dict(convnext_tiny=convnext_tiny, convnext_small=convnext_small, resnet50=resnet50, resnet50d=resnet50d)


def create_model(model_name, num_classes=1000, drop_rate=0.0, drop_path_rate=None, **kwargs):
    """Build a registered model; drop_path_rate=None keeps the architecture's own default."""
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    if drop_path_rate is not None:
        kwargs["drop_path_rate"] = drop_path_rate
    return _MODELS[model_name](num_classes=num_classes, drop_rate=drop_rate, **kwargs)
