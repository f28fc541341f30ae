"""The LightningModule: Conformer encoder, a linear CTC head over SentencePiece pieces, greedy decoding."""

import json

import lightning.pytorch as pl
import sentencepiece as spm
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchmetrics.text import WordErrorRate

from .conformer import ConformerEncoder
from .features import LogMelSpectrogram, SpecAugment, normalize_per_feature


class ConformerCTC(pl.LightningModule):
    def __init__(self, cfg):
        super().__init__()
        self.save_hyperparameters(cfg)
        self.cfg = cfg
        self.tokenizer = spm.SentencePieceProcessor(model_file=cfg.tokenizer.model_path)
        self.blank_id = self.tokenizer.get_piece_size()  # blank is the last class, after the pieces
        self.preprocessor = LogMelSpectrogram(n_mels=cfg.features.n_mels, hop_length=cfg.features.hop_length)
        self.spec_augment = SpecAugment(**cfg.spec_augment)
        self.encoder = ConformerEncoder(n_mels=cfg.features.n_mels, **cfg.encoder)
        self.decoder = nn.Conv1d(cfg.encoder.d_model, self.blank_id + 1, kernel_size=1)
        self.interctc_layers = tuple(cfg.interctc.layers)
        self.interctc_weight = cfg.interctc.weight
        self.wer = WordErrorRate()

    def forward(self, audio, audio_lens):
        spec, frame_lens = self.preprocessor(audio, audio_lens)
        spec = normalize_per_feature(spec, frame_lens)
        spec = self.spec_augment(spec, frame_lens)
        enc, enc_lens, hidden = self.encoder(spec, frame_lens, return_layers=self.interctc_layers)
        log_probs = self.decoder(enc.transpose(1, 2)).transpose(1, 2).log_softmax(-1)
        return log_probs, enc_lens, hidden

    def ctc_loss(self, log_probs, enc_lens, targets, target_lens):
        return F.ctc_loss(log_probs.transpose(0, 1).float(), targets, enc_lens, target_lens,
                          blank=self.blank_id, reduction="mean", zero_infinity=True)

    def training_step(self, batch, batch_idx):
        audio, audio_lens, targets, target_lens = batch
        log_probs, enc_lens, hidden = self(audio, audio_lens)
        loss = self.ctc_loss(log_probs, enc_lens, targets, target_lens)
        if self.interctc_weight > 0:
            inter = [self.ctc_loss(self.decoder(h.transpose(1, 2)).transpose(1, 2).log_softmax(-1),
                                   enc_lens, targets, target_lens) for h in hidden.values()]
            loss = (1 - self.interctc_weight) * loss + self.interctc_weight * torch.stack(inter).mean()
        self.log("train_loss", loss, prog_bar=True, sync_dist=True)
        return loss

    def greedy_decode(self, log_probs, enc_lens):
        """Best class per frame, repeats collapsed, blanks dropped."""
        best = log_probs.argmax(-1)
        texts = []
        for seq, length in zip(best, enc_lens):
            pieces, previous = [], self.blank_id
            for token in seq[:length].tolist():
                if token != previous and token != self.blank_id:
                    pieces.append(token)
                previous = token
            texts.append(self.tokenizer.decode(pieces))
        return texts

    def validation_step(self, batch, batch_idx):
        audio, audio_lens, targets, target_lens = batch
        log_probs, enc_lens, _ = self(audio, audio_lens)
        self.log("val_loss", self.ctc_loss(log_probs, enc_lens, targets, target_lens), sync_dist=True)
        hyps = self.greedy_decode(log_probs, enc_lens)
        refs = [self.tokenizer.decode(t[:n].tolist()) for t, n in zip(targets, target_lens)]
        self.wer.update(hyps, refs)

    def on_validation_epoch_end(self):
        self.log("val_wer", self.wer.compute(), prog_bar=True, sync_dist=True)
        self.wer.reset()

    def configure_optimizers(self):
        opt = self.cfg.optim
        decay, no_decay = [], []
        for name, param in self.named_parameters():
            (no_decay if param.ndim < 2 or "pos_bias" in name else decay).append(param)
        optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": opt.weight_decay},
                                       {"params": no_decay, "weight_decay": 0.0}],
                                      lr=opt.lr, betas=(opt.beta1, opt.beta2), eps=1e-9)
        d_model, warmup_steps = self.cfg.encoder.d_model, opt.warmup_steps

        def noam_annealing(step):
            step = max(step, 1)
            return opt.scale * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5) / opt.lr

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, noam_annealing)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def write_transcripts(self, hyps, path):
        with open(path, "w", encoding="utf-8") as out:
            for hyp in hyps:
                out.write(json.dumps({"pred_text": hyp}) + "\n")
