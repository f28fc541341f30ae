"""Front end: log-mel features, per-utterance normalisation and SpecAugment, computed on the GPU."""

import math

import torch
import torch.nn as nn
import torchaudio


class LogMelSpectrogram(nn.Module):
    """80 log-mel bins from 16 kHz audio, 25 ms windows every 10 ms."""

    def __init__(self, sample_rate=16000, n_fft=512, win_length=400, hop_length=160, n_mels=80,
                 dither=1e-5, log_zero_guard=2 ** -24):
        super().__init__()
        self.hop_length = hop_length
        self.dither = dither
        self.log_zero_guard = log_zero_guard
        self.mel = torchaudio.transforms.MelSpectrogram(
            sample_rate=sample_rate, n_fft=n_fft, win_length=win_length, hop_length=hop_length,
            n_mels=n_mels, window_fn=torch.hann_window, power=2.0, center=True)

    def forward(self, audio, audio_lens):
        if self.training and self.dither > 0:
            audio = audio + self.dither * torch.randn_like(audio)
        spec = self.mel(audio.float())
        spec = torch.log(spec + self.log_zero_guard)
        frame_lens = audio_lens // self.hop_length + 1
        return spec, frame_lens


def normalize_per_feature(spec, frame_lens, eps=1e-5):
    """Zero mean, unit variance per mel bin over the valid frames of each utterance."""
    mask = torch.arange(spec.size(-1), device=spec.device)[None, :] < frame_lens[:, None]
    mask = mask.unsqueeze(1).to(spec.dtype)
    count = mask.sum(-1, keepdim=True)
    mean = (spec * mask).sum(-1, keepdim=True) / count
    var = ((spec - mean) ** 2 * mask).sum(-1, keepdim=True) / (count - 1)
    return (spec - mean) / (var.sqrt() + eps) * mask


class SpecAugment(nn.Module):
    """Masks random frequency bands and time spans of the features during training."""

    def __init__(self, freq_masks=2, freq_width=27, time_masks=10, time_width=0.05, mask_value=0.0):
        super().__init__()
        self.freq_masks = freq_masks
        self.freq_width = freq_width
        self.time_masks = time_masks
        self.time_width = time_width
        self.mask_value = mask_value

    @torch.no_grad()
    def forward(self, spec, frame_lens):
        if not self.training:
            return spec
        batch, n_mels, _ = spec.shape
        for b in range(batch):
            for _ in range(self.freq_masks):
                width = int(torch.randint(0, self.freq_width + 1, ()))
                start = int(torch.randint(0, max(1, n_mels - width), ()))
                spec[b, start:start + width, :] = self.mask_value
            max_width = max(1, int(self.time_width * int(frame_lens[b])))
            for _ in range(self.time_masks):
                width = int(torch.randint(0, max_width + 1, ()))
                start = int(torch.randint(0, max(1, int(frame_lens[b]) - width), ()))
                spec[b, :, start:start + width] = self.mask_value
        return spec


def speed_perturb(audio, sample_rate, factors=(0.9, 1.0, 1.1)):
    """Resamples a clip to play faster or slower, picked uniformly from `factors`."""
    factor = factors[int(torch.randint(0, len(factors), ()))]
    if factor == 1.0:
        return audio
    return torchaudio.functional.resample(audio, int(sample_rate * factor), sample_rate)


def num_frames(duration, hop_length=160, sample_rate=16000):
    return math.floor(duration * sample_rate / hop_length) + 1
