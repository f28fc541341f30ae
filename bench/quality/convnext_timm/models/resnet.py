"""ResNet-50 (bottleneck) with the ResNet-D tweaks as an option: a deep 3x3 stem and average-pool shortcuts.
The baseline of "ResNet strikes back" (timm's A1 recipe: LAMB, BCE, 600 epochs)."""

import torch.nn as nn

from .layers import DropPath


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None, norm_layer=nn.BatchNorm2d, drop_path=0.0):
        super().__init__()
        width = planes
        outplanes = planes * self.expansion
        self.conv1 = nn.Conv2d(inplanes, width, kernel_size=1, bias=False)
        self.bn1 = norm_layer(width)
        self.conv2 = nn.Conv2d(width, width, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn2 = norm_layer(width)
        self.conv3 = nn.Conv2d(width, outplanes, kernel_size=1, bias=False)
        self.bn3 = norm_layer(outplanes)
        self.act = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()

    def zero_init_last(self):
        nn.init.zeros_(self.bn3.weight)

    def forward(self, x):
        shortcut = x
        x = self.act(self.bn1(self.conv1(x)))
        x = self.act(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        if self.downsample is not None:
            shortcut = self.downsample(shortcut)
        return self.act(self.drop_path(x) + shortcut)


def downsample_avg(in_chs, out_chs, stride, norm_layer):
    pool = nn.AvgPool2d(2, stride, ceil_mode=True, count_include_pad=False) if stride > 1 else nn.Identity()
    return nn.Sequential(pool, nn.Conv2d(in_chs, out_chs, 1, stride=1, bias=False), norm_layer(out_chs))


class ResNet(nn.Module):
    def __init__(self, layers=(3, 4, 6, 3), num_classes=1000, stem_type="", avg_down=False,
                 zero_init_last=True, drop_rate=0.0, drop_path_rate=0.0, norm_layer=nn.BatchNorm2d):
        super().__init__()
        self.drop_rate = drop_rate
        if stem_type == "deep":
            self.conv1 = nn.Sequential(
                nn.Conv2d(3, 32, 3, stride=2, padding=1, bias=False), norm_layer(32), nn.ReLU(inplace=True),
                nn.Conv2d(32, 32, 3, padding=1, bias=False), norm_layer(32), nn.ReLU(inplace=True),
                nn.Conv2d(32, 64, 3, padding=1, bias=False))
        else:
            self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = norm_layer(64)
        self.act1 = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        inplanes, net_block_idx, total = 64, 0, sum(layers)
        stages = []
        for i, (planes, n) in enumerate(zip((64, 128, 256, 512), layers)):
            stride = 1 if i == 0 else 2
            blocks = []
            for j in range(n):
                ds = None
                if j == 0 and (stride != 1 or inplanes != planes * 4):
                    ds = (downsample_avg(inplanes, planes * 4, stride, norm_layer) if avg_down else nn.Sequential(
                        nn.Conv2d(inplanes, planes * 4, 1, stride=stride, bias=False), norm_layer(planes * 4)))
                dpr = drop_path_rate * net_block_idx / (total - 1)
                blocks.append(Bottleneck(inplanes, planes, stride if j == 0 else 1, ds, norm_layer, dpr))
                inplanes = planes * 4
                net_block_idx += 1
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.global_pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512 * 4, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        if zero_init_last:
            for m in self.modules():
                if hasattr(m, "zero_init_last"):
                    m.zero_init_last()

    def forward(self, x):
        x = self.maxpool(self.act1(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = self.global_pool(x).flatten(1)
        if self.drop_rate:
            x = nn.functional.dropout(x, p=self.drop_rate, training=self.training)
        return self.fc(x)


def resnet50(**kwargs):
    return ResNet(layers=(3, 4, 6, 3), **kwargs)


def resnet50d(**kwargs):
    return ResNet(layers=(3, 4, 6, 3), stem_type="deep", avg_down=True, **kwargs)
