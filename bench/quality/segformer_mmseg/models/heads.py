"""Decode heads: SegFormer's all-MLP head, UperNet (pyramid pooling + FPN) for ConvNeXt/Swin backbones,
and the auxiliary FCN head on the third stage whose loss is added with a small weight during training."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def resize(x, size, mode="bilinear", align_corners=False):
    return F.interpolate(x, size=size, mode=mode, align_corners=align_corners)


class ConvModule(nn.Sequential):
    """conv → norm → ReLU; `norm_type` is "SyncBN" in multi-GPU training, "BN" on one card."""

    def __init__(self, in_ch, out_ch, kernel_size=1, padding=0, norm_type="SyncBN"):
        norm = nn.SyncBatchNorm(out_ch) if norm_type == "SyncBN" else nn.BatchNorm2d(out_ch)
        super().__init__(nn.Conv2d(in_ch, out_ch, kernel_size, padding=padding, bias=False), norm,
                         nn.ReLU(inplace=True))


class BaseDecodeHead(nn.Module):
    def __init__(self, channels, num_classes, dropout_ratio=0.1, align_corners=False, loss_weight=1.0):
        super().__init__()
        self.num_classes = num_classes
        self.align_corners = align_corners
        self.loss_weight = loss_weight
        self.dropout = nn.Dropout2d(dropout_ratio) if dropout_ratio > 0 else nn.Identity()
        self.conv_seg = nn.Conv2d(channels, num_classes, kernel_size=1)

    def cls_seg(self, feat):
        return self.conv_seg(self.dropout(feat))


class SegformerHead(BaseDecodeHead):
    """Each of the four stages is projected to `channels` by a 1x1 layer, upsampled to 1/4 scale,
    concatenated and fused by one more 1x1 layer: no dilated convolutions, no pyramid pooling."""

    def __init__(self, in_channels=(64, 128, 320, 512), channels=256, num_classes=150, interpolate_mode="bilinear",
                 **kwargs):
        super().__init__(channels, num_classes, **kwargs)
        self.interpolate_mode = interpolate_mode
        self.convs = nn.ModuleList([ConvModule(c, channels, 1) for c in in_channels])
        self.fusion_conv = ConvModule(channels * len(in_channels), channels, 1)

    def forward(self, inputs):
        size = inputs[0].shape[2:]
        outs = [resize(conv(x), size, self.interpolate_mode, self.align_corners)
                for conv, x in zip(self.convs, inputs)]
        return self.cls_seg(self.fusion_conv(torch.cat(outs[::-1], dim=1)))


class PPM(nn.ModuleList):
    def __init__(self, pool_scales, in_channels, channels, align_corners=False):
        super().__init__([nn.Sequential(nn.AdaptiveAvgPool2d(s), ConvModule(in_channels, channels, 1))
                          for s in pool_scales])
        self.align_corners = align_corners

    def forward(self, x):
        return [resize(stage(x), x.shape[2:], align_corners=self.align_corners) for stage in self]


class UPerHead(BaseDecodeHead):
    """UperNet: pyramid pooling on the last stage, then a top-down FPN over all four and a 3x3 fusion."""

    def __init__(self, in_channels=(96, 192, 384, 768), channels=512, num_classes=150, pool_scales=(1, 2, 3, 6),
                 **kwargs):
        super().__init__(channels, num_classes, **kwargs)
        self.psp_modules = PPM(pool_scales, in_channels[-1], channels, self.align_corners)
        self.bottleneck = ConvModule(in_channels[-1] + len(pool_scales) * channels, channels, 3, padding=1)
        self.lateral_convs = nn.ModuleList([ConvModule(c, channels, 1) for c in in_channels[:-1]])
        self.fpn_convs = nn.ModuleList([ConvModule(channels, channels, 3, padding=1) for _ in in_channels[:-1]])
        self.fpn_bottleneck = ConvModule(len(in_channels) * channels, channels, 3, padding=1)

    def forward(self, inputs):
        laterals = [conv(inputs[i]) for i, conv in enumerate(self.lateral_convs)]
        x = inputs[-1]
        laterals.append(self.bottleneck(torch.cat([x] + self.psp_modules(x), dim=1)))
        for i in range(len(laterals) - 1, 0, -1):
            laterals[i - 1] = laterals[i - 1] + resize(laterals[i], laterals[i - 1].shape[2:],
                                                       align_corners=self.align_corners)
        outs = [self.fpn_convs[i](laterals[i]) for i in range(len(laterals) - 1)] + [laterals[-1]]
        outs = [resize(o, outs[0].shape[2:], align_corners=self.align_corners) for o in outs]
        return self.cls_seg(self.fpn_bottleneck(torch.cat(outs, dim=1)))


class FCNHead(BaseDecodeHead):
    """Auxiliary head: `num_convs` 3x3 layers on one backbone stage, trained with `loss_weight` 0.4 and
    dropped at inference."""

    def __init__(self, in_channels=384, in_index=2, channels=256, num_convs=1, concat_input=False,
                 num_classes=150, loss_weight=0.4, **kwargs):
        super().__init__(channels, num_classes, loss_weight=loss_weight, **kwargs)
        self.in_index = in_index
        convs = [ConvModule(in_channels if i == 0 else channels, channels, 3, padding=1) for i in range(num_convs)]
        self.convs = nn.Sequential(*convs)
        self.conv_cat = ConvModule(in_channels + channels, channels, 3, padding=1) if concat_input else None

    def forward(self, inputs):
        x = inputs[self.in_index]
        out = self.convs(x)
        if self.conv_cat is not None:
            out = self.conv_cat(torch.cat([x, out], dim=1))
        return self.cls_seg(out)
