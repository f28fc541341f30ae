"""Weighted k-NN classification on frozen features of the teacher backbone, and a linear probe."""

import torch
import torch.nn as nn
import torch.nn.functional as F


@torch.no_grad()
def extract_features(model, loader):
    features, labels = [], []
    for images, targets in loader:
        out = model.forward_features(images.cuda(non_blocking=True))
        features.append(F.normalize(out["x_norm_clstoken"], dim=1, p=2))
        labels.append(targets.cuda())
    return torch.cat(features), torch.cat(labels)


@torch.no_grad()
def knn_classifier(train_features, train_labels, test_features, test_labels, k=20, T=0.07, num_classes=1000):
    top1, total = 0.0, 0
    for idx in range(0, test_features.shape[0], 256):
        feats = test_features[idx: idx + 256]
        targets = test_labels[idx: idx + 256]
        similarity = torch.mm(feats, train_features.t())
        distances, indices = similarity.topk(k, largest=True, sorted=True)
        retrieved = train_labels.view(1, -1).expand(len(targets), -1).gather(1, indices)
        one_hot = torch.zeros(len(targets) * k, num_classes, device=feats.device)
        one_hot.scatter_(1, retrieved.view(-1, 1), 1)
        weights = (distances / T).exp()
        probs = (one_hot.view(len(targets), -1, num_classes) * weights.view(len(targets), -1, 1)).sum(1)
        top1 += (probs.argmax(1) == targets).sum().item()
        total += len(targets)
    return 100.0 * top1 / total


class LinearClassifier(nn.Module):
    def __init__(self, dim, num_classes=1000, use_avgpool=True):
        super().__init__()
        self.use_avgpool = use_avgpool
        self.linear = nn.Linear(dim * (2 if use_avgpool else 1), num_classes)
        self.linear.weight.data.normal_(mean=0.0, std=0.01)
        self.linear.bias.data.zero_()

    def forward(self, out):
        x = out["x_norm_clstoken"]
        if self.use_avgpool:
            x = torch.cat((x, out["x_norm_patchtokens"].mean(dim=1)), dim=-1)
        return self.linear(x)


def accuracy(output, target, topk=(1,)):
    maxk = max(topk)
    _, pred = output.topk(maxk, 1, True, True)
    correct = pred.t().eq(target.reshape(1, -1).expand_as(pred.t()))
    return [correct[:k].reshape(-1).float().sum(0) * 100.0 / target.size(0) for k in topk]
