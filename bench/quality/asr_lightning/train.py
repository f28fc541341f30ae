"""Trains the Conformer-CTC on LibriSpeech 960 h with Lightning: DDP, bf16, duration buckets."""

import json
import random

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
from omegaconf import OmegaConf
from torch.utils.data import DataLoader, Dataset, Sampler

from model.ctc_module import ConformerCTC
from model.features import speed_perturb


def load_manifest(path, max_duration, min_duration):
    entries = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            item = json.loads(line)
            if min_duration <= item["duration"] <= max_duration:
                entries.append(item)
    return entries


class AudioTextDataset(Dataset):
    def __init__(self, entries, tokenizer, sample_rate=16000, perturb=False):
        self.entries = entries
        self.tokenizer = tokenizer
        self.sample_rate = sample_rate
        self.perturb = perturb

    def __len__(self):
        return len(self.entries)

    def __getitem__(self, index):
        import soundfile

        item = self.entries[index]
        audio, _ = soundfile.read(item["audio_filepath"], dtype="float32")
        audio = torch.from_numpy(audio)
        if self.perturb:
            audio = speed_perturb(audio, self.sample_rate)
        return audio, torch.tensor(self.tokenizer.encode(item["text"].lower()))


class DurationBucketSampler(Sampler):
    """Batches of similar length, filled up to `batch_duration` seconds of audio each."""

    def __init__(self, entries, batch_duration=600.0, num_buckets=30, shuffle=True, seed=0):
        self.entries, self.batch_duration, self.num_buckets = entries, batch_duration, num_buckets
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0

    def __iter__(self):
        rng = random.Random(self.seed + self.epoch)
        order = sorted(range(len(self.entries)), key=lambda i: self.entries[i]["duration"])
        size = max(1, len(order) // self.num_buckets)
        batches = []
        for start in range(0, len(order), size):
            bucket = order[start:start + size]
            rng.shuffle(bucket)
            batch, seconds = [], 0.0
            for i in bucket:
                if seconds + self.entries[i]["duration"] > self.batch_duration and batch:
                    batches.append(batch)
                    batch, seconds = [], 0.0
                batch.append(i)
                seconds += self.entries[i]["duration"]
            if batch:
                batches.append(batch)
        if self.shuffle:
            rng.shuffle(batches)
        return iter(batches)


def average_checkpoints(paths):
    """Mean of the weights of several checkpoints (the last N by validation WER)."""
    states = [torch.load(p, map_location="cpu")["state_dict"] for p in paths]
    return {k: sum(s[k].float() for s in states) / len(states) for k in states[0]}


def main():
    cfg = OmegaConf.load("conf/conformer_ctc.yaml")
    pl.seed_everything(cfg.seed)
    model = ConformerCTC(cfg.model)
    trainer = pl.Trainer(
        devices=cfg.trainer.devices, strategy="ddp", precision=cfg.trainer.precision,
        max_steps=cfg.trainer.max_steps, accumulate_grad_batches=cfg.trainer.accumulate_grad_batches,
        gradient_clip_val=cfg.trainer.gradient_clip_val, val_check_interval=cfg.trainer.val_check_interval,
        callbacks=[ModelCheckpoint(monitor="val_wer", save_top_k=cfg.trainer.average_last, mode="min"),
                   LearningRateMonitor("step")])
    trainer.fit(model)


if __name__ == "__main__":
    main()
