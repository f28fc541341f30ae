"""EncoderDecoder: backbone → decode head (+ auxiliary head in training), and the two test modes —
whole-image inference and sliding-window inference with overlapping crops — plus multi-scale + flip."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .heads import resize


class EncoderDecoder(nn.Module):
    def __init__(self, backbone, decode_head, auxiliary_head=None, loss_decode=None, sampler=None,
                 test_cfg=None, align_corners=False):
        super().__init__()
        self.backbone = backbone
        self.decode_head = decode_head
        self.auxiliary_head = auxiliary_head
        self.loss_decode = loss_decode
        self.sampler = sampler
        self.test_cfg = test_cfg or dict(mode="whole")
        self.align_corners = align_corners

    def _head_loss(self, head, feats, label):
        logits = resize(head(feats), label.shape[1:], align_corners=self.align_corners)
        pixel_weight = self.sampler.sample(logits, label) if self.sampler is not None else None
        return head.loss_weight * self.loss_decode(logits, label, pixel_weight)

    def forward_train(self, img, gt_semantic_seg):
        feats = self.backbone(img)
        label = gt_semantic_seg.squeeze(1).long()
        losses = {"decode.loss_ce": self._head_loss(self.decode_head, feats, label)}
        if self.auxiliary_head is not None:
            losses["aux.loss_ce"] = self._head_loss(self.auxiliary_head, feats, label)
        return losses

    def encode_decode(self, img):
        out = self.decode_head(self.backbone(img))
        return resize(out, img.shape[2:], align_corners=self.align_corners)

    def slide_inference(self, img, num_classes):
        h_stride, w_stride = self.test_cfg["stride"]
        h_crop, w_crop = self.test_cfg["crop_size"]
        batch, _, h_img, w_img = img.shape
        h_grids = max(h_img - h_crop + h_stride - 1, 0) // h_stride + 1
        w_grids = max(w_img - w_crop + w_stride - 1, 0) // w_stride + 1
        preds = img.new_zeros((batch, num_classes, h_img, w_img))
        count_mat = img.new_zeros((batch, 1, h_img, w_img))
        for h_idx in range(h_grids):
            for w_idx in range(w_grids):
                y1, x1 = h_idx * h_stride, w_idx * w_stride
                y2, x2 = min(y1 + h_crop, h_img), min(x1 + w_crop, w_img)
                y1, x1 = max(y2 - h_crop, 0), max(x2 - w_crop, 0)
                crop_seg_logit = self.encode_decode(img[:, :, y1:y2, x1:x2])
                preds += F.pad(crop_seg_logit, (int(x1), int(preds.shape[3] - x2), int(y1), int(preds.shape[2] - y2)))
                count_mat[:, :, y1:y2, x1:x2] += 1
        assert (count_mat == 0).sum() == 0
        return preds / count_mat

    def whole_inference(self, img):
        return self.encode_decode(img)

    def inference(self, img, ori_shape, num_classes):
        if self.test_cfg["mode"] == "slide":
            seg_logit = self.slide_inference(img, num_classes)
        else:
            seg_logit = self.whole_inference(img)
        seg_logit = resize(seg_logit, ori_shape, align_corners=self.align_corners)
        return seg_logit.softmax(dim=1)

    @torch.no_grad()
    def aug_test(self, imgs, ori_shape, num_classes, flip=True):
        """Multi-scale + flip: average the softmax over the rescaled images and their mirrors."""
        seg_prob = 0
        for img in imgs:
            seg_prob = seg_prob + self.inference(img, ori_shape, num_classes)
            if flip:
                seg_prob = seg_prob + self.inference(img.flip(dims=[3]), ori_shape, num_classes).flip(dims=[3])
        return seg_prob.argmax(dim=1)
